// Package stack is the AWS CDK definition of the whole system: the tables,
// queues, topics and functions of shared/, wired the way internal/localstack/wiring wires
// them to the local engines, plus the API, the Supervisor's schedule, alarms
// and a dashboard.
package stack

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// The functions/ folders the stack deploys; the Agent is deployed once per
// workflow step.
const (
	Submission = "submission"
	Scheduler  = "scheduler"
	Agent      = "agent"
	Supervisor = "supervisor"
	Notifier   = "notifier"
	Timer      = "timer"
	Deadline   = "deadline"
)

// Functions lists every folder of functions/ the stack deploys.
func Functions() []string {
	return []string{Submission, Scheduler, Agent, Supervisor, Notifier, Timer, Deadline}
}

// RemoteURLPattern is the AllowedPattern of the remote base URL parameters:
// an absolute https URL without query or fragment.
const RemoteURLPattern = `^https://[^\s?#]+$`

// NotifierTimeout bounds one batch of StreamBatchSize SNS publishes.
const NotifierTimeout = 30 * time.Second

// New defines the stack. cfg must be valid (FromContext validates it).
func New(scope constructs.Construct, id string, cfg Config, props *awscdk.StackProps) awscdk.Stack {
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if props.Description == nil {
		props.Description = jsii.String(Description(cfg.Workflows))
	}
	s := awscdk.NewStack(scope, jsii.String(id), props)
	b := &builder{stack: s, cfg: cfg}

	alertEmail := awscdk.NewCfnParameter(s, jsii.String("AlertEmail"), &awscdk.CfnParameterProps{
		Type:                  jsii.String("String"),
		Default:               jsii.String(""),
		AllowedPattern:        jsii.String(`^$|^[^@\s]+@[^@\s]+\.[^@\s]+$`),
		ConstraintDescription: jsii.String("an e-mail address, or empty for no subscription"),
		Description:           jsii.String("E-mail address subscribed to the operator alert topic (confirm the subscription mail). Empty: no subscription."),
	})

	tables := b.tables()
	alerts := b.alertTopic(alertEmail.ValueAsString())
	events := b.orderEventsTopic()
	queues := b.queues()

	env := map[string]*string{
		"ORDERS_TABLE":        tables[0].TableName(),
		"STATE_TABLE":         tables[1].TableName(),
		"SCHEDULER_QUEUE_URL": queues.scheduler.main.QueueUrl(),
		"ALERT_TOPIC_ARN":     alerts.topic.TopicArn(),
		"RESPONSE_QUEUE_URL":  queues.responses.main.QueueUrl(),
		// Every function that ends an order (sets its record's TTL) or
		// creates one (its orders item's TTL) reads the retention.
		"RETENTION": jsii.String(cfg.Retention.String()),
	}
	pick := func(keys ...string) *map[string]*string {
		m := make(map[string]*string, len(keys))
		for _, k := range keys {
			m[k] = env[k]
		}
		return &m
	}
	orders, state := tables[0], tables[1]

	// Submission: writes the order and its state record in one transaction
	// (PutItem on both tables), reads them back for GET and idempotent
	// replays, lists a caller's own orders from the orders table's ByOwner
	// index with their state records in one BatchGetItem, lists orders by
	// state from the ByState index for operators, retries and cancels with
	// conditional UpdateItem, dispatches a new order's first step (claimed
	// in its transaction) to that step's Agent, and sends Schedule messages.
	// An Idempotency-Key is an item of the orders table of its own, written
	// in the order's transaction and read (GetItem) for a replay. An
	// operator's retry or cancel moves the orders item's TTL in the same
	// transaction as the record (UpdateItem on both tables: a transaction
	// needs the permission of each action in it, "Using IAM with DynamoDB
	// transactions",
	// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html),
	// and a cancel that leaves a step without an undo applied tells the
	// operators' topic at once.
	//
	// A new order may start on any live version (the current one, or one
	// its submission names), so it gets the queue of every version's first
	// step, as step=url pairs like the Scheduler's.
	agentNames := cfg.Workflows.AgentNames()
	firstSteps := cfg.Workflows.FirstSteps()
	subEnv := pick("ORDERS_TABLE", "STATE_TABLE", "SCHEDULER_QUEUE_URL", "RETENTION", "ALERT_TOPIC_ARN")
	(*subEnv)["AGENT_QUEUE_URLS"] = queueURLs(queues, firstSteps)
	// Its admission check reads the depth of every Agent's request queue
	// (GetQueueAttributes) and sheds new orders while any holds more than
	// the capacity model's backlog.
	admissionURLs := make([]string, 0, len(agentNames))
	for _, name := range agentNames {
		admissionURLs = append(admissionURLs, *queues.agents[name].main.QueueUrl())
	}
	adm := cfg.Capacity.Admission(admissionURLs)
	// The URLs are tokens until deploy time: CloudFormation joins them.
	(*subEnv)[admission.Variables["Queues"]] = awscdk.Fn_Join(jsii.String(","), jsii.Strings(adm.Queues...))
	(*subEnv)[admission.Variables["Backlog"]] = jsii.String(strconv.Itoa(adm.Backlog))
	(*subEnv)[admission.Variables["Rate"]] = jsii.String(strconv.Itoa(adm.Rate))
	(*subEnv)[admission.Variables["Refresh"]] = jsii.String(adm.Refresh.String())
	// It refuses the operator routes to anyone but the operators, whom the
	// API's operator role and a deploy-time parameter name (b.api below);
	// the variable is set once the role exists.
	submission := b.function(Submission, fnSpec{
		description: "The orders API: validates and writes new orders and dispatches their first step, reads and lists them, retries and cancels them",
		trigger:     byAPI,
		timeout:     topology.SubmissionTimeout, memory: topology.SubmissionMemoryMB, env: subEnv,
	})
	allowTable(submission.role, orders, "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allowTable(submission.role, state, "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem")
	// GET /ops/workflows counts the open orders from the in-flight index
	// and ByState (statestore.Store.CountOpen).
	allow(submission.role, []string{"dynamodb:Query"},
		jsii.String(*state.TableArn()+"/index/"+statestore.ByStateIndex),
		jsii.String(*state.TableArn()+"/index/"+statestore.InFlightIndex),
		jsii.String(*orders.TableArn()+"/index/"+statestore.ByOwnerIndex))
	for _, name := range firstSteps {
		allowSend(submission.role, queues.agents[name].main)
	}
	allowSend(submission.role, queues.scheduler.main)
	alerts.allowPublish(submission.role)
	admissionARNs := make([]*string, 0, len(agentNames))
	for _, name := range agentNames {
		admissionARNs = append(admissionARNs, queues.agents[name].main.QueueArn())
	}
	allow(submission.role, []string{"sqs:GetQueueAttributes"}, admissionARNs...)

	// The Scheduler and the Supervisor name the API's URL in their alerts'
	// ready-to-run operator commands. They depend on the API resource, and
	// nothing of the API depends on them, so this adds no cycle. Submission,
	// which backs the API, does not read the URL and does not get it.
	api := b.api(submission)
	env["OPERATOR_API_URL"] = api.api.ApiEndpoint()
	// The role depends on the API (its policy names the API's routes), not
	// on the function: no cycle.
	submission.fn.AddEnvironment(jsii.String("OPERATOR_PRINCIPALS"), b.operatorPrincipals(api.operatorRole), nil)

	// Scheduler: claims, commits and fails state records with conditional
	// UpdateItem, reads a record (GetItem) before it commits a permanent
	// failure, dispatches to the agents, alerts on permanent faults.
	// It consumes the scheduler and response queues, so it can bring a
	// failed message back sooner (the event source mapping's grant already
	// has sqs:ChangeMessageVisibility), and hands a failed dispatch back to
	// the first.
	schedEnv := pick("ORDERS_TABLE", "STATE_TABLE", "ALERT_TOPIC_ARN", "OPERATOR_API_URL", "SCHEDULER_QUEUE_URL", "RESPONSE_QUEUE_URL", "RETENTION")
	// Every Agent: an order's next step is any step of its pinned version.
	(*schedEnv)["AGENT_QUEUE_URLS"] = queueURLs(queues, agentNames)
	(*schedEnv)["MAX_RECEIVE_COUNT"] = jsii.String(strconv.Itoa(cfg.MaxReceiveCount))
	scheduler := b.function(Scheduler, fnSpec{
		description: "Claims steps, dispatches them to their Agents and commits the replies, from the scheduler and response queues",
		trigger:     byQueue,
		timeout:     topology.SchedulerTimeout, memory: topology.SchedulerMemoryMB, env: schedEnv,
	})
	allowTable(scheduler.role, state, "dynamodb:UpdateItem", "dynamodb:GetItem")
	// Confirming an alert keeps the order's orders item for good, in the
	// same transaction (workflow.Machine.AlertSent).
	allowTable(scheduler.role, orders, "dynamodb:UpdateItem")
	for _, name := range agentNames {
		allowSend(scheduler.role, queues.agents[name].main)
	}
	allowSend(scheduler.role, queues.scheduler.main)
	alerts.allowPublish(scheduler.role)
	b.consume(scheduler, queues.scheduler, topology.SchedulerBatchSize, 0)
	b.consume(scheduler, queues.responses, topology.SchedulerBatchSize, 0)

	// One Agent per step name across the live versions, each behind its
	// own queue, timed out at the step's longest lease (Agents' union); the
	// event source's maximum concurrency, from the capacity model, keeps
	// the calls in flight to what the remote service takes.
	agents := make(map[string]*fn, len(agentNames))
	for _, st := range cfg.Workflows.Agents() {
		// https only: the Agent sends the order's step over it.
		remote := awscdk.NewCfnParameter(s, jsii.String(pascal(st.Name)+"RemoteBaseUrl"), &awscdk.CfnParameterProps{
			Type:                  jsii.String("String"),
			AllowedPattern:        jsii.String(RemoteURLPattern),
			ConstraintDescription: jsii.String("an absolute https:// URL without query or fragment"),
			Description:           jsii.String(fmt.Sprintf("Base URL of the remote service the %s Agent calls (POST {url}/v1/steps/%s with an Idempotency-Key header).", st.Name, st.Name)),
		})
		// The Agent alerts on a poison request's last receive.
		agentEnv := pick("RESPONSE_QUEUE_URL", "ALERT_TOPIC_ARN")
		(*agentEnv)["MAX_RECEIVE_COUNT"] = jsii.String(strconv.Itoa(cfg.MaxReceiveCount))
		(*agentEnv)["AGENT_STEP"] = jsii.String(st.Name)
		(*agentEnv)["REMOTE_BASE_URL"] = remote.ValueAsString()
		// Its own queue: a request whose reply could not be sent comes back
		// on it within seconds.
		(*agentEnv)["REQUEST_QUEUE_URL"] = queues.agents[st.Name].main.QueueUrl()
		a := b.function(Agent, fnSpec{
			id:          "Agent-" + st.Name,
			description: fmt.Sprintf("Agent for step %s: calls its remote service with retries until CompleteBy and replies to the Scheduler", st.Name),
			trigger:     byQueue,
			timeout:     topology.AgentTimeout(st), memory: topology.AgentMemoryMB, env: agentEnv,
		})
		allowSend(a.role, queues.responses.main)
		alerts.allowPublish(a.role)
		b.consume(a, queues.agents[st.Name], topology.AgentBatchSize, cfg.Capacity.AgentMaxConcurrency())
		agents[st.Name] = a
	}

	// Supervisor: queries the in-flight index (keys only), reads those
	// records (BatchGetItem) to see their deadlines, recovers expired ones
	// with conditional UpdateItem, re-sends steps to the Scheduler, alerts.
	supervisor := b.function(Supervisor, fnSpec{
		description: "Runs on a schedule: finds state records whose CompleteBy passed, retries them or marks them Error and alerts",
		trigger:     bySchedule,
		timeout:     topology.SupervisorTimeout, memory: topology.SupervisorMemoryMB, env: pick("ORDERS_TABLE", "STATE_TABLE", "SCHEDULER_QUEUE_URL", "ALERT_TOPIC_ARN", "OPERATOR_API_URL", "RETENTION"),
		// A failed run is redone by the next tick; Lambda's own async
		// retries would only overlap it.
		asyncRetries: jsii.Number(0),
	})
	allow(supervisor.role, []string{"dynamodb:Query"}, jsii.String(*state.TableArn()+"/index/"+statestore.InFlightIndex))
	allowTable(supervisor.role, state, "dynamodb:UpdateItem", "dynamodb:BatchGetItem")
	// An alert confirmed, or a record open past its OpenUntil, moves its
	// orders item's TTL in the same transaction.
	allowTable(supervisor.role, orders, "dynamodb:UpdateItem")
	allowSend(supervisor.role, queues.scheduler.main)
	alerts.allowPublish(supervisor.role)
	rule := awsevents.NewRule(s, jsii.String("SupervisorSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Runs the Supervisor"),
		Schedule:    awsevents.Schedule_Expression(jsii.String(cfg.SupervisorSchedule)),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(supervisor.fn, &awseventstargets.LambdaFunctionProps{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
	}))
	suppress(rule, nagScheduleDLQ, deadLetterReasons[bySchedule], false)
	suppress(supervisor.fn.Node().FindChild(jsii.String("EventInvokeConfig")), nagAsyncFailures, deadLetterReasons[bySchedule], false)

	// The Supervisor's fast path. Timer: reads the state table's stream and
	// sends each new phase of a watched record a Deadline, delayed until
	// its CompleteBy. Deadline: consumes them, reads the record (GetItem)
	// and recovers it as the sweep would (conditional UpdateItem, a
	// hand-back to the Scheduler, alerts).
	timerFn := b.function(Timer, fnSpec{
		description: "Reads the state table's stream and arms a Deadline, delayed until CompleteBy, for each new phase of a record the Supervisor watches",
		trigger:     byStream,
		timeout:     topology.TimerTimeout, memory: topology.TimerMemoryMB,
		env: &map[string]*string{"DEADLINE_QUEUE_URL": queues.deadlines.main.QueueUrl()},
	})
	allowSend(timerFn.role, queues.deadlines.main)
	timerDLQ := b.failureQueue("TimerDLQ", "Timer")
	b.consumeStream(timerFn, state, timerDLQ)
	deadlineEnv := pick("ORDERS_TABLE", "STATE_TABLE", "SCHEDULER_QUEUE_URL", "ALERT_TOPIC_ARN", "OPERATOR_API_URL", "RETENTION")
	(*deadlineEnv)["DEADLINE_QUEUE_URL"] = queues.deadlines.main.QueueUrl()
	deadline := b.function(Deadline, fnSpec{
		description: "The Supervisor's fast path: recovers a state record the moment its CompleteBy passes, from the Deadlines the Timer armed",
		trigger:     byQueue,
		timeout:     topology.DeadlineTimeout, memory: topology.DeadlineMemoryMB, env: deadlineEnv,
	})
	allowTable(deadline.role, state, "dynamodb:GetItem", "dynamodb:UpdateItem")
	allowTable(deadline.role, orders, "dynamodb:UpdateItem")
	allowSend(deadline.role, queues.scheduler.main)
	alerts.allowPublish(deadline.role)
	b.consume(deadline, queues.deadlines, topology.DeadlineBatchSize, 0)

	// Notifier: publishes each client-visible status change, read from the
	// state table's stream, to the order events topic.
	notifier := b.function(Notifier, fnSpec{
		description: "Reads the state table's stream and publishes each change of an order's client status to the order events topic",
		trigger:     byStream,
		timeout:     NotifierTimeout, memory: topology.NotifierMemoryMB,
		env: &map[string]*string{"ORDER_EVENTS_TOPIC_ARN": events.topic.TopicArn()},
	})
	events.allowPublish(notifier.role)
	notifierDLQ := b.failureQueue("NotifierDLQ", "Notifier")
	b.consumeStream(notifier, state, notifierDLQ)

	// Deploy order: CloudFormation updates every other actor before the
	// Submission, so a version made current in this deploy reaches new
	// orders only once the Scheduler, the Supervisor, its fast path and
	// every Agent run code that knows it (and the new steps' Agents
	// exist). The Scheduler, the Supervisor and the Deadline function
	// depend on the API's URL, but the API resource itself depends on
	// nothing of theirs, nor of the Submission (its integration and routes
	// do): no cycle. The Timer and the Notifier read no definition.
	for _, other := range append([]*fn{scheduler, supervisor, deadline}, agentsOf(agents, agentNames)...) {
		submission.fn.Node().AddDependency(other.fn)
	}

	fns := append([]*fn{submission, scheduler, supervisor}, agentsOf(agents, agentNames)...)
	fns = append(fns, notifier, timerFn, deadline)
	b.alarms(alerts, queues, agents, fns)
	shed := b.shedding(alerts, submission)
	failing := []awscloudwatch.IMetric{
		b.errorLines(alerts, fns),
		b.batchItemFailures(alerts, fns),
		b.notifierSkipped(alerts, notifier),
		b.api5xx(alerts, api.stage, submission),
	}
	b.lambdaThrottles(alerts, fns, agentsOf(agents, agentNames))
	throttled := b.tableThrottles(alerts, orders, state)
	b.supervisorHeartbeat(alerts, supervisor)
	b.streamAlarms(alerts, notifier, notifierDLQ, "clients are not being notified meanwhile",
		"the description of stream records that expired before the Notifier could publish them; those clients missed events")
	b.streamAlarms(alerts, timerFn, timerDLQ, "the Supervisor's fast path is not armed meanwhile (the sweep still recovers, within its schedule)",
		"the description of stream records that expired before the Timer armed their Deadline; the sweep recovers those records")
	// Agents commit nothing, and the Notifier and the Timer only read what
	// others committed: only these log transitions.
	dash := b.dashboard(queues, fns, []*fn{submission, scheduler, supervisor, deadline}, shed, notifierView{fn: notifier, failures: notifierDLQ, events: events},
		failureView{fn: timerFn, queue: timerDLQ})
	// What the operational alarms watch, beside their alarms' thresholds.
	dash.AddWidgets(
		awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String("Failures the handlers report (per minute)"), Left: &failing, Width: jsii.Number(12), Height: jsii.Number(6),
		}),
		awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String("DynamoDB throttle events (left), Supervisor runs (right), per minute"), Left: &throttled,
			Right: &[]awscloudwatch.IMetric{supervisor.fn.MetricInvocations(&awscloudwatch.MetricOptions{
				Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Sum"), Label: jsii.String(supervisor.id + " runs"),
			})},
			Width: jsii.Number(12), Height: jsii.Number(6),
		}))

	out := func(id, value, desc string) {
		awscdk.NewCfnOutput(s, jsii.String(id), &awscdk.CfnOutputProps{Value: jsii.String(value), Description: jsii.String(desc)})
	}
	out("ApiUrl", *api.api.ApiEndpoint(), "Base URL of the orders API (IAM-authorized: sign requests with SigV4, service execute-api)")
	out("ClientPolicyArn", *api.clientPolicy.ManagedPolicyArn(), "Attach to the IAM users or roles that may submit, list and read orders")
	out("OperatorPolicyArn", *api.operatorPolicy.ManagedPolicyArn(), "Attached to OrderOperatorRole; attach it to each principal listed in OperatorPrincipalArns")
	out("OperatorRoleArn", *api.operatorRole.RoleArn(), "Operators assume this role (sasctl with a profile whose role_arn is it) to list, read, retry and cancel every client's orders")
	out("AlertTopicArn", *alerts.topic.TopicArn(), "Operator alerts: permanent failures, exhausted retries, alarms")
	out("OrderEventsTopicArn", *events.topic.TopicArn(), "Order status events: clients subscribe their SQS queue with a filter policy on the clientId message attribute")
	out("OrdersTableName", *orders.TableName(), "Orders, one item per order")
	out("StateTableName", *state.TableName(), "State records, one per order")
	out("SchedulerQueueUrl", *queues.scheduler.main.QueueUrl(), "Schedule messages for the Scheduler")
	out("DashboardName", *dash.DashboardName(), "CloudWatch dashboard of the order flow")
	return s
}

// builder carries what every part of the stack needs.
type builder struct {
	stack awscdk.Stack
	cfg   Config
}

func (b *builder) codePath(function string) string {
	return filepath.Join(b.cfg.CodeDir, function)
}

// queueURLs is the step=url list of the named Agents' request queues that
// the Scheduler and the Submission read (AGENT_QUEUE_URLS); the URLs are
// tokens, which CloudFormation joins.
func queueURLs(queues queueSet, steps []string) *string {
	pairs := make([]string, len(steps))
	for i, name := range steps {
		pairs[i] = name + "=" + *queues.agents[name].main.QueueUrl()
	}
	return jsii.String(strings.Join(pairs, ","))
}

// agentsOf lists the named Agents' functions, in that order.
func agentsOf(agents map[string]*fn, names []string) []*fn {
	out := make([]*fn, len(names))
	for i, name := range names {
		out[i] = agents[name]
	}
	return out
}

// maxDescription is CloudFormation's limit on a stack's description.
const maxDescription = 1024

// Description is the stack's description: the workflow versions it runs,
// each with its steps, the current ones starred. A catalog too long for
// CloudFormation's 1024 characters is listed by version IDs only, and cut
// short if even that is too long.
func Description(c workflow.Catalog) string {
	head, tail := "Scheduler Agent Supervisor: orders through ", " (github.com/sasflow/sas)"
	full := make([]string, len(c.Definitions))
	ids := make([]string, len(c.Definitions))
	for i, d := range c.Definitions {
		ids[i] = d.ID()
		// With one version, current goes without saying.
		if c.CurrentID(d.Name) == d.ID() && len(c.Definitions) > 1 {
			ids[i] += "*"
		}
		names := make([]string, len(d.Steps))
		for j, s := range d.Steps {
			names[j] = s.Name
		}
		full[i] = ids[i] + " (" + strings.Join(names, ", ") + ")"
	}
	if len(c.Definitions) > 1 {
		tail = "; * current" + tail
	}
	if s := head + strings.Join(full, ", ") + tail; len(s) <= maxDescription {
		return s
	}
	s := head + strings.Join(ids, ", ") + tail
	if len(s) <= maxDescription {
		return s
	}
	const cut = "..."
	return s[:maxDescription-len(tail)-len(cut)] + cut + tail
}

// pascal turns a step name (reserve-inventory) into a CloudFormation logical
// ID part (ReserveInventory).
func pascal(s string) string {
	var sb strings.Builder
	for part := range strings.SplitSeq(s, "-") {
		if part != "" {
			sb.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return sb.String()
}
