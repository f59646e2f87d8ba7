package submission

import (
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	const firstAgentURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-reserve-inventory"
	deployed := map[string]string{
		"AGENT_QUEUE_URLS":    "reserve-inventory=" + firstAgentURL,
		"SCHEDULER_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler",
		"ORDERS_TABLE":        "sas-orders",
		"STATE_TABLE":         "sas-state",
	}
	with := func(change func(*Config)) Config {
		c := Config{
			AgentQueues:       map[string]string{"reserve-inventory": firstAgentURL},
			SchedulerQueueURL: deployed["SCHEDULER_QUEUE_URL"], OrdersTable: "sas-orders", StateTable: "sas-state",
			Workflows: workflow.Single(workflow.Reference()), ClaimTimeout: workflow.DefaultPolicy().ClaimTimeout, Retention: workflow.DefaultRetention, MaxBodyBytes: 64 * 1024,
			Admission: admission.Config{Refresh: admission.DefaultRefresh}, TraceSampleRate: trace.DefaultSampleRate,
		}
		change(&c)
		return c
	}
	configtest.Loads(t, loadReference, deployed, []configtest.Loaded[Config]{
		{Name: "defaults", Want: with(func(*Config) {})},
		{Name: "every order traced", Set: []string{"TRACE_SAMPLE_RATE", "1"}, Want: with(func(c *Config) { c.TraceSampleRate = 1 })},
		{Name: "no order traced", Set: []string{"TRACE_SAMPLE_RATE", "0"}, Want: with(func(c *Config) { c.TraceSampleRate = 0 })},
		{Name: "claim timeout set", Set: []string{"CLAIM_TIMEOUT", "45s"}, Want: with(func(c *Config) { c.ClaimTimeout = 45 * time.Second })},
		{Name: "shortest retention", Set: []string{"RETENTION", "24h"}, Want: with(func(c *Config) { c.Retention = 24 * time.Hour })},
		{Name: "longest retention", Set: []string{"RETENTION", "87600h"}, Want: with(func(c *Config) { c.Retention = 87600 * time.Hour })},
		{
			Name: "admission check",
			Set: []string{"ADMISSION_QUEUES", firstAgentURL + ",https://sqs.eu-west-1.amazonaws.com/123456789012/agent-charge-payment",
				"ADMISSION_BACKLOG", "500", "ADMISSION_RATE", "500", "ADMISSION_REFRESH", "100ms"},
			Want: with(func(c *Config) {
				c.Admission = admission.Config{Queues: []string{firstAgentURL, "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-charge-payment"},
					Backlog: 500, Rate: 500, Refresh: 100 * time.Millisecond}
			}),
		},
		{
			Name: "operators, the stack's role and an empty parameter",
			Set:  []string{"OPERATOR_PRINCIPALS", "arn:aws:iam::123456789012:role/OrderOperatorRole,"},
			Want: with(func(c *Config) { c.OperatorPrincipals = []string{"arn:aws:iam::123456789012:role/OrderOperatorRole"} }),
		},
		{
			Name: "operators listed at deploy time",
			Set:  []string{"OPERATOR_PRINCIPALS", "arn:aws:iam::123456789012:role/OrderOperatorRole,arn:aws:iam::123456789012:role/team/oncall,arn:aws:iam::123456789012:user/bob"},
			Want: with(func(c *Config) {
				c.OperatorPrincipals = []string{"arn:aws:iam::123456789012:role/OrderOperatorRole", "arn:aws:iam::123456789012:role/team/oncall", "arn:aws:iam::123456789012:user/bob"}
			}),
		},
		{
			Name: "local emulator URL",
			Set:  []string{"SCHEDULER_QUEUE_URL", "http://127.0.0.1:4566/000000000000/scheduler"},
			Want: with(func(c *Config) { c.SchedulerQueueURL = "http://127.0.0.1:4566/000000000000/scheduler" }),
		},
	})
	configtest.Refuses(t, loadReference, deployed, []configtest.Refused{
		{
			Name: "nothing set",
			Set:  []string{"SCHEDULER_QUEUE_URL", "", "ORDERS_TABLE", "", "STATE_TABLE", ""},
			Want: []string{"SCHEDULER_QUEUE_URL is required", "ORDERS_TABLE is required", "STATE_TABLE is required"},
		},
		{Name: "queue URL relative", Set: []string{"SCHEDULER_QUEUE_URL", "scheduler"}, Want: []string{`SCHEDULER_QUEUE_URL="scheduler" is not an absolute http(s) URL`}},
		{Name: "queue URL scheme", Set: []string{"SCHEDULER_QUEUE_URL", "ftp://x/y"}, Want: []string{`SCHEDULER_QUEUE_URL="ftp://x/y" is not an absolute http(s) URL`}},
		{Name: "table name", Set: []string{"ORDERS_TABLE", "no spaces please"}, Want: []string{`ORDERS_TABLE="no spaces please" is not a DynamoDB table name`}},
		{Name: "table name short", Set: []string{"STATE_TABLE", "ab"}, Want: []string{`STATE_TABLE="ab" is not a DynamoDB table name`}},
		{Name: "same table", Set: []string{"STATE_TABLE", "sas-orders"}, Want: []string{`ORDERS_TABLE and STATE_TABLE must differ, both are "sas-orders"`}},
		{Name: "admission without its model", Set: []string{"ADMISSION_QUEUES", "https://sqs.example/q", "ADMISSION_BACKLOG", "0"},
			Want: []string{"ADMISSION_BACKLOG=0 must be within 1..1000000", "ADMISSION_RATE=0 must be within 1..1000000"}},
		{Name: "operator not an IAM role or user", Set: []string{"OPERATOR_PRINCIPALS", "arn:aws:iam::123456789012:role/ops,arn:aws:sts::123456789012:assumed-role/ops/alice"},
			Want: []string{`OPERATOR_PRINCIPALS: "arn:aws:sts::123456789012:assumed-role/ops/alice" is not an IAM role or user ARN`}},
		{Name: "operator with a space", Set: []string{"OPERATOR_PRINCIPALS", "arn:aws:iam::123456789012:role/ops, arn:aws:iam::123456789012:user/bob"},
			Want: []string{`OPERATOR_PRINCIPALS: " arn:aws:iam::123456789012:user/bob" is not an IAM role or user ARN`}},
		{Name: "claim timeout garbage", Set: []string{"CLAIM_TIMEOUT", "soon"}, Want: []string{`CLAIM_TIMEOUT="soon" is not a duration`}},
		{Name: "claim timeout too short", Set: []string{"CLAIM_TIMEOUT", "500ms"}, Want: []string{"CLAIM_TIMEOUT=500ms must be within 1s..1h0m0s"}},
		{Name: "claim timeout too long", Set: []string{"CLAIM_TIMEOUT", "2h"}, Want: []string{"CLAIM_TIMEOUT=2h0m0s must be within 1s..1h0m0s"}},
		{Name: "trace sample rate as a percentage", Set: []string{"TRACE_SAMPLE_RATE", "5"}, Want: []string{"TRACE_SAMPLE_RATE"}},
		{Name: "trace sample rate garbage", Set: []string{"TRACE_SAMPLE_RATE", "1%"}, Want: []string{`TRACE_SAMPLE_RATE="1%" is not a number`}},
		{Name: "retention garbage", Set: []string{"RETENTION", "90d"}, Want: []string{`RETENTION="90d" is not a duration`}},
		{Name: "retention too short", Set: []string{"RETENTION", "23h"}, Want: []string{"RETENTION=23h0m0s must be within 24h0m0s..87600h0m0s"}},
		{Name: "retention too long", Set: []string{"RETENTION", "87601h"}, Want: []string{"RETENTION=87601h0m0s must be within 24h0m0s..87600h0m0s"}},
		{
			Name: "every problem at once",
			Set:  []string{"SCHEDULER_QUEUE_URL", "", "STATE_TABLE", "", "CLAIM_TIMEOUT", "x", "ORDERS_TABLE", "a"},
			Want: []string{"SCHEDULER_QUEUE_URL is required", `ORDERS_TABLE="a" is not a DynamoDB table name`, "STATE_TABLE is required", `CLAIM_TIMEOUT="x"`},
		},
	})
}

// loadReference is LoadConfig over the reference workflow, whatever the
// deployed catalog holds, so these tables do not change with it.
func loadReference(getenv func(string) string) (Config, error) {
	return loadConfig(getenv, catalog.Fixed(workflow.Single(workflow.Reference())))
}

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "submission", variables, topology.Describe(topology.Submission).Env)
}
