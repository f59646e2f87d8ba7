package cost

import (
	"math"
	"testing"
)

func TestCompare(t *testing.T) {
	// One task: 4.5 ms of agent work + 100 ms remote = 104.5 ms, billed 105.
	gbs := 0.0000133334 * 1e6
	taskLambdas := 2*0.2 + 2*0.105*0.125*gbs
	extras := 1.00 + 2*0.625 + 3*0.50 // API, order record, status events
	written := 3 * 1024.0 / GB
	tests := []struct {
		name  string
		lines map[string]float64 // item prefix → $ per million orders
		total float64
	}{
		{"Step Functions Standard", map[string]float64{
			"Standard state transitions": 2 * 0.025 / 1000 * 1e6,
		}, 50 + taskLambdas + extras},
		{"Step Functions Express", map[string]float64{
			"Express requests": 1.00,
			// 2 × 104.5 ms = 209 ms, rounded up to 300 ms, at 64 MB.
			"Express duration": 0.3 * 0.0625 * 0.06 / 3600 * 1e6,
		}, 1 + 0.3*0.0625*0.06/3600*1e6 + taskLambdas + extras},
		{"Lambda durable functions", map[string]float64{
			"operations":    3 * 8.00,
			"data written":  written * 0.25 * 1e6,
			"data retained": written * 14 / 30 * 0.15 * 1e6,
			// One invocation of 209 ms at 0.125 GB.
			"duration: 2 steps": 0.209 * 0.125 * gbs,
		}, 24 + written*0.25e6 + written*14/30*0.15e6 + 0.2 + 0.209*0.125*gbs + extras},
	}
	comps := Compare(tenOrders(), ListPrices(), twoSteps())
	if len(comps) != len(tests) {
		t.Fatalf("%d comparisons, want %d", len(comps), len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := comps[i]
			if c.Name != tt.name || c.Source == "" {
				t.Fatalf("comparison %d is %q (source %q)", i, c.Name, c.Source)
			}
			for item, want := range tt.lines {
				service := map[bool]string{true: "Step Functions", false: "Lambda durable"}[i < 2]
				if item == "duration: 2 steps" {
					service = "Lambda"
				}
				if got := find(t, c.Lines, service, item).USDPerMillion; !near(got, want) {
					t.Errorf("%s: $%g, want $%g", item, got, want)
				}
			}
			if !near(c.Total(), tt.total) {
				t.Errorf("total $%g, want $%g", c.Total(), tt.total)
			}
		})
	}
}

func TestCompareParameters(t *testing.T) {
	a := twoSteps()
	base := Compare(tenOrders(), ListPrices(), a)
	a.SFNStandardTransitions = 4 // a Succeed state at the end
	a.StatusEvents = 0
	more := Compare(tenOrders(), ListPrices(), a)
	// Two more transitions: +$50; no status events: -$1.50.
	if d := more[0].Total() - base[0].Total(); math.Abs(d-(50-1.5)) > 1e-9 {
		t.Errorf("Standard changed by $%g, want $48.50", d)
	}
}

func TestTaskWithoutAgentRecords(t *testing.T) {
	// Without a measured Agent the task is the remote latency alone.
	if got := taskSeconds(Usage{Orders: 1}, twoSteps()); !near(got, 0.1) {
		t.Errorf("task %g s, want 0.1", got)
	}
}

// twoSteps are the default assumptions for a workflow of two steps behind
// two Agent queues, which the pinned figures of these tests were worked
// out for.
func twoSteps() Assumptions {
	a := DefaultAssumptions()
	a.Steps, a.SFNStandardTransitions, a.DurableOperations, a.AdmissionQueues = 2, 2, 3, 2
	return a
}
