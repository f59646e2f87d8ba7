package stack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

func TestFromContextDefaultsMatchCDKJSON(t *testing.T) {
	t.Parallel()
	got, err := stack.FromContext(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := stack.DefaultConfig()
	if got.SupervisorSchedule != want.SupervisorSchedule || got.LogRetentionDays != want.LogRetentionDays ||
		got.Capacity != topology.DefaultCapacity() || got.QueueAgeAlarm != want.QueueAgeAlarm || got.CodeDir != "build" || got.Stage != "dev" {
		t.Fatalf("defaults %+v", got)
	}
	// cdk.json documents the same values, so a reader sees what runs.
	ctx := cdkJSONContext(t)
	for key, want := range map[string]string{
		stack.ContextStage:              "dev",
		stack.ContextCodeDir:            want.CodeDir,
		stack.ContextSupervisorSchedule: want.SupervisorSchedule,
		stack.ContextLogRetentionDays:   "30",
		stack.ContextRemoteLatency:      "100ms",
		stack.ContextRemoteConcurrency:  "50",
		stack.ContextAdmitWait:          "1s",
		stack.ContextMaxReceiveCount:    "5",
		stack.ContextQueueAgeAlarm:      "10m",
		stack.ContextRetention:          "2160h",
		stack.ContextTraceSampleRate:    "0.01",
	} {
		if ctx[key] != want {
			t.Errorf("cdk.json %s = %q, the default is %q", key, ctx[key], want)
		}
	}
	// cdk.json's values parse to the defaults, and it sets no key the app
	// no longer reads.
	fromJSON, err := stack.FromContext(func(k string) string { return ctx[k] })
	if err != nil || fromJSON.Capacity != want.Capacity || fromJSON.QueueAgeAlarm != want.QueueAgeAlarm || fromJSON.Retention != 90*24*time.Hour {
		t.Errorf("cdk.json's context gives %+v, %v", fromJSON, err)
	}
	for _, gone := range []string{"sas:agentMaxConcurrency", "sas:apiRateLimit", "sas:apiBurstLimit"} {
		if _, set := ctx[gone]; set {
			t.Errorf("cdk.json sets %s, which the capacity model replaced", gone)
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
			stack.ContextRemoteLatency: "250ms", stack.ContextRemoteConcurrency: "200", stack.ContextAdmitWait: "2s",
			stack.ContextQueueAgeAlarm: "1h",
		}, check: func(c stack.Config) bool {
			return c.SupervisorSchedule == "rate(5 minutes)" && c.LogRetentionDays == 365 &&
				c.Capacity == topology.Capacity{RemoteLatency: 250 * time.Millisecond, RemoteConcurrency: 200, AdmitWait: 2 * time.Second} &&
				c.QueueAgeAlarm == time.Hour
		}},
		{name: "one model input, the others default", ctx: map[string]string{stack.ContextRemoteConcurrency: "100"},
			check: func(c stack.Config) bool {
				d := topology.DefaultCapacity()
				return c.Capacity == topology.Capacity{RemoteLatency: d.RemoteLatency, RemoteConcurrency: 100, AdmitWait: d.AdmitWait}
			}},
		{name: "stage", ctx: map[string]string{stack.ContextStage: "prod-eu-2"},
			check: func(c stack.Config) bool {
				return c.Stage == "prod-eu-2" && stack.StackName(c.Stage) == "SchedulerAgentSupervisor-prod-eu-2"
			}},
		{name: "stage of 16 characters", ctx: map[string]string{stack.ContextStage: "a123456789012345"},
			check: func(c stack.Config) bool { return c.Stage == "a123456789012345" }},
		{name: "stage too long", ctx: map[string]string{stack.ContextStage: "a1234567890123456"}, wantErr: []string{`sas:stage="a1234567890123456"`}},
		{name: "stage upper case", ctx: map[string]string{stack.ContextStage: "Prod"}, wantErr: []string{`sas:stage="Prod"`}},
		{name: "stage starts with a digit", ctx: map[string]string{stack.ContextStage: "1prod"}, wantErr: []string{`sas:stage="1prod"`}},
		{name: "stage with an underscore", ctx: map[string]string{stack.ContextStage: "my_stage"}, wantErr: []string{`sas:stage="my_stage"`}},
		{name: "cron schedule", ctx: map[string]string{stack.ContextSupervisorSchedule: "cron(0/2 * * * ? *)"},
			check: func(c stack.Config) bool { return c.SupervisorSchedule == "cron(0/2 * * * ? *)" }},
		{name: "singular unit needs 1", ctx: map[string]string{stack.ContextSupervisorSchedule: "rate(2 minute)"}, wantErr: []string{"sas:supervisorSchedule"}},
		{name: "plural unit needs more than 1", ctx: map[string]string{stack.ContextSupervisorSchedule: "rate(1 minutes)"}, wantErr: []string{"sas:supervisorSchedule"}},
		{name: "not a schedule", ctx: map[string]string{stack.ContextSupervisorSchedule: "every minute"}, wantErr: []string{"sas:supervisorSchedule"}},
		{name: "retention CloudWatch does not offer", ctx: map[string]string{stack.ContextLogRetentionDays: "31"}, wantErr: []string{"sas:logRetentionDays=31"}},
		{name: "order retention of a year", ctx: map[string]string{stack.ContextRetention: "8760h"},
			check: func(c stack.Config) bool { return c.Retention == 365*24*time.Hour }},
		{name: "order retention of a day", ctx: map[string]string{stack.ContextRetention: "24h"},
			check: func(c stack.Config) bool { return c.Retention == 24*time.Hour }},
		{name: "order retention under a day", ctx: map[string]string{stack.ContextRetention: "23h59m"}, wantErr: []string{"sas:retention=23h59m0s must be within 24h0m0s..87600h0m0s"}},
		{name: "order retention over ten years", ctx: map[string]string{stack.ContextRetention: "87601h"}, wantErr: []string{"sas:retention=87601h0m0s must be within"}},
		{name: "every order traced", ctx: map[string]string{stack.ContextTraceSampleRate: "1"},
			check: func(c stack.Config) bool { return c.TraceSampleRate == 1 }},
		{name: "no order traced", ctx: map[string]string{stack.ContextTraceSampleRate: "0"},
			check: func(c stack.Config) bool { return c.TraceSampleRate == 0 }},
		{name: "trace sample rate as a percentage", ctx: map[string]string{stack.ContextTraceSampleRate: "5"},
			wantErr: []string{`sas:traceSampleRate=5 must be a share from 0 to 1`}},
		{name: "trace sample rate not a number", ctx: map[string]string{stack.ContextTraceSampleRate: "1%"},
			wantErr: []string{`sas:traceSampleRate="1%" is not a number`}},
		{name: "order retention in days", ctx: map[string]string{stack.ContextRetention: "90d"}, wantErr: []string{`sas:retention="90d" is not a Go duration`}},
		// Fewer than two Agent invocations of 10 records: an event source
		// mapping's MaximumConcurrency is at least 2.
		{name: "remote concurrency below two invocations", ctx: map[string]string{stack.ContextRemoteConcurrency: "5"},
			wantErr: []string{"sas:remoteConcurrency=5", "remote concurrency 5 must be within 20..10000"}},
		{name: "age alarm within the retry delay", ctx: map[string]string{stack.ContextQueueAgeAlarm: "5m"}, wantErr: []string{"sas:queueAgeAlarm=5m0s"}},
		// The default steps wait 5 s at most: an admit wait of 3 s leaves
		// them no room for a burst the check sees late.
		{name: "admit wait the steps' allowance cannot cover", ctx: map[string]string{stack.ContextAdmitWait: "3s"},
			wantErr: []string{"sas:admitWait=3s does not fit order-v1", `step "reserve-inventory"`, `step "charge-payment"`}},
		{name: "several problems", ctx: map[string]string{
			stack.ContextMaxReceiveCount: "zero", stack.ContextRemoteLatency: "fast", stack.ContextAdmitWait: "soon", stack.ContextQueueAgeAlarm: "soon",
		}, wantErr: []string{"sas:maxReceiveCount", "sas:remoteLatency", "sas:admitWait", "sas:queueAgeAlarm"}},
		{name: "limits", ctx: map[string]string{
			stack.ContextMaxReceiveCount: "0", stack.ContextRemoteLatency: "10m", stack.ContextRemoteConcurrency: "20000", stack.ContextAdmitWait: "50ms",
		}, wantErr: []string{"sas:maxReceiveCount=0", "remote latency 10m0s must be within", "remote concurrency 20000 must be within", "admit wait 50ms must be within"}},
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
	c.Workflows.Definitions[0].Steps[0].Budget = 20 * time.Minute
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), c.Workflows.Definitions[0].Steps[0].Name) ||
		!strings.Contains(err.Error(), stack.CatalogFile) {
		t.Fatalf("Validate = %v", err)
	}
	// A budget and a wait each within the workflow's bounds, whose lease
	// (the Agent's whole claim) is not: the version's own rule.
	c = stack.DefaultConfig()
	c.Workflows.Definitions[0].Steps[1].Budget, c.Workflows.Definitions[0].Steps[1].Wait = 12*time.Minute, 3*time.Minute
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `step "charge-payment": wait 3m0s plus budget 12m0s exceeds the 14m0s`) {
		t.Fatalf("Validate = %v", err)
	}
}

// TestValidateRefusesAnInvalidCatalog: the catalog's versions share one
// Agent per step, so a lease that fits in each version alone can still be
// too long for their shared Agent; and a catalog must declare the version
// it makes current. Each problem names the file to change.
func TestValidateRefusesAnInvalidCatalog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		edit  func(*workflow.Catalog)
		wants []string
	}{
		{"the current version is not declared", func(c *workflow.Catalog) { c.Current["order"] = 3 },
			[]string{`the current version of "order", 3, is not declared`}},
		{"a lease too long across versions", func(c *workflow.Catalog) {
			// v1 waits 5m and runs 8m; v2 waits 1m and runs 10m: each
			// 13m or less, their Agent's lease 15m.
			c.Definitions[0].Steps[1].Wait, c.Definitions[0].Steps[1].Budget = 5*time.Minute, 8*time.Minute
			c.Definitions[1].Steps[1].Wait, c.Definitions[1].Steps[1].Budget = time.Minute, 10*time.Minute
		}, []string{`step "charge-payment": the longest wait plus budget of its versions, 15m0s, exceeds the 14m0s`}},
		{"every problem at once", func(c *workflow.Catalog) {
			c.Current["order"] = 3
			c.Default = "refund"
		}, []string{`the current version of "order", 3, is not declared`, `the default workflow "refund" has no versions`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := stack.DefaultConfig()
			c.Workflows = twoVersions()
			if err := c.Validate(); err != nil {
				t.Fatalf("the two-version catalog: %v", err)
			}
			tc.edit(&c.Workflows)
			for _, d := range c.Workflows.Definitions {
				if err := d.Validate(); err != nil {
					t.Fatalf("%s alone: %v", d.ID(), err)
				}
			}
			err := c.Validate()
			for _, w := range append(tc.wants, "stack config: "+stack.CatalogFile+": workflow catalog: ") {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %v, does not say %q", err, w)
				}
			}
		})
	}
	// A code step no live version has stops the synth: its folder would be
	// deployed for nothing.
	c := stack.DefaultConfig()
	c.Workflows = workflow.Catalog{Definitions: []workflow.Definition{workflow.Reference()}, Current: map[string]int{"order": 1}, Default: "order"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "steps/ship-order is a step of no live workflow version") {
		t.Errorf("Validate with ship-order's folder and no version of it = %v", err)
	}
	// An admit wait no version's waits cover names every version.
	c = stack.DefaultConfig()
	c.Workflows = twoVersions()
	c.Capacity.AdmitWait = 4 * time.Second
	err := c.Validate()
	for _, w := range []string{"sas:admitWait=4s does not fit order-v1 of " + stack.CatalogFile, "sas:admitWait=4s does not fit order-v2 of", `step "ship-order": wait 5s`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate = %v, does not say %q", err, w)
		}
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	c := stack.DefaultConfig()
	c.LogRetentionDays = 31
	c.Capacity.RemoteConcurrency = 1
	c.Capacity.AdmitWait = 4 * time.Second
	err := c.Validate()
	for _, w := range []string{"sas:logRetentionDays=31", "remote concurrency 1 must be within", "sas:admitWait=4s does not fit order-v1"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate = %v, does not name %q", err, w)
		}
	}
}
