package cost

import (
	"github.com/sasflow/sas/shared/workflow"
	"testing"
	"time"
)

func TestFixed(t *testing.T) {
	lines := Fixed(ListPrices(), DefaultAssumptions(), referenceFixed())
	tests := []struct {
		item        string
		perMonth    float64
		usdPerMonth float64
	}{
		{"Supervisor schedule: Lambda requests", 43200, 43200 * 0.2 / 1e6},
		// 43,200 × 50 ms × 0.25 GB.
		{"Supervisor schedule: Lambda duration", 540, 540 * 0.0000133334},
		{"Supervisor schedule: in-flight index Query", 21600, 21600 * 0.125 / 1e6},
		// 16 pollers × 2,592,000 s / 20 s.
		{"SQS idle long polls", 2073600, 2073600 * 0.4 / 1e6},
		// 31 alarms evaluating 46 metrics, each billed.
		{"CloudWatch alarms", 46, 4.60},
		{"CloudWatch custom metrics", 14, 4.20},
		{"CloudWatch dashboards", 1, 3.00},
		{"KMS customer managed keys", 2, 2.00},
		// 2,592,000 / 300 × 2 × (1 + 6 publishers).
		{"KMS requests", 120960, 120960 * 0.03 / 1e4},
	}
	if len(lines) != len(tests) {
		t.Fatalf("%d fixed lines, want %d: %+v", len(lines), len(tests), lines)
	}
	sum := 0.0
	for i, tt := range tests {
		got := lines[i]
		if got.Item[:len(tt.item)] != tt.item || !near(got.PerMonth, tt.perMonth) || !near(got.USDPerMonth, tt.usdPerMonth) {
			t.Errorf("line %d = %+v, want %s %g units $%g", i, got, tt.item, tt.perMonth, tt.usdPerMonth)
		}
		sum += tt.usdPerMonth
	}
	if !near(FixedTotal(lines), sum) {
		t.Errorf("total %g, want %g", FixedTotal(lines), sum)
	}
}

func TestFixedParameters(t *testing.T) {
	f := referenceFixed()
	f.IdlePollers = map[string]int{"one queue": 1}
	f.LongPollWait = 10 * time.Second
	f.TopicPublishers = map[string]int{"one topic": 1}
	f.DataKeyReuse = time.Minute
	lines := Fixed(ListPrices(), DefaultAssumptions(), f)
	if got := lines[3].PerMonth; !near(got, 259200) {
		t.Errorf("idle polls %g, want 2,592,000 s / 10 s", got)
	}
	if got := lines[8].PerMonth; !near(got, 86400) {
		t.Errorf("KMS requests %g, want 2,592,000 / 60 × 2", got)
	}
}

// referenceFixed are the fixed costs of the reference workflow's stack,
// whatever the deployed catalog holds.
func referenceFixed() FixedParams { return FixedFor(workflow.Reference().StepNames()) }
