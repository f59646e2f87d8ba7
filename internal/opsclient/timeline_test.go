package opsclient

import (
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	ms := time.Millisecond
	order := func(state workflow.ProcessState, updated time.Duration, steps ...api.StepHistory) api.Order {
		return api.Order{OrderID: "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90", State: state, CreatedAt: t0, UpdatedAt: t0.Add(updated), Steps: steps}
	}
	ok := func(name string, attempts, failures int, started, finished time.Duration) api.StepHistory {
		return api.StepHistory{Name: name, State: workflow.StepSucceeded, Attempts: attempts, Failures: failures, StartedAt: at(started), FinishedAt: at(finished)}
	}
	for _, tc := range []struct {
		name  string
		order api.Order
		now   time.Duration
		width int
	}{
		{"processed", order(workflow.Processed, 900*ms, ok("reserve-inventory", 1, 0, 40*ms, 400*ms), ok("charge-payment", 1, 0, 450*ms, 880*ms)), time.Hour, 80},
		{"retried", order(workflow.Processed, 4200*ms, ok("reserve-inventory", 1, 0, 40*ms, 300*ms), ok("charge-payment", 3, 2, 3300*ms, 4100*ms)), time.Hour, 80},
		{"compensated", order(workflow.Compensated, 2600*ms,
			func() api.StepHistory {
				s := ok("reserve-inventory", 1, 0, 50*ms, 500*ms)
				s.Compensation, s.CompensationAttempts, s.CompensatedAt = workflow.StepSucceeded, 2, at(2500*ms)
				return s
			}(),
			api.StepHistory{Name: "charge-payment", State: workflow.StepFailed, Attempts: 2, Failures: 1, StartedAt: at(1200 * ms), FinishedAt: at(1500 * ms)}), time.Hour, 80},
		{"compensation failed", order(workflow.CompensationFailed, 9*time.Second,
			func() api.StepHistory {
				s := ok("reserve-inventory", 1, 0, 50*ms, 500*ms)
				s.Compensation, s.CompensationAttempts, s.CompensationFailures = workflow.StepFailed, 3, 3
				return s
			}(),
			api.StepHistory{Name: "charge-payment", State: workflow.StepFailed, Attempts: 1, StartedAt: at(600 * ms), FinishedAt: at(1 * time.Second)}), time.Hour, 80},
		{"in flight", order(workflow.Processing, 2*time.Second, ok("reserve-inventory", 1, 0, 100*ms, 1*time.Second),
			api.StepHistory{Name: "charge-payment", State: workflow.StepProcessing, Attempts: 2, Failures: 1, StartedAt: at(2 * time.Second)}), 3 * time.Minute, 80},
		{"nothing ran", order(workflow.Pending, 0, api.StepHistory{Name: "reserve-inventory", State: workflow.StepPending}), 2 * time.Second, 80},
		{"narrow", order(workflow.Processed, 4200*ms, ok("reserve-inventory", 1, 0, 40*ms, 300*ms), ok("charge-payment", 3, 2, 3300*ms, 4100*ms)), time.Hour, 20},
		{"wide", order(workflow.Processed, 95*time.Minute, ok("reserve-inventory", 1, 0, time.Second, 2*time.Minute), ok("charge-payment", 4, 3, 80*time.Minute, 95*time.Minute)), time.Hour, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lines := Timeline(tc.order, t0.Add(tc.now), tc.width)
			for _, l := range lines {
				if n := len([]rune(l)); n > max(tc.width, MinTimelineWidth) && tc.name != "narrow" {
					t.Errorf("line of %d columns, over %d: %q", n, tc.width, l)
				}
			}
			checkGolden(t, "timeline-"+strings.ReplaceAll(tc.name, " ", "-")+".txt", strings.Join(lines, "\n")+"\n")
		})
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0ms", 120 * time.Millisecond: "120ms", 4200 * time.Millisecond: "4.2s", 42 * time.Second: "42s",
		125 * time.Second: "2m05s", 62 * time.Minute: "1h02m",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestTimelineWidth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flagged int
		columns string
		want    int
	}{
		{0, "", DefaultTimelineWidth}, {0, "132", 132}, {0, "12", DefaultTimelineWidth}, {0, "wide", DefaultTimelineWidth}, {100, "132", 100},
	} {
		if got, err := timelineWidth(tc.flagged, tc.columns); err != nil || got != tc.want {
			t.Errorf("timelineWidth(%d, %q) = %d, %v; want %d", tc.flagged, tc.columns, got, err, tc.want)
		}
	}
}
