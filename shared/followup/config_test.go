package followup

import (
	"github.com/sasflow/sas/shared/catalog"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/actortest"
	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	sampleSchedulerQueue = actortest.SampleSchedulerQueue
	sampleTopicARN       = actortest.SampleTopicARN
)

// deployed is the environment the Scheduler and the Supervisor are
// deployed with, as far as their shared settings go.
var deployed = actortest.DeployedEnv()

// load reads the shared settings as the Scheduler's and the Supervisor's
// LoadConfig do.
func load(getenv func(string) string) (Config, error) {
	return config.Load("test config", getenv, Variables(), func(r *config.Reader) Config { return Load(r, catalog.Fixed(workflow.Single(workflow.Reference()))) })
}

func TestLoad(t *testing.T) {
	t.Parallel()
	with := func(change func(*Config)) Config {
		c := Config{
			OrdersTable: "sas-orders", StateTable: "sas-state", SchedulerQueueURL: sampleSchedulerQueue,
			AlertTopicARN: sampleTopicARN, Workflows: workflow.Single(workflow.Reference()), Policy: workflow.DefaultPolicy(),
		}
		change(&c)
		return c
	}
	configtest.Loads(t, load, deployed, []configtest.Loaded[Config]{
		{Name: "defaults", Want: with(func(*Config) {})},
		{
			Name: "every optional variable",
			Set:  []string{"MAX_FAILURES", "5", "CLAIM_TIMEOUT", "90s", "BACKOFF_BASE", "2s", "BACKOFF_MAX", "15m", "ALERT_TIMEOUT", "1h", "RETENTION", "720h"},
			Want: with(func(c *Config) {
				c.Policy = workflow.Policy{MaxFailures: 5, ClaimTimeout: 90 * time.Second, BackoffBase: 2 * time.Second,
					BackoffMax: 15 * time.Minute, AlertTimeout: time.Hour, Retention: 720 * time.Hour}
			}),
		},
		{
			Name: "lowest bounds",
			Set:  []string{"MAX_FAILURES", "1", "CLAIM_TIMEOUT", "1s", "BACKOFF_BASE", "0s", "BACKOFF_MAX", "0s", "ALERT_TIMEOUT", "1s"},
			Want: with(func(c *Config) {
				c.Policy = workflow.Policy{MaxFailures: 1, ClaimTimeout: time.Second, AlertTimeout: time.Second, Retention: workflow.DefaultRetention}
			}),
		},
		{
			Name: "highest bounds",
			Set:  []string{"MAX_FAILURES", "100", "CLAIM_TIMEOUT", "1h", "BACKOFF_BASE", "15m", "BACKOFF_MAX", "15m"},
			Want: with(func(c *Config) {
				c.Policy = workflow.Policy{MaxFailures: 100, ClaimTimeout: time.Hour, BackoffBase: 15 * time.Minute,
					BackoffMax: 15 * time.Minute, AlertTimeout: 2 * time.Minute, Retention: workflow.DefaultRetention}
			}),
		},
		{
			Name: "plain http queue URL (local engines)",
			Set:  []string{"SCHEDULER_QUEUE_URL", "http://localhost:4566/000000000000/sas-scheduler"},
			Want: with(func(c *Config) { c.SchedulerQueueURL = "http://localhost:4566/000000000000/sas-scheduler" }),
		},
		{
			Name: "operator API",
			Set:  []string{"OPERATOR_API_URL", "https://abc.execute-api.eu-west-1.amazonaws.com"},
			Want: with(func(c *Config) { c.OperatorAPIURL = "https://abc.execute-api.eu-west-1.amazonaws.com" }),
		},
	})
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	configtest.Refuses(t, load, deployed, []configtest.Refused{
		{
			Name: "every required variable missing",
			Set:  []string{"ORDERS_TABLE", "", "STATE_TABLE", "", "SCHEDULER_QUEUE_URL", "", "ALERT_TOPIC_ARN", ""},
			Want: []string{"ORDERS_TABLE is required", "STATE_TABLE is required", "SCHEDULER_QUEUE_URL is required", "ALERT_TOPIC_ARN is required"},
		},
		{Name: "one table for both", Set: []string{"STATE_TABLE", "sas-orders"}, Want: []string{`ORDERS_TABLE and STATE_TABLE must differ, both are "sas-orders"`}},
		{Name: "table name", Set: []string{"ORDERS_TABLE", "no spaces"}, Want: []string{`ORDERS_TABLE="no spaces" is not a DynamoDB table name`}},
		{Name: "queue name instead of URL", Set: []string{"SCHEDULER_QUEUE_URL", "sas-scheduler"}, Want: []string{`SCHEDULER_QUEUE_URL="sas-scheduler" is not an absolute http(s) URL`}},
		{Name: "queue ARN instead of URL", Set: []string{"SCHEDULER_QUEUE_URL", "arn:aws:sqs:eu-west-1:123456789012:sas-scheduler"}, Want: []string{"is not an absolute http(s) URL"}},
		{Name: "queue URL without host", Set: []string{"SCHEDULER_QUEUE_URL", "https:///123456789012/sas-scheduler"}, Want: []string{"is not an absolute http(s) URL"}},
		{Name: "topic name instead of ARN", Set: []string{"ALERT_TOPIC_ARN", "sas-alerts"}, Want: []string{`ALERT_TOPIC_ARN="sas-alerts" is not an SNS topic ARN`}},
		{Name: "retention under a day", Set: []string{"RETENTION", "1h"}, Want: []string{"RETENTION=1h0m0s must be within 24h0m0s..87600h0m0s"}},
		{Name: "operator API not a URL", Set: []string{"OPERATOR_API_URL", "abc.execute-api"}, Want: []string{`OPERATOR_API_URL="abc.execute-api" is not an absolute http(s) URL`}},

		{Name: "MAX_FAILURES not a number", Set: []string{"MAX_FAILURES", "three"}, Want: []string{`MAX_FAILURES="three" is not an integer`}},
		{Name: "MAX_FAILURES zero", Set: []string{"MAX_FAILURES", "0"}, Want: []string{"MAX_FAILURES=0 must be within 1..100"}},
		{Name: "MAX_FAILURES negative", Set: []string{"MAX_FAILURES", "-3"}, Want: []string{"MAX_FAILURES=-3 must be within 1..100"}},
		{Name: "MAX_FAILURES too high", Set: []string{"MAX_FAILURES", "101"}, Want: []string{"MAX_FAILURES=101 must be within 1..100"}},
		{Name: "CLAIM_TIMEOUT not a duration", Set: []string{"CLAIM_TIMEOUT", "two minutes"}, Want: []string{`CLAIM_TIMEOUT="two minutes" is not a duration`}},
		{Name: "CLAIM_TIMEOUT without unit", Set: []string{"CLAIM_TIMEOUT", "120"}, Want: []string{`CLAIM_TIMEOUT="120" is not a duration`}},
		{Name: "CLAIM_TIMEOUT too short", Set: []string{"CLAIM_TIMEOUT", "999ms"}, Want: []string{"CLAIM_TIMEOUT=999ms must be within 1s..1h0m0s"}},
		{Name: "CLAIM_TIMEOUT too long", Set: []string{"CLAIM_TIMEOUT", "61m"}, Want: []string{"CLAIM_TIMEOUT=1h1m0s must be within"}},
		{Name: "BACKOFF_BASE not a duration", Set: []string{"BACKOFF_BASE", "5"}, Want: []string{`BACKOFF_BASE="5" is not a duration`}},
		{Name: "BACKOFF_BASE negative", Set: []string{"BACKOFF_BASE", "-1s"}, Want: []string{"BACKOFF_BASE=-1s must be within 0s..15m0s"}},
		{Name: "BACKOFF_BASE above BACKOFF_MAX", Set: []string{"BACKOFF_BASE", "2m", "BACKOFF_MAX", "1m"}, Want: []string{"BACKOFF_MAX=1m0s must be at least BACKOFF_BASE=2m0s"}},
		{Name: "BACKOFF_BASE above the default BACKOFF_MAX", Set: []string{"BACKOFF_BASE", "10m"}, Want: []string{"BACKOFF_MAX=5m0s must be at least BACKOFF_BASE=10m0s"}},
		{Name: "BACKOFF_MAX not a duration", Set: []string{"BACKOFF_MAX", "forever"}, Want: []string{`BACKOFF_MAX="forever" is not a duration`}},
		{Name: "BACKOFF_MAX over 15m", Set: []string{"BACKOFF_MAX", "15m1s"}, Want: []string{"BACKOFF_MAX=15m1s must be within 0s..15m0s"}},
		{Name: "ALERT_TIMEOUT not a duration", Set: []string{"ALERT_TIMEOUT", "later"}, Want: []string{`ALERT_TIMEOUT="later" is not a duration`}},
		{Name: "ALERT_TIMEOUT zero", Set: []string{"ALERT_TIMEOUT", "0s"}, Want: []string{"ALERT_TIMEOUT=0s must be within 1s..1h0m0s"}},
		{Name: "ALERT_TIMEOUT negative", Set: []string{"ALERT_TIMEOUT", "-1m"}, Want: []string{"ALERT_TIMEOUT=-1m0s must be within"}},
		{Name: "ALERT_TIMEOUT too long", Set: []string{"ALERT_TIMEOUT", "2h"}, Want: []string{"ALERT_TIMEOUT=2h0m0s must be within"}},
		{
			Name: "every problem reported at once",
			Set:  []string{"STATE_TABLE", "", "MAX_FAILURES", "0", "BACKOFF_MAX", "1h", "ALERT_TIMEOUT", "x"},
			Want: []string{"STATE_TABLE is required", "MAX_FAILURES=0", "BACKOFF_MAX=1h0m0s", `ALERT_TIMEOUT="x"`},
		},
	})
}

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "followup", Variables(), topology.FollowupEnv)
}
