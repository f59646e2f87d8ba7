package codestep_test

import (
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/codestep"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// deployed is the environment a code step's Lambda is deployed with.
var deployed = map[string]string{
	"AGENT_STEP":         "reserve-inventory",
	"RESPONSE_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/responses",
	"REQUEST_QUEUE_URL":  "https://sqs.eu-west-1.amazonaws.com/123456789012/steps-reserve-inventory",
	"LEDGER_TABLE":       "sas-LedgerTable-1ABC",
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	base := agent.DefaultConfig()
	base.Step, base.ResponseQueueURL, base.RequestQueueURL = deployed["AGENT_STEP"], deployed["RESPONSE_QUEUE_URL"], deployed["REQUEST_QUEUE_URL"]
	base.MaxOutputBytes, base.Code = workflow.Reference().Steps[0].OutputLimit(), true
	want := codestep.Config{Config: base, LedgerTable: "sas-LedgerTable-1ABC"}
	tuned := want
	tuned.RemoteTimeout = 2 * time.Second
	configtest.Loads(t, codestep.LoadReferenceConfig, deployed, []configtest.Loaded[codestep.Config]{
		{Name: "defaults", Want: want},
		{Name: "a try's timeout", Set: []string{"REMOTE_TIMEOUT", "2s"}, Want: tuned},
		// A ledger entry's TTL is its order's, given when the order ends
		// (the Timer's), so a stray RETENTION changes nothing.
		{Name: "the retention is not read", Set: []string{"RETENTION", "720h"}, Want: want},
		// A code step reads no remote, so a stray one changes nothing.
		{Name: "remote variables are not read", Set: []string{"REMOTE_BASE_URLS", "https://r.example.com"}, Want: want},
	})
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	configtest.Refuses(t, codestep.LoadReferenceConfig, deployed, []configtest.Refused{
		{Name: "all required missing", Set: []string{"AGENT_STEP", "", "RESPONSE_QUEUE_URL", "", "REQUEST_QUEUE_URL", "", "LEDGER_TABLE", ""},
			Want: []string{"AGENT_STEP is required", "RESPONSE_QUEUE_URL is required", "REQUEST_QUEUE_URL is required", "LEDGER_TABLE is required"}},
		{Name: "bad table", Set: []string{"LEDGER_TABLE", "no/such table"}, Want: []string{`LEDGER_TABLE="no/such table" is not a DynamoDB table name`}},
		{Name: "a step outside the workflow", Set: []string{"AGENT_STEP", "no-such-step"}, Want: []string{`AGENT_STEP="no-such-step" is not a step of any deployed workflow version`}},
	})
}

// A Config built in code for a code step has no remote; one that names
// one is a wiring mistake.
func TestConfigRefusesARemote(t *testing.T) {
	t.Parallel()
	c, err := codestep.LoadReferenceConfig(configtest.Env(deployed))
	if err != nil {
		t.Fatal(err)
	}
	c.RemoteBaseURL = "https://r.example.com"
	configtest.Problems(t, "Validate", c.Validate(), "must be empty for a code step")
	c.RemoteBaseURL, c.Code = "", false
	configtest.Problems(t, "Validate", c.Validate(), "is required")
}

func TestConfigReadsWhatTheDescriptorSays(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "steps", codestep.Variables, topology.Describe(topology.CodeStep).Env)
}
