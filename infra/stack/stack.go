// Package stack is the AWS CDK definition of the whole system: the tables,
// queues, topics and functions of shared/, wired the way
// internal/localstack/wiring wires them to the local engines, plus the API,
// the Supervisor's schedule, alarms and a dashboard.
//
// One file per actor holds everything of it: submission.go (with api.go),
// scheduler.go, agent.go, supervisor.go (with its fast path's Deadline
// function), timer.go and notifier.go. Each actor's environment and grants
// come from its descriptor in shared/topology (actors.go). New composes
// them with what they share: data.go (tables), messaging.go (queues,
// topics), functions.go (functions, event sources, environments, grants),
// observability.go and opsalarms.go (alarms, the dashboard).
package stack

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// The functions/ folders the stack deploys; the Agent is deployed once per
// workflow step.
const (
	Submission = topology.Submission
	Scheduler  = topology.Scheduler
	Agent      = topology.Agent
	Supervisor = topology.Supervisor
	Notifier   = topology.Notifier
	Timer      = topology.Timer
	Deadline   = topology.Deadline
)

// Functions lists every folder of functions/ the stack deploys.
func Functions() []string {
	return []string{Submission, Scheduler, Agent, Supervisor, Notifier, Timer, Deadline}
}

// RemoteURLPattern is the AllowedPattern of the remote base URL parameters:
// one absolute https URL without query or fragment, or up to
// agent.MaxReplicas of them separated by commas (the replicas of the step's
// service, which share one idempotency state). A value of one URL, as every
// stack had before replicas, still matches, so an update keeps it.
// CloudFormation's patterns are Java regular expressions and must match the
// whole value ("Using regular expressions in CloudFormation templates",
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-regexes.html).
const RemoteURLPattern = `^https://[^\s?#,]+(,https://[^\s?#,]+){0,7}$`

// NotifierTimeout bounds one batch of StreamBatchSize SNS publishes.
const NotifierTimeout = 30 * time.Second

// New defines the stack. cfg must be valid (FromContext validates it). It
// only composes: each actor's resources (queues, function, environment,
// grants, event sources, alarms) are in the actor's own file (submission.go,
// scheduler.go, agent.go, supervisor.go, timer.go, notifier.go), what
// several share in data.go, messaging.go and observability.go.
func New(scope constructs.Construct, id string, cfg Config, props *awscdk.StackProps) awscdk.Stack {
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if props.Description == nil {
		props.Description = jsii.String(Description(cfg.Workflows))
	}
	s := awscdk.NewStack(scope, jsii.String(id), props)
	b := &builder{stack: s, cfg: cfg}
	sh := b.shared()

	// The Submission first: the Scheduler and the Supervisor name its API
	// in their alerts.
	submission := b.submission(sh)
	scheduler := b.scheduler(sh)
	agents := b.agents(sh)
	b.replySenders(scheduler, agents)
	supervisor := b.supervisor(sh)
	timer := b.timer(sh)
	deadline := b.deadline(sh)
	notifier := b.notifier(sh)

	// Deploy order: CloudFormation updates every other actor before the
	// Submission, so a version made current in this deploy reaches new
	// orders only once the Scheduler, the Supervisor, its fast path and
	// every Agent run code that knows it (and the new steps' Agents
	// exist). The Scheduler, the Supervisor and the Deadline function
	// depend on the API's URL, but the API resource itself depends on
	// nothing of theirs, nor of the Submission (its integration and routes
	// do): no cycle. The Timer and the Notifier read no definition.
	for _, other := range append([]*fn{scheduler, supervisor, deadline}, agents...) {
		submission.fn.fn.Node().AddDependency(other.fn)
	}

	// What every function has: ERROR lines, batch item failures and
	// throttles counted across them, on the common dashboard.
	fns := append([]*fn{submission.fn, scheduler, supervisor}, agents...)
	fns = append(fns, notifier.fn, timer.fn, deadline)
	failing := []awscloudwatch.IMetric{
		b.errorLines(sh.alerts, fns),
		b.batchItemFailures(sh.alerts, fns),
		notifier.skipped,
		submission.api5xx,
	}
	b.lambdaThrottles(sh.alerts, fns, agents)
	throttled := b.tableThrottles(sh.alerts, sh.orders, sh.state)
	// Agents commit nothing, and the Notifier and the Timer only read what
	// others committed: only these log transitions.
	dash := b.dashboard(sh.queues, fns, []*fn{submission.fn, scheduler, supervisor, deadline}, submission.shed,
		notifierView{fn: notifier.fn, failures: notifier.failures, events: sh.events},
		failureView{fn: timer.fn, queue: timer.failures})
	b.handlerWidgets(dash, failing, throttled, supervisor)
	b.outputs(sh, submission.api, dash)
	return s
}

// shared declares what several actors use: the operators' alert topic
// (and its e-mail parameter), the order events topic, the tables, the work
// queues, and the values of the environment variables that name them.
func (b *builder) shared() *sharedResources {
	alertEmail := awscdk.NewCfnParameter(b.stack, jsii.String("AlertEmail"), &awscdk.CfnParameterProps{
		Type:                  jsii.String("String"),
		Default:               jsii.String(""),
		AllowedPattern:        jsii.String(`^$|^[^@\s]+@[^@\s]+\.[^@\s]+$`),
		ConstraintDescription: jsii.String("an e-mail address, or empty for no subscription"),
		Description:           jsii.String("E-mail address subscribed to the operator alert topic (confirm the subscription mail). Empty: no subscription."),
	})
	tables := b.tables()
	sh := &sharedResources{orders: tables[0], state: tables[1], ledger: b.ledgerTable()}
	sh.alerts = b.alertTopic(alertEmail.ValueAsString())
	sh.events = b.orderEventsTopic()
	sh.queues = b.queues()
	sh.env = map[string]*string{
		topology.EnvOrdersTable:         sh.orders.TableName(),
		topology.EnvStateTable:          sh.state.TableName(),
		topology.EnvSchedulerQueueURL:   sh.queues.scheduler.main.QueueUrl(),
		topology.EnvResponseQueueURL:    sh.queues.responses.main.QueueUrl(),
		topology.EnvDeadlineQueueURL:    sh.queues.deadlines.main.QueueUrl(),
		topology.EnvAlertTopicARN:       sh.alerts.topic.TopicArn(),
		topology.EnvOrderEventsTopicARN: sh.events.topic.TopicArn(),
		topology.EnvMaxReceiveCount:     jsii.String(strconv.Itoa(b.cfg.MaxReceiveCount)),
		// Every function that ends an order (sets its record's TTL) or
		// creates one (its orders item's TTL) reads the retention.
		topology.EnvRetention:   jsii.String(b.cfg.Retention.String()),
		topology.EnvLedgerTable: sh.ledger.TableName(),
	}
	return sh
}

// sharedResources are what several actors use.
type sharedResources struct {
	orders, state  awsdynamodb.Table
	ledger         awsdynamodb.Table
	alerts, events *encryptedTopic
	queues         queueSet
	// env holds the values of the variables more than one actor reads,
	// by name; the Submission adds the API's URL once the API exists.
	env map[string]*string
}

// handlerWidgets adds what the operational alarms watch to the dashboard,
// beside their alarms' thresholds.
func (b *builder) handlerWidgets(dash awscloudwatch.Dashboard, failing, throttled []awscloudwatch.IMetric, supervisor *fn) {
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
}

// outputs are the stack's outputs: what clients, operators and sasctl need.
func (b *builder) outputs(sh *sharedResources, api *orderAPI, dash awscloudwatch.Dashboard) {
	out := func(id, value, desc string) {
		awscdk.NewCfnOutput(b.stack, jsii.String(id), &awscdk.CfnOutputProps{Value: jsii.String(value), Description: jsii.String(desc)})
	}
	out("ApiUrl", *api.api.ApiEndpoint(), "Base URL of the orders API (IAM-authorized: sign requests with SigV4, service execute-api)")
	out("ClientPolicyArn", *api.clientPolicy.ManagedPolicyArn(), "Attach to the IAM users or roles that may submit, list and read orders")
	out("OperatorPolicyArn", *api.operatorPolicy.ManagedPolicyArn(), "Attached to OrderOperatorRole; attach it to each principal listed in OperatorPrincipalArns")
	out("OperatorRoleArn", *api.operatorRole.RoleArn(), "Operators assume this role (sasctl with a profile whose role_arn is it) to list, read, retry and cancel every client's orders")
	out("AlertTopicArn", *sh.alerts.topic.TopicArn(), "Operator alerts: permanent failures, exhausted retries, alarms")
	out("OrderEventsTopicArn", *sh.events.topic.TopicArn(), "Order status events: clients subscribe their SQS queue with a filter policy on the clientId message attribute")
	out("OrdersTableName", *sh.orders.TableName(), "Orders, one item per order")
	out("StateTableName", *sh.state.TableName(), "State records, one per order")
	out("SchedulerQueueUrl", *sh.queues.scheduler.main.QueueUrl(), "Schedule messages for the Scheduler")
	out("DashboardName", *dash.DashboardName(), "CloudWatch dashboard of the order flow")
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
