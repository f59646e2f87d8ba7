package scheduler

import (
	"github.com/sasflow/sas/shared/catalog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/actortest"
	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	sampleReserveQueue = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-reserve-inventory"
	sampleChargeQueue  = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-charge-payment"
	sampleRespQueue    = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-responses"
)

// deployed is the environment the Scheduler Lambda is deployed with; the
// sample events run against the configuration it yields. The settings the
// Scheduler shares with the Supervisor are tested in shared/followup.
var deployed = actortest.DeployedEnv(
	"AGENT_QUEUE_URLS", "reserve-inventory="+sampleReserveQueue+",charge-payment="+sampleChargeQueue,
	"RESPONSE_QUEUE_URL", sampleRespQueue,
	"REPLY_SENDERS", "reserve-inventory=AROA4QWERTYEXAMPLEH5T,charge-payment=AROA4QWERTYEXAMPLEC8W",
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	queues := map[string]string{"reserve-inventory": sampleReserveQueue, "charge-payment": sampleChargeQueue}
	loaded := Config{
		Config: followup.Config{
			OrdersTable: "sas-orders", StateTable: "sas-state", SchedulerQueueURL: actortest.SampleSchedulerQueue,
			AlertTopicARN: actortest.SampleTopicARN, Workflows: workflow.Single(workflow.Reference()), Policy: workflow.DefaultPolicy(),
		},
		ResponseQueueURL: sampleRespQueue, AgentQueues: queues,
		// The queues' redrive default, shared with the stack.
		MaxReceiveCount: topology.MaxReceiveCount,
		ReplySenders:    map[string]string{"reserve-inventory": "AROA4QWERTYEXAMPLEH5T", "charge-payment": "AROA4QWERTYEXAMPLEC8W"},
	}
	with := func(change func(*Config)) Config {
		c := loaded
		c.AgentQueues = maps.Clone(queues)
		change(&c)
		return c
	}
	configtest.Loads(t, loadReference, deployed, []configtest.Loaded[Config]{
		{Name: "required only", Want: loaded},
		{Name: "the shared settings", Set: []string{"CLAIM_TIMEOUT", "45s"}, Want: with(func(c *Config) { c.Policy.ClaimTimeout = 45 * time.Second })},
		{Name: "MAX_RECEIVE_COUNT", Set: []string{"MAX_RECEIVE_COUNT", "1000"}, Want: with(func(c *Config) { c.MaxReceiveCount = 1000 })},
		{
			Name: "pairs in any order with spaces around them",
			Set:  []string{"AGENT_QUEUE_URLS", " charge-payment=" + sampleChargeQueue + " , reserve-inventory=" + sampleReserveQueue + " "},
			Want: loaded,
		},
		{
			Name: "a queue for a step outside the workflow is ignored",
			Set: []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue +
				",ship-goods=https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-ship-goods"},
			Want: with(func(c *Config) {
				c.AgentQueues["ship-goods"] = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-ship-goods"
			}),
		},
	})
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	configtest.Refuses(t, loadReference, deployed, []configtest.Refused{
		{Name: "RESPONSE_QUEUE_URL missing", Set: []string{"RESPONSE_QUEUE_URL", ""}, Want: []string{"RESPONSE_QUEUE_URL is required"}},
		{Name: "RESPONSE_QUEUE_URL not a URL", Set: []string{"RESPONSE_QUEUE_URL", "sas-responses"}, Want: []string{`RESPONSE_QUEUE_URL="sas-responses" is not an absolute http(s) URL`}},
		{Name: "AGENT_QUEUE_URLS missing", Set: []string{"AGENT_QUEUE_URLS", ""}, Want: []string{"AGENT_QUEUE_URLS is required"}},
		{Name: "MAX_RECEIVE_COUNT zero", Set: []string{"MAX_RECEIVE_COUNT", "0"}, Want: []string{"MAX_RECEIVE_COUNT=0 must be within 1..1000"}},
		{Name: "MAX_RECEIVE_COUNT not a number", Set: []string{"MAX_RECEIVE_COUNT", "five"}, Want: []string{`MAX_RECEIVE_COUNT="five" is not an integer`}},
		{
			Name: "pair without =",
			Set:  []string{"AGENT_QUEUE_URLS", "reserve-inventory " + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue},
			Want: []string{`AGENT_QUEUE_URLS: "reserve-inventory ` + sampleReserveQueue + `" is not step=url`},
		},
		{
			Name: "trailing comma",
			Set:  []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue + ","},
			Want: []string{`AGENT_QUEUE_URLS: "" is not step=url`},
		},
		{
			Name: "only spaces",
			Set:  []string{"AGENT_QUEUE_URLS", "   "},
			Want: []string{`AGENT_QUEUE_URLS: "   " is not step=url`},
		},
		{
			Name: "step without a queue",
			Set:  []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue},
			Want: []string{`AGENT_QUEUE_URLS: no agent queue for step "charge-payment"`},
		},
		{
			Name: "misspelt step leaves the real one without a queue",
			Set:  []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-paymnt=" + sampleChargeQueue},
			Want: []string{`no agent queue for step "charge-payment"`},
		},
		{
			Name: "duplicate step",
			Set: []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue +
				",reserve-inventory=https://sqs.eu-west-1.amazonaws.com/123456789012/other"},
			Want: []string{`AGENT_QUEUE_URLS: step "reserve-inventory" named twice`},
		},
		{
			Name: "queue URL not a URL",
			Set:  []string{"AGENT_QUEUE_URLS", "reserve-inventory=not a url,charge-payment=" + sampleChargeQueue},
			Want: []string{`AGENT_QUEUE_URLS: step "reserve-inventory": "not a url" is not an absolute http(s) URL`},
		},
		{
			Name: "a step whose replies nobody may send",
			Set:  []string{"REPLY_SENDERS", "reserve-inventory=AROA4QWERTYEXAMPLEH5T"},
			Want: []string{`REPLY_SENDERS: no reply sender for step "charge-payment"`},
		},
		{
			Name: "a sender that is not an IAM unique ID",
			Set:  []string{"REPLY_SENDERS", "reserve-inventory=AROA4QWERTYEXAMPLEH5T,charge-payment=arn:aws:iam::1:role/x"},
			Want: []string{`REPLY_SENDERS: step "charge-payment": "arn:aws:iam::1:role/x" is not an IAM unique ID`},
		},
		{
			Name: "with the shared settings' problems, at once",
			Set:  []string{"ORDERS_TABLE", "", "AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue, "MAX_FAILURES", "0"},
			Want: []string{"ORDERS_TABLE is required", "MAX_FAILURES=0", `no agent queue for step "charge-payment"`},
		},
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := func() Config { return testConfig() }
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "workflow without steps", change: func(c *Config) { c.Workflows.Definitions[0].Steps = nil }, wantErr: "no steps"},
		{name: "invalid policy", change: func(c *Config) { c.Policy.ClaimTimeout = 0 }, wantErr: "ClaimTimeout"},
		{name: "step without queue", change: func(c *Config) { delete(c.AgentQueues, "ship-goods") }, wantErr: `no agent queue for step "ship-goods"`},
		{name: "step with empty queue", change: func(c *Config) { c.AgentQueues["charge-payment"] = "" }, wantErr: `no agent queue for step "charge-payment"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			c.AgentQueues = maps.Clone(c.AgentQueues)
			tt.change(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
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
	configtest.ReadsExactly(t, "scheduler", variables, topology.Describe(topology.Scheduler).Env)
}
