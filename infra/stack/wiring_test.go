package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/scheduler"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/supervisor"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// loader runs a function's own configuration loader against the environment
// the stack gives it.
type loader struct {
	path string
	load func(getenv func(string) string) (any, error)
	// points maps variables to the logical ID prefix of what they must name.
	points map[string]string
	check  func(t *testing.T, cfg any, vars map[string]any)
}

func adapt[C any](f func(func(string) string) (C, error)) func(func(string) string) (any, error) {
	return func(getenv func(string) string) (any, error) { return f(getenv) }
}

var loaders = func() []loader {
	tables := map[string]string{topology.EnvOrdersTable: "OrdersTable", topology.EnvStateTable: "StateTable"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range tables {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	ls := []loader{
		{path: "Submission", load: adapt(submission.LoadConfig), points: with(map[string]string{topology.EnvSchedulerQueueURL: "SchedulerQueue", topology.EnvAlertTopicARN: "AlertTopic"}),
			check: func(t *testing.T, cfg any, vars map[string]any) {
				// New orders go to the live versions' first steps' Agents.
				checkAgentQueueURLs(t, vars, deployedCatalog().FirstSteps())
				// The admission check reads every Agent's request queue, in
				// step order, with the capacity model's figures.
				got := cfg.(submission.Config).Admission
				var queues []string
				for _, q := range got.Queues {
					queues = append(queues, strings.TrimPrefix(q, "https://sqs.eu-west-1.amazonaws.com/111122223333/"))
				}
				steps := deployedCatalog().Agents()
				if len(queues) != len(steps) {
					t.Fatalf("ADMISSION_QUEUES %v, want one queue per step", got.Queues)
				}
				for i, s := range steps {
					if !strings.HasPrefix(queues[i], pascalStep(s.Name)+"Queue") || strings.Contains(queues[i], "DLQ") {
						t.Errorf("ADMISSION_QUEUES[%d] is %s, want step %s's request queue", i, queues[i], s.Name)
					}
				}
				model := stack.DefaultConfig().Capacity
				want := model.Admission(got.Queues)
				if got.Backlog != want.Backlog || got.Rate != want.Rate || got.Refresh != want.Refresh {
					t.Errorf("admission %+v, the capacity model's is %+v", got, want)
				}
				// The deployed default, spelled out: 500 orders a second
				// (5 invocations of 10 calls of 100 ms), a second of it.
				if got.Backlog != 500 || got.Rate != 500 || got.Refresh.String() != "250ms" {
					t.Errorf("admission %+v, want backlog 500, rate 500, refresh 250ms", got)
				}
			}},
		{path: "Scheduler", load: adapt(scheduler.LoadConfig), points: with(map[string]string{topology.EnvAlertTopicARN: "AlertTopic",
			topology.EnvSchedulerQueueURL: "SchedulerQueue", topology.EnvResponseQueueURL: "ResponseQueue"}),
			check: func(t *testing.T, cfg any, vars map[string]any) {
				if got, want := cfg.(scheduler.Config).OperatorAPIURL, apiURL(t); got != want {
					t.Errorf("scheduler OperatorAPIURL %q, want %q", got, want)
				}
				if got := cfg.(scheduler.Config).MaxReceiveCount; got != stack.DefaultConfig().MaxReceiveCount {
					t.Errorf("scheduler MaxReceiveCount %d, the queues redrive after %d", got, stack.DefaultConfig().MaxReceiveCount)
				}
				checkAgentQueueURLs(t, vars, deployedCatalog().AgentNames())
				queues := cfg.(scheduler.Config).AgentQueues
				for _, s := range deployedCatalog().Agents() {
					id := strings.TrimPrefix(queues[s.Name], "https://sqs.eu-west-1.amazonaws.com/111122223333/")
					if !strings.HasPrefix(id, pascalStep(s.Name)+"Queue") || strings.Contains(id, "DLQ") {
						t.Errorf("step %s dispatches to %s", s.Name, queues[s.Name])
					}
				}
			}},
		{path: "Supervisor", load: adapt(supervisor.LoadConfig), points: with(map[string]string{topology.EnvSchedulerQueueURL: "SchedulerQueue", topology.EnvAlertTopicARN: "AlertTopic"}),
			check: func(t *testing.T, cfg any, _ map[string]any) {
				if got, want := cfg.(supervisor.Config).OperatorAPIURL, apiURL(t); got != want {
					t.Errorf("supervisor OperatorAPIURL %q, want %q", got, want)
				}
			}},
		{path: "Notifier", load: adapt(notifier.LoadConfig), points: map[string]string{topology.EnvOrderEventsTopicARN: "OrderEventsTopic"},
			check: func(t *testing.T, cfg any, _ map[string]any) {
				id, _ := tmpl.byPath(t, "AWS::SNS::Topic", "OrderEventsTopic/Resource")
				if got := cfg.(notifier.Config).OrderEventsTopicARN; !strings.HasSuffix(got, ":"+id) {
					t.Errorf("notifier publishes to %q, want the topic %s", got, id)
				}
			}},
		{path: "Timer", load: adapt(timer.LoadConfig), points: map[string]string{topology.EnvDeadlineQueueURL: "DeadlineQueue"}},
		{path: "Deadline", load: adapt(supervisor.LoadDeadlineConfig), points: with(map[string]string{topology.EnvSchedulerQueueURL: "SchedulerQueue",
			topology.EnvAlertTopicARN: "AlertTopic", topology.EnvDeadlineQueueURL: "DeadlineQueue"}),
			check: func(t *testing.T, cfg any, _ map[string]any) {
				if got, want := cfg.(supervisor.DeadlineConfig).OperatorAPIURL, apiURL(t); got != want {
					t.Errorf("deadline OperatorAPIURL %q, want %q", got, want)
				}
			}},
	}
	codeSteps := stack.DefaultConfig().CodeSteps
	for _, s := range deployedCatalog().Agents() {
		if m, ok := codeSteps[s.Name]; ok {
			ls = append(ls, codeStepLoader(s.Name, m))
			continue
		}
		ls = append(ls, loader{
			path: "Agent" + pascalStep(s.Name), load: adapt(agent.LoadConfig),
			points: map[string]string{topology.EnvResponseQueueURL: "ResponseQueue", topology.EnvRemoteBaseURLs: pascalStep(s.Name) + "RemoteBaseUrl", topology.EnvAlertTopicARN: "AlertTopic",
				topology.EnvRequestQueueURL: pascalStep(s.Name) + "Queue"},
			check: func(t *testing.T, cfg any, _ map[string]any) {
				c := cfg.(agent.Config)
				if c.Step != s.Name || c.MaxReceiveCount != stack.DefaultConfig().MaxReceiveCount {
					t.Errorf("agent serves step %q with MaxReceiveCount %d, want %q and the queues' %d", c.Step, c.MaxReceiveCount, s.Name, stack.DefaultConfig().MaxReceiveCount)
				}
			},
		})
	}
	return ls
}()

// codeStepLoader reads the environment of code step name's function: every
// variable the descriptor says its runtime reads, each set, and the
// manifest's own, each resolved from its parameter.
//
// It stands for the code-step runtime's configuration loader
// (shared/codestep), which takes its place once that package lands.
func codeStepLoader(name string, m stepgen.Manifest) loader {
	return loader{
		path: "Step" + pascalStep(name),
		load: func(getenv func(string) string) (any, error) {
			got := map[string]string{}
			var missing []string
			for _, k := range topology.Describe(topology.CodeStep).DeployedEnv() {
				if got[k] = getenv(k); got[k] == "" {
					missing = append(missing, k)
				}
			}
			for k := range m.Environment {
				if got[k] = getenv(k); got[k] == "" {
					missing = append(missing, k)
				}
			}
			if len(missing) > 0 {
				return nil, fmt.Errorf("code step %s: %v unset", name, missing)
			}
			return got, nil
		},
		points: map[string]string{topology.EnvResponseQueueURL: "ResponseQueue", topology.EnvAlertTopicARN: "AlertTopic",
			topology.EnvRequestQueueURL: pascalStep(name) + "Queue", topology.EnvLedgerTable: "LedgerTable"},
		check: func(t *testing.T, cfg any, _ map[string]any) {
			env := cfg.(map[string]string)
			if env[topology.EnvAgentStep] != name || env[topology.EnvMaxReceiveCount] != fmt.Sprint(stack.DefaultConfig().MaxReceiveCount) {
				t.Errorf("code step serves step %q with MaxReceiveCount %s, want %q and the queues' %d", env[topology.EnvAgentStep],
					env[topology.EnvMaxReceiveCount], name, stack.DefaultConfig().MaxReceiveCount)
			}
			// The manifest's values, their parameters resolved as deployed.
			for k, v := range m.Environment {
				want := v
				for _, p := range stepgen.Parts(v) {
					if p.Ref != "" {
						want = strings.ReplaceAll(want, "${"+p.Ref+"}", "value-of-"+strings.ToLower(p.Ref))
					}
				}
				if env[k] != want {
					t.Errorf("%s = %q, want %q", k, env[k], want)
				}
			}
		},
	}
}

// apiURL is the orders API's endpoint as the resolver resolves it.
func apiURL(t *testing.T) string {
	t.Helper()
	id, _ := tmpl.byPath(t, "AWS::ApiGatewayV2::Api", "OrdersApi/Resource")
	return "https://" + id + ".execute-api.eu-west-1.amazonaws.com"
}

// deployedCatalog is the catalog the default stack deploys.
func deployedCatalog() workflow.Catalog { return catalog.MustDeployed() }

// checkAgentQueueURLs checks a function's AGENT_QUEUE_URLS: step=url pairs
// naming exactly steps, in order, each with its Agent's request queue.
func checkAgentQueueURLs(t *testing.T, vars map[string]any, steps []string) {
	t.Helper()
	v, ok := vars[topology.EnvAgentQueueURLs]
	if !ok {
		t.Errorf("AGENT_QUEUE_URLS is not set, want %v", steps)
		return
	}
	var parts []any
	if j, ok := get(v, "Fn::Join").([]any); ok && len(j) == 2 && j[0] == "" {
		parts = list(j[1])
	} else {
		parts = []any{v}
	}
	// The pairs as written: step names literal, queue URLs referenced.
	var got []string
	var text strings.Builder
	for _, p := range parts {
		if s, ok := p.(string); ok {
			text.WriteString(s)
			continue
		}
		text.WriteString("{" + ref(p) + "}")
	}
	for pair := range strings.SplitSeq(text.String(), ",") {
		name, id, ok := strings.Cut(pair, "=")
		if !ok {
			t.Errorf("AGENT_QUEUE_URLS %s: %q is not step=url", toJSON(v), pair)
			continue
		}
		got = append(got, name)
		id = strings.Trim(id, "{}")
		if !strings.HasPrefix(id, pascalStep(name)+"Queue") || strings.Contains(id, "DLQ") {
			t.Errorf("AGENT_QUEUE_URLS: step %s names %s, want its request queue", name, id)
		}
	}
	if toJSON(got) != toJSON(steps) {
		t.Errorf("AGENT_QUEUE_URLS names %v, want %v", got, steps)
	}
}

func pascalStep(s string) string {
	var b strings.Builder
	for _, p := range strings.Split(s, "-") {
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

type tableSchema struct {
	path string
	want map[string]any
}

// tableSchemas renders statestore's CreateTable requests in CloudFormation's
// shape.
func tableSchemas(t *testing.T) []tableSchema {
	t.Helper()
	inputs := statestore.CreateTableInputs(statestore.Tables{Orders: "o", State: "s"})
	paths := []string{"OrdersTable", "StateTable"}
	var out []tableSchema
	for i, in := range inputs {
		keys := func(ks any) []any {
			var l []any
			b, _ := json.Marshal(ks)
			var raw []map[string]any
			_ = json.Unmarshal(b, &raw)
			for _, k := range raw {
				l = append(l, map[string]any{"AttributeName": k["AttributeName"], "KeyType": k["KeyType"]})
			}
			return l
		}
		want := map[string]any{"KeySchema": keys(in.KeySchema)}
		var attrs []any
		for _, a := range in.AttributeDefinitions {
			attrs = append(attrs, map[string]any{"AttributeName": aws.ToString(a.AttributeName), "AttributeType": string(a.AttributeType)})
		}
		want["AttributeDefinitions"] = attrs
		var gsis []any
		for _, g := range in.GlobalSecondaryIndexes {
			proj := map[string]any{"ProjectionType": string(g.Projection.ProjectionType)}
			if len(g.Projection.NonKeyAttributes) > 0 {
				proj["NonKeyAttributes"] = g.Projection.NonKeyAttributes
			}
			gsis = append(gsis, map[string]any{"IndexName": aws.ToString(g.IndexName), "KeySchema": keys(g.KeySchema), "Projection": proj})
		}
		if gsis != nil {
			want["GlobalSecondaryIndexes"] = gsis
		}
		if in.StreamSpecification != nil && aws.ToBool(in.StreamSpecification.StreamEnabled) {
			want["StreamSpecification"] = map[string]any{"StreamViewType": string(in.StreamSpecification.StreamViewType)}
		}
		out = append(out, tableSchema{path: paths[i], want: want})
	}
	return out
}

// canonical renders v as JSON with every list sorted, for order-insensitive
// comparison.
func canonical(v any) string {
	b, _ := json.Marshal(v)
	var x any
	_ = json.Unmarshal(b, &x)
	return toJSON(sortLists(x))
}

func sortLists(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = sortLists(v[i])
		}
		sort.Slice(v, func(i, j int) bool { return toJSON(v[i]) < toJSON(v[j]) })
		return v
	case map[string]any:
		for k := range v {
			v[k] = sortLists(v[k])
		}
	}
	return v
}

func transitions() []workflow.Transition { return workflow.Transitions() }

var consume = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}

// viaSNS is the condition of a KMS grant for publishing to an encrypted
// topic: the key serves the role only through SNS (in the resolver's
// region).
const viaSNS = " if StringEquals kms:ViaService=sns.eu-west-1.amazonaws.com"

// roleActions is what each handler's code calls, by action and resource:
// the stack must grant exactly this.
var roleActions = func() map[string]map[string][]string {
	logs, add, alerts := grantLogs, addGrants, grantAlerts
	out := map[string]map[string][]string{}

	// An operator's cancel that leaves a step without an undo applied tells
	// the operators at once.
	sub := alerts(logs("Submission"))
	add(sub, []string{"OrdersTable", "StateTable"}, "dynamodb:PutItem", "dynamodb:GetItem")
	// A retry or cancel moves the orders item's TTL with the record, in one
	// transaction.
	add(sub, []string{"OrdersTable"}, "dynamodb:UpdateItem")
	// Retry and cancel are conditional updates; GET /ops/orders lists by
	// state; GET /orders lists the caller's order IDs from the orders
	// table's ByOwner index, then their state records in one batch; GET
	// /ops/workflows counts the open records of the in-flight index and
	// ByState.
	add(sub, []string{"StateTable"}, "dynamodb:UpdateItem", "dynamodb:BatchGetItem")
	add(sub, []string{"StateTable/index/" + statestore.ByStateIndex, "StateTable/index/" + statestore.InFlightIndex,
		"OrdersTable/index/" + statestore.ByOwnerIndex}, "dynamodb:Query")
	// A new order's first step goes straight to its Agent; retries and
	// cancels hand orders to the Scheduler.
	add(sub, []string{"SchedulerQueue"}, "sqs:SendMessage")
	for _, s := range deployedCatalog().FirstSteps() {
		add(sub, []string{pascalStep(s) + "Queue"}, "sqs:SendMessage")
	}
	// The admission check reads every Agent queue's depth.
	for _, s := range deployedCatalog().Agents() {
		add(sub, []string{pascalStep(s.Name) + "Queue"}, "sqs:GetQueueAttributes")
	}
	out["SubmissionRole"] = sub

	sched := alerts(logs("Scheduler"))
	// GetItem: the record is read before a permanent failure is committed.
	add(sched, []string{"StateTable"}, "dynamodb:UpdateItem", "dynamodb:GetItem")
	// Confirming an alert keeps the orders item for good, in one
	// transaction with the record.
	add(sched, []string{"OrdersTable"}, "dynamodb:UpdateItem")
	add(sched, []string{"ResponseQueue", "SchedulerQueue"}, consume...)
	// A step whose dispatch failed is handed back after its backoff.
	add(sched, []string{"SchedulerQueue"}, "sqs:SendMessage")
	sup := alerts(logs("Supervisor"))
	add(sup, []string{"StateTable/index/" + statestore.InFlightIndex}, "dynamodb:Query")
	// The index holds keys only: the sweep reads the records in one batch.
	add(sup, []string{"StateTable"}, "dynamodb:UpdateItem", "dynamodb:BatchGetItem")
	add(sup, []string{"OrdersTable"}, "dynamodb:UpdateItem")
	add(sup, []string{"SchedulerQueue"}, "sqs:SendMessage")
	out["SupervisorRole"] = sup

	codeSteps := stack.DefaultConfig().CodeSteps
	for _, s := range deployedCatalog().Agents() {
		add(sched, []string{pascalStep(s.Name) + "Queue"}, "sqs:SendMessage")
		if m, ok := codeSteps[s.Name]; ok {
			out["Step"+pascalStep(s.Name)+"Role"] = codeStepGrants(s.Name, m)
			continue
		}
		a := alerts(logs("Agent" + pascalStep(s.Name)))
		add(a, []string{"ResponseQueue"}, "sqs:SendMessage")
		add(a, []string{pascalStep(s.Name) + "Queue"}, consume...)
		out["Agent"+pascalStep(s.Name)+"Role"] = a
	}
	out["SchedulerRole"] = sched

	// The Notifier's stream event source mapping reads the stream and
	// sends what it gives up on to the DLQ; the handler publishes.
	notifier := logs("Notifier")
	add(notifier, []string{"StateTable.StreamArn"}, "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams")
	add(notifier, []string{"NotifierDLQ"}, "sqs:SendMessage")
	add(notifier, []string{"OrderEventsTopic"}, "sns:Publish")
	add(notifier, []string{"OrderEventsTopicKey" + viaSNS}, "kms:Decrypt", "kms:GenerateDataKey")
	out["NotifierRole"] = notifier

	// The Supervisor's fast path: the Timer reads the stream like the
	// Notifier and sends Deadlines (and gives an ended order's ledger
	// entries their TTL); the Deadline function consumes them, reads the
	// record, and recovers it as the sweep does.
	tmr := logs("Timer")
	add(tmr, []string{"StateTable.StreamArn"}, "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams")
	add(tmr, []string{"TimerDLQ", "DeadlineQueue"}, "sqs:SendMessage")
	add(tmr, []string{"LedgerTable"}, "dynamodb:UpdateItem")
	out["TimerRole"] = tmr
	dl := alerts(logs("Deadline"))
	add(dl, []string{"StateTable"}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	add(dl, []string{"OrdersTable"}, "dynamodb:UpdateItem")
	add(dl, []string{"DeadlineQueue"}, consume...)
	add(dl, []string{"SchedulerQueue"}, "sqs:SendMessage")
	out["DeadlineRole"] = dl
	return out
}()

// grantLogs is what every function is granted: it logs to its own group
// and may send X-Ray segments (the grant Lambda's PassThrough tracing
// adds), which name no resource.
func grantLogs(fn string) map[string][]string {
	return map[string][]string{"logs:CreateLogStream": {fn + "Logs"}, "logs:PutLogEvents": {fn + "Logs"},
		"xray:PutTelemetryRecords": {`"*"`}, "xray:PutTraceSegments": {`"*"`}}
}

// addGrants adds actions on resources to m.
func addGrants(m map[string][]string, resources []string, actions ...string) map[string][]string {
	for _, a := range actions {
		m[a] = append(m[a], resources...)
		sort.Strings(m[a])
	}
	return m
}

// grantAlerts adds the alert topic's publish to m.
func grantAlerts(m map[string][]string) map[string][]string {
	addGrants(m, []string{"AlertTopic"}, "sns:Publish")
	return addGrants(m, []string{"AlertTopicKey" + viaSNS}, "kms:Decrypt", "kms:GenerateDataKey")
}

// codeStepGrants is what the code step name with manifest m is granted: it
// replies as an Agent does; it reads and writes its own entries of the
// ledger, and what its manifest says, each resource as resourceName writes
// it.
func codeStepGrants(name string, m stepgen.Manifest) map[string][]string {
	c := grantAlerts(grantLogs("Step" + pascalStep(name)))
	addGrants(c, []string{"ResponseQueue"}, "sqs:SendMessage")
	addGrants(c, []string{pascalStep(name) + "Queue"}, consume...)
	addGrants(c, []string{"LedgerTable if ForAllValues:StringLike dynamodb:LeadingKeys=" + name + "#*"},
		"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
	for _, st := range m.Statements {
		for _, r := range st.Resources {
			addGrants(c, []string{strings.NewReplacer("${", "", "}", "").Replace(r)}, st.Actions...)
		}
	}
	return c
}

// cdkJSONContext reads the context values of the repository's cdk.json as
// the CDK passes them (numbers as their decimal text).
func cdkJSONContext(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Context map[string]any }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range doc.Context {
		out[k] = fmt.Sprint(v)
	}
	return out
}
