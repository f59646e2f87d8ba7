package stack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/infra/stack"
)

func TestFromContextDefaultsMatchCDKJSON(t *testing.T) {
	t.Parallel()
	got, err := stack.FromContext(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := stack.DefaultConfig()
	if got.SupervisorSchedule != want.SupervisorSchedule || got.LogRetentionDays != want.LogRetentionDays ||
		got.AgentMaxConcurrency != want.AgentMaxConcurrency || got.QueueAgeAlarm != want.QueueAgeAlarm || got.CodeDir != "build" {
		t.Fatalf("defaults %+v", got)
	}
	// cdk.json documents the same values, so a reader sees what runs.
	ctx := cdkJSONContext(t)
	for key, want := range map[string]string{
		stack.ContextCodeDir:             want.CodeDir,
		stack.ContextSupervisorSchedule:  want.SupervisorSchedule,
		stack.ContextLogRetentionDays:    "30",
		stack.ContextAgentMaxConcurrency: "5",
		stack.ContextAPIRateLimit:        "50",
		stack.ContextAPIBurstLimit:       "100",
		stack.ContextMaxReceiveCount:     "5",
		stack.ContextQueueAgeAlarm:       "10m",
	} {
		if ctx[key] != want {
			t.Errorf("cdk.json %s = %q, the default is %q", key, ctx[key], want)
		}
	}
}

func TestFromContextReadsAndValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ctx     map[string]string
		check   func(stack.Config) bool
		wantErr []string // every problem is reported at once
	}{
		{name: "overrides", ctx: map[string]string{
			stack.ContextSupervisorSchedule: "rate(5 minutes)", stack.ContextLogRetentionDays: "365",
			stack.ContextAgentMaxConcurrency: "20", stack.ContextAPIRateLimit: "12.5", stack.ContextQueueAgeAlarm: "1h",
		}, check: func(c stack.Config) bool {
			return c.SupervisorSchedule == "rate(5 minutes)" && c.LogRetentionDays == 365 && c.AgentMaxConcurrency == 20 &&
				c.APIRateLimit == 12.5 && c.QueueAgeAlarm == time.Hour
		}},
		{name: "cron schedule", ctx: map[string]string{stack.ContextSupervisorSchedule: "cron(0/2 * * * ? *)"},
			check: func(c stack.Config) bool { return c.SupervisorSchedule == "cron(0/2 * * * ? *)" }},
		{name: "singular unit needs 1", ctx: map[string]string{stack.ContextSupervisorSchedule: "rate(2 minute)"}, wantErr: []string{"sas:supervisorSchedule"}},
		{name: "plural unit needs more than 1", ctx: map[string]string{stack.ContextSupervisorSchedule: "rate(1 minutes)"}, wantErr: []string{"sas:supervisorSchedule"}},
		{name: "not a schedule", ctx: map[string]string{stack.ContextSupervisorSchedule: "every minute"}, wantErr: []string{"sas:supervisorSchedule"}},
		{name: "retention CloudWatch does not offer", ctx: map[string]string{stack.ContextLogRetentionDays: "31"}, wantErr: []string{"sas:logRetentionDays=31"}},
		{name: "event source concurrency below 2", ctx: map[string]string{stack.ContextAgentMaxConcurrency: "1"}, wantErr: []string{"sas:agentMaxConcurrency=1"}},
		{name: "age alarm within the retry delay", ctx: map[string]string{stack.ContextQueueAgeAlarm: "5m"}, wantErr: []string{"sas:queueAgeAlarm=5m0s"}},
		{name: "several problems", ctx: map[string]string{
			stack.ContextMaxReceiveCount: "zero", stack.ContextAPIRateLimit: "fast", stack.ContextQueueAgeAlarm: "soon",
		}, wantErr: []string{"sas:maxReceiveCount", "sas:apiRateLimit", "sas:queueAgeAlarm"}},
		{name: "limits", ctx: map[string]string{
			stack.ContextMaxReceiveCount: "0", stack.ContextAPIBurstLimit: "0", stack.ContextAPIRateLimit: "0",
		}, wantErr: []string{"sas:maxReceiveCount=0", "sas:apiBurstLimit=0", "sas:apiRateLimit=0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := stack.FromContext(func(k string) string { return tc.ctx[k] })
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("accepted %+v", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil || !tc.check(got) {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestValidateRejectsAStepAnAgentCannotFinish(t *testing.T) {
	t.Parallel()
	c := stack.DefaultConfig()
	c.Workflow.Steps[0].Budget = 20 * time.Minute
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), c.Workflow.Steps[0].Name) {
		t.Fatalf("Validate = %v", err)
	}
}
