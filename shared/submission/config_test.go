package submission

import (
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"SCHEDULER_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler",
		"ORDERS_TABLE":        "sas-orders",
		"STATE_TABLE":         "sas-state",
	}
	with := func(kv ...string) map[string]string {
		env := make(map[string]string, len(base))
		for k, v := range base {
			env[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string // substrings every one of which the error must contain
		check   func(t *testing.T, cfg Config)
	}{
		{name: "defaults", env: base, check: func(t *testing.T, cfg Config) {
			want := Config{
				SchedulerQueueURL: base["SCHEDULER_QUEUE_URL"],
				OrdersTable:       "sas-orders",
				StateTable:        "sas-state",
				Workflow:          workflow.Default(),
				ClaimTimeout:      workflow.DefaultPolicy().ClaimTimeout,
				MaxBodyBytes:      64 * 1024,
			}
			if cfg.SchedulerQueueURL != want.SchedulerQueueURL || cfg.OrdersTable != want.OrdersTable ||
				cfg.StateTable != want.StateTable || cfg.Workflow.Name != want.Workflow.Name ||
				len(cfg.Workflow.Steps) != len(want.Workflow.Steps) || cfg.ClaimTimeout != want.ClaimTimeout ||
				cfg.MaxBodyBytes != want.MaxBodyBytes {
				t.Fatalf("got %+v, want %+v", cfg, want)
			}
		}},
		{name: "claim timeout set", env: with("CLAIM_TIMEOUT", "45s"), check: func(t *testing.T, cfg Config) {
			if cfg.ClaimTimeout != 45*time.Second {
				t.Fatalf("ClaimTimeout = %v, want 45s", cfg.ClaimTimeout)
			}
		}},
		{name: "local emulator URL", env: with("SCHEDULER_QUEUE_URL", "http://127.0.0.1:4566/000000000000/scheduler")},
		{name: "nothing set", env: map[string]string{}, wantErr: []string{"SCHEDULER_QUEUE_URL is required", "ORDERS_TABLE is required", "STATE_TABLE is required"}},
		{name: "queue URL relative", env: with("SCHEDULER_QUEUE_URL", "scheduler"), wantErr: []string{"SCHEDULER_QUEUE_URL"}},
		{name: "queue URL scheme", env: with("SCHEDULER_QUEUE_URL", "ftp://x/y"), wantErr: []string{"SCHEDULER_QUEUE_URL"}},
		{name: "table name", env: with("ORDERS_TABLE", "no spaces please"), wantErr: []string{"ORDERS_TABLE"}},
		{name: "table name short", env: with("STATE_TABLE", "ab"), wantErr: []string{"STATE_TABLE"}},
		{name: "same table", env: with("STATE_TABLE", "sas-orders"), wantErr: []string{"must differ"}},
		{name: "claim timeout garbage", env: with("CLAIM_TIMEOUT", "soon"), wantErr: []string{"CLAIM_TIMEOUT"}},
		{name: "claim timeout too short", env: with("CLAIM_TIMEOUT", "500ms"), wantErr: []string{"CLAIM_TIMEOUT"}},
		{name: "claim timeout too long", env: with("CLAIM_TIMEOUT", "2h"), wantErr: []string{"CLAIM_TIMEOUT"}},
		{name: "every problem at once", env: map[string]string{"CLAIM_TIMEOUT": "x", "ORDERS_TABLE": "a"},
			wantErr: []string{"SCHEDULER_QUEUE_URL", "ORDERS_TABLE", "STATE_TABLE", "CLAIM_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadConfig(func(k string) string { return tt.env[k] })
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LoadConfig succeeded with %+v", cfg)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
}
