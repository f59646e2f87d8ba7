package scheduler

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	sampleReserveQueue = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-reserve-inventory"
	sampleChargeQueue  = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-charge-payment"
	sampleTopicARN     = "arn:aws:sns:eu-west-1:123456789012:sas-alerts"
	sampleSchedQueue   = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-scheduler"
	sampleRespQueue    = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-responses"
)

// sampleEnv is the environment the Scheduler Lambda is deployed with; the
// sample events run against the configuration it yields.
func sampleEnv() map[string]string {
	return map[string]string{
		"ORDERS_TABLE":        "sas-orders",
		"STATE_TABLE":         "sas-state",
		"ALERT_TOPIC_ARN":     sampleTopicARN,
		"AGENT_QUEUE_URLS":    "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue,
		"SCHEDULER_QUEUE_URL": sampleSchedQueue,
		"RESPONSE_QUEUE_URL":  sampleRespQueue,
	}
}

// getenv reads env, and adds or overrides (or, with "", unsets) variables.
func getenv(env map[string]string, kv ...string) func(string) string {
	m := maps.Clone(env)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(name string) string { return m[name] }
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	defaults := workflow.DefaultPolicy()
	withTimeouts := defaults
	withTimeouts.ClaimTimeout = 45 * time.Second
	withTimeouts.AlertTimeout = 10 * time.Minute
	queues := map[string]string{"reserve-inventory": sampleReserveQueue, "charge-payment": sampleChargeQueue}
	tests := []struct {
		name       string
		kv         []string
		wantPolicy workflow.Policy
		wantQueues map[string]string
	}{
		{name: "required only", wantPolicy: defaults, wantQueues: queues},
		{
			name:       "optional timeouts",
			kv:         []string{"CLAIM_TIMEOUT", "45s", "ALERT_TIMEOUT", "10m"},
			wantPolicy: withTimeouts, wantQueues: queues,
		},
		{
			name:       "bounds are inclusive",
			kv:         []string{"CLAIM_TIMEOUT", "1s", "ALERT_TIMEOUT", "1h"},
			wantPolicy: workflow.Policy{MaxFailures: 3, ClaimTimeout: time.Second, BackoffBase: 5 * time.Second, BackoffMax: 5 * time.Minute, AlertTimeout: time.Hour},
			wantQueues: queues,
		},
		{
			name:       "pairs in any order with spaces around them",
			kv:         []string{"AGENT_QUEUE_URLS", " charge-payment=" + sampleChargeQueue + " , reserve-inventory=" + sampleReserveQueue + " "},
			wantPolicy: defaults, wantQueues: queues,
		},
		{
			name: "a queue for a step outside the workflow is ignored",
			kv: []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue +
				",ship-goods=https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-ship-goods"},
			wantPolicy: defaults,
			wantQueues: map[string]string{
				"reserve-inventory": sampleReserveQueue, "charge-payment": sampleChargeQueue,
				"ship-goods": "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-agent-ship-goods",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadConfig(getenv(sampleEnv(), tt.kv...))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			want := Config{
				OrdersTable:       "sas-orders",
				StateTable:        "sas-state",
				AgentQueues:       tt.wantQueues,
				Workflow:          workflow.Default(),
				Policy:            tt.wantPolicy,
				AlertTopicARN:     sampleTopicARN,
				SchedulerQueueURL: sampleSchedQueue, ResponseQueueURL: sampleRespQueue,
				// The queues' redrive default, shared with the stack.
				MaxReceiveCount: topology.MaxReceiveCount,
			}
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("LoadConfig =\n%+v\nwant\n%+v", cfg, want)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate of a loaded config: %v", err)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kv   []string
		// want are substrings the error must contain, one per problem.
		want []string
	}{
		{name: "ORDERS_TABLE missing", kv: []string{"ORDERS_TABLE", ""}, want: []string{"ORDERS_TABLE is required"}},
		{name: "STATE_TABLE missing", kv: []string{"STATE_TABLE", ""}, want: []string{"STATE_TABLE is required"}},
		{name: "ALERT_TOPIC_ARN missing", kv: []string{"ALERT_TOPIC_ARN", ""}, want: []string{"ALERT_TOPIC_ARN is required"}},
		{name: "AGENT_QUEUE_URLS missing", kv: []string{"AGENT_QUEUE_URLS", ""}, want: []string{"AGENT_QUEUE_URLS is required"}},
		{
			name: "every required variable missing",
			kv:   []string{"ORDERS_TABLE", "", "STATE_TABLE", "", "ALERT_TOPIC_ARN", "", "AGENT_QUEUE_URLS", ""},
			want: []string{"ORDERS_TABLE is required", "STATE_TABLE is required", "ALERT_TOPIC_ARN is required", "AGENT_QUEUE_URLS is required"},
		},
		{
			name: "pair without =",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory " + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue},
			want: []string{"AGENT_QUEUE_URLS:", "is not step=url"},
		},
		{
			name: "pair without step",
			kv:   []string{"AGENT_QUEUE_URLS", "=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue},
			want: []string{"AGENT_QUEUE_URLS:", "is not step=url"},
		},
		{
			name: "pair without url",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory=,charge-payment=" + sampleChargeQueue},
			want: []string{"AGENT_QUEUE_URLS:", "is not step=url"},
		},
		{
			name: "trailing comma",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue + ","},
			want: []string{"AGENT_QUEUE_URLS:", `"" is not step=url`},
		},
		{
			name: "only spaces",
			kv:   []string{"AGENT_QUEUE_URLS", "   "},
			want: []string{"AGENT_QUEUE_URLS:", "is not step=url"},
		},
		{
			name: "step without a queue",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue},
			want: []string{`no agent queue for step "charge-payment"`},
		},
		{
			name: "misspelt step leaves the real one without a queue",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-paymnt=" + sampleChargeQueue},
			want: []string{`no agent queue for step "charge-payment"`},
		},
		{
			name: "duplicate step",
			kv: []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue + ",charge-payment=" + sampleChargeQueue +
				",reserve-inventory=https://sqs.eu-west-1.amazonaws.com/123456789012/other"},
			want: []string{"AGENT_QUEUE_URLS:", `step "reserve-inventory" named twice`},
		},
		{name: "CLAIM_TIMEOUT not a duration", kv: []string{"CLAIM_TIMEOUT", "soon"}, want: []string{`CLAIM_TIMEOUT="soon" is not a duration`}},
		{name: "CLAIM_TIMEOUT without unit", kv: []string{"CLAIM_TIMEOUT", "30"}, want: []string{`CLAIM_TIMEOUT="30" is not a duration`}},
		{name: "CLAIM_TIMEOUT too short", kv: []string{"CLAIM_TIMEOUT", "500ms"}, want: []string{"CLAIM_TIMEOUT=500ms must be within 1s..1h0m0s"}},
		{name: "CLAIM_TIMEOUT too long", kv: []string{"CLAIM_TIMEOUT", "2h"}, want: []string{"CLAIM_TIMEOUT=2h0m0s must be within"}},
		{name: "ALERT_TIMEOUT not a duration", kv: []string{"ALERT_TIMEOUT", "2 minutes"}, want: []string{`ALERT_TIMEOUT="2 minutes" is not a duration`}},
		{name: "ALERT_TIMEOUT zero", kv: []string{"ALERT_TIMEOUT", "0s"}, want: []string{"ALERT_TIMEOUT=0s must be within"}},
		{name: "ALERT_TIMEOUT negative", kv: []string{"ALERT_TIMEOUT", "-1m"}, want: []string{"ALERT_TIMEOUT=-1m0s must be within"}},
		{name: "MAX_FAILURES out of range", kv: []string{"MAX_FAILURES", "0"}, want: []string{"MAX_FAILURES=0 must be within 1..100"}},
		{
			name: "queue URL not a URL",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory=not a url,charge-payment=" + sampleChargeQueue},
			want: []string{`step "reserve-inventory": "not a url" is not an absolute http(s) URL`},
		},
		{
			name: "a bad policy does not hide a missing queue",
			kv:   []string{"AGENT_QUEUE_URLS", "reserve-inventory=" + sampleReserveQueue, "MAX_FAILURES", "0"},
			want: []string{"MAX_FAILURES=0", `no agent queue for step "charge-payment"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadConfig(getenv(sampleEnv(), tt.kv...))
			if err == nil {
				t.Fatal("LoadConfig succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseAgentQueues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "a=https://q/a", want: map[string]string{"a": "https://q/a"}},
		{in: "a=https://q/a,b=https://q/b", want: map[string]string{"a": "https://q/a", "b": "https://q/b"}},
		{in: " a=https://q/a ,\tb=https://q/b\n", want: map[string]string{"a": "https://q/a", "b": "https://q/b"}},
		// Only the first = separates; a URL may carry more.
		{in: "a=https://q/a?x=1", want: map[string]string{"a": "https://q/a?x=1"}},
		{in: "a", wantErr: `"a" is not step=url`},
		{in: "a=", wantErr: `"a=" is not step=url`},
		{in: "=https://q/a", wantErr: `"=https://q/a" is not step=url`},
		{in: "a=https://q/a,,b=https://q/b", wantErr: `"" is not step=url`},
		{in: "a=https://q/a,a=https://q/b", wantErr: `step "a" named twice`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAgentQueues(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseAgentQueues(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				if got != nil {
					t.Errorf("ParseAgentQueues(%q) returned %v with its error", tt.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseAgentQueues(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
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
		{name: "workflow without steps", change: func(c *Config) { c.Workflow.Steps = nil }, wantErr: "no steps"},
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
