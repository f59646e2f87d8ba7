package supervisor

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

const (
	sampleSchedulerQueue = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-scheduler"
	sampleTopicARN       = "arn:aws:sns:eu-west-1:123456789012:sas-alerts"
)

// sampleEnv is the environment the Supervisor Lambda is deployed with.
func sampleEnv() map[string]string {
	return map[string]string{
		"ORDERS_TABLE":        "sas-orders",
		"STATE_TABLE":         "sas-state",
		"SCHEDULER_QUEUE_URL": sampleSchedulerQueue,
		"ALERT_TOPIC_ARN":     sampleTopicARN,
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
	tests := []struct {
		name       string
		kv         []string
		wantPolicy workflow.Policy
		wantLimit  int
	}{
		{name: "defaults", wantPolicy: workflow.DefaultPolicy(), wantLimit: 200},
		{
			name: "every optional variable",
			kv: []string{
				"MAX_FAILURES", "5", "CLAIM_TIMEOUT", "90s", "BACKOFF_BASE", "2s",
				"BACKOFF_MAX", "15m", "ALERT_TIMEOUT", "1h", "BATCH_LIMIT", "25",
			},
			wantPolicy: workflow.Policy{
				MaxFailures: 5, ClaimTimeout: 90 * time.Second, BackoffBase: 2 * time.Second,
				BackoffMax: 15 * time.Minute, AlertTimeout: time.Hour,
			},
			wantLimit: 25,
		},
		{
			name:       "lowest bounds",
			kv:         []string{"MAX_FAILURES", "1", "CLAIM_TIMEOUT", "1s", "BACKOFF_BASE", "0s", "BACKOFF_MAX", "0s", "ALERT_TIMEOUT", "1s", "BATCH_LIMIT", "1"},
			wantPolicy: workflow.Policy{MaxFailures: 1, ClaimTimeout: time.Second, AlertTimeout: time.Second},
			wantLimit:  1,
		},
		{
			name: "highest bounds",
			kv:   []string{"MAX_FAILURES", "100", "CLAIM_TIMEOUT", "1h", "BACKOFF_BASE", "15m", "BACKOFF_MAX", "15m", "BATCH_LIMIT", "10000"},
			wantPolicy: workflow.Policy{
				MaxFailures: 100, ClaimTimeout: time.Hour, BackoffBase: 15 * time.Minute,
				BackoffMax: 15 * time.Minute, AlertTimeout: 2 * time.Minute,
			},
			wantLimit: 10000,
		},
		{
			name:       "plain http queue URL (local engines)",
			kv:         []string{"SCHEDULER_QUEUE_URL", "http://localhost:4566/000000000000/sas-scheduler"},
			wantPolicy: workflow.DefaultPolicy(), wantLimit: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := getenv(sampleEnv(), tt.kv...)
			cfg, err := LoadConfig(env)
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			want := Config{
				OrdersTable:       "sas-orders",
				StateTable:        "sas-state",
				SchedulerQueueURL: env("SCHEDULER_QUEUE_URL"),
				AlertTopicARN:     sampleTopicARN,
				Policy:            tt.wantPolicy,
				BatchLimit:        tt.wantLimit,
				Workflow:          workflow.Default(),
			}
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("LoadConfig =\n%+v\nwant\n%+v", cfg, want)
			}
			if err := cfg.Policy.Validate(); err != nil {
				t.Errorf("loaded policy invalid: %v", err)
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
		{name: "SCHEDULER_QUEUE_URL missing", kv: []string{"SCHEDULER_QUEUE_URL", ""}, want: []string{"SCHEDULER_QUEUE_URL is required"}},
		{name: "ALERT_TOPIC_ARN missing", kv: []string{"ALERT_TOPIC_ARN", ""}, want: []string{"ALERT_TOPIC_ARN is required"}},
		{
			name: "every required variable missing",
			kv:   []string{"ORDERS_TABLE", "", "STATE_TABLE", "", "SCHEDULER_QUEUE_URL", "", "ALERT_TOPIC_ARN", ""},
			want: []string{"ORDERS_TABLE is required", "STATE_TABLE is required", "SCHEDULER_QUEUE_URL is required", "ALERT_TOPIC_ARN is required"},
		},
		{name: "queue name instead of URL", kv: []string{"SCHEDULER_QUEUE_URL", "sas-scheduler"}, want: []string{`SCHEDULER_QUEUE_URL="sas-scheduler" is not an absolute http(s) URL`}},
		{name: "queue ARN instead of URL", kv: []string{"SCHEDULER_QUEUE_URL", "arn:aws:sqs:eu-west-1:123456789012:sas-scheduler"}, want: []string{"is not an absolute http(s) URL"}},
		{name: "queue URL without host", kv: []string{"SCHEDULER_QUEUE_URL", "https:///123456789012/sas-scheduler"}, want: []string{"is not an absolute http(s) URL"}},

		{name: "MAX_FAILURES not a number", kv: []string{"MAX_FAILURES", "three"}, want: []string{`MAX_FAILURES="three" is not an integer`}},
		{name: "MAX_FAILURES zero", kv: []string{"MAX_FAILURES", "0"}, want: []string{"MAX_FAILURES=0 must be within 1..100"}},
		{name: "MAX_FAILURES negative", kv: []string{"MAX_FAILURES", "-3"}, want: []string{"MAX_FAILURES=-3 must be within 1..100"}},
		{name: "MAX_FAILURES too high", kv: []string{"MAX_FAILURES", "101"}, want: []string{"MAX_FAILURES=101 must be within 1..100"}},
		{name: "BATCH_LIMIT zero", kv: []string{"BATCH_LIMIT", "0"}, want: []string{"BATCH_LIMIT=0 must be within 1..10000"}},
		{name: "BATCH_LIMIT too high", kv: []string{"BATCH_LIMIT", "10001"}, want: []string{"BATCH_LIMIT=10001 must be within 1..10000"}},
		{name: "BATCH_LIMIT not a number", kv: []string{"BATCH_LIMIT", "1e3"}, want: []string{`BATCH_LIMIT="1e3" is not an integer`}},

		{name: "CLAIM_TIMEOUT not a duration", kv: []string{"CLAIM_TIMEOUT", "two minutes"}, want: []string{`CLAIM_TIMEOUT="two minutes" is not a duration`}},
		{name: "CLAIM_TIMEOUT without unit", kv: []string{"CLAIM_TIMEOUT", "120"}, want: []string{`CLAIM_TIMEOUT="120" is not a duration`}},
		{name: "CLAIM_TIMEOUT too short", kv: []string{"CLAIM_TIMEOUT", "999ms"}, want: []string{"CLAIM_TIMEOUT=999ms must be within 1s..1h0m0s"}},
		{name: "CLAIM_TIMEOUT too long", kv: []string{"CLAIM_TIMEOUT", "61m"}, want: []string{"CLAIM_TIMEOUT=1h1m0s must be within"}},
		{name: "BACKOFF_BASE not a duration", kv: []string{"BACKOFF_BASE", "5"}, want: []string{`BACKOFF_BASE="5" is not a duration`}},
		{name: "BACKOFF_BASE negative", kv: []string{"BACKOFF_BASE", "-1s"}, want: []string{"BACKOFF_BASE=-1s must be within 0s..15m0s"}},
		{name: "BACKOFF_BASE above BACKOFF_MAX", kv: []string{"BACKOFF_BASE", "2m", "BACKOFF_MAX", "1m"}, want: []string{"BACKOFF_MAX=1m0s must be at least BACKOFF_BASE=2m0s"}},
		{name: "BACKOFF_BASE above the default BACKOFF_MAX", kv: []string{"BACKOFF_BASE", "10m"}, want: []string{"BACKOFF_MAX=5m0s must be at least BACKOFF_BASE=10m0s"}},
		{name: "BACKOFF_MAX not a duration", kv: []string{"BACKOFF_MAX", "forever"}, want: []string{`BACKOFF_MAX="forever" is not a duration`}},
		{name: "BACKOFF_MAX over 15m", kv: []string{"BACKOFF_MAX", "16m"}, want: []string{"BACKOFF_MAX=16m0s must be within 0s..15m0s"}},
		{name: "BACKOFF_MAX just over 15m", kv: []string{"BACKOFF_MAX", "15m1s"}, want: []string{"BACKOFF_MAX=15m1s must be within"}},
		{name: "ALERT_TIMEOUT not a duration", kv: []string{"ALERT_TIMEOUT", "later"}, want: []string{`ALERT_TIMEOUT="later" is not a duration`}},
		{name: "ALERT_TIMEOUT zero", kv: []string{"ALERT_TIMEOUT", "0s"}, want: []string{"ALERT_TIMEOUT=0s must be within 1s..1h0m0s"}},
		{name: "ALERT_TIMEOUT too long", kv: []string{"ALERT_TIMEOUT", "2h"}, want: []string{"ALERT_TIMEOUT=2h0m0s must be within"}},
		{
			name: "every problem reported at once",
			kv:   []string{"STATE_TABLE", "", "MAX_FAILURES", "0", "BACKOFF_MAX", "1h", "ALERT_TIMEOUT", "x"},
			want: []string{"STATE_TABLE is required", "MAX_FAILURES=0", "BACKOFF_MAX=1h0m0s", `ALERT_TIMEOUT="x"`},
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
