package localstack_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/enginetest"
)

// TestRecoveryIsTheFastPaths: with the sweep an hour away, every step whose
// Agent was killed is recovered by the fast path (the Deadline function)
// and claimed again; the measurement names who decided.
func TestRecoveryIsTheFastPaths(t *testing.T) {
	t.Parallel()
	o := localstack.DemoOptions()
	o.Faults = remotesim.Faults{}
	o.Crash, o.SuperviseEvery = 1, time.Hour
	for _, d := range o.Workflows.Definitions {
		for i := range d.Steps {
			d.Steps[i].Budget = 2 * time.Second
		}
	}
	watch := &localstack.RecoveryWatch{Next: io.Discard}
	st := startWatched(t, o, "recovery", watch)
	res, err := localstack.Recovery{Stack: st, Watch: watch, Orders: 5, Spread: time.Second, Timeout: time.Minute}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Decision) != 5 || len(res.NextClaim) != 5 || res.DecidedBy["deadline"] != 5 {
		t.Fatalf("decisions %v, claims %v, decided by %v; want 5 each, all by the fast path", res.Decision, res.NextClaim, res.DecidedBy)
	}
	for i := range res.Decision {
		if res.NextClaim[i] < res.Decision[i] || res.Decision[i] < 0 {
			t.Fatalf("decision %v before its deadline, or a claim %v before it", res.Decision[i], res.NextClaim[i])
		}
	}
}

// startWatched starts a stack of its own for the test on the engines,
// its handlers logging JSON to watch; the test's end stops it.
func startWatched(t *testing.T, o localstack.Options, name string, watch io.Writer) *localstack.Stack {
	t.Helper()
	o.DynamoDBEndpoint, o.AWSEndpoint = enginetest.Endpoints(t)
	o.Prefix = enginetest.UniqueName(t, name)
	o.Log = slog.New(slog.NewJSONHandler(watch, nil))
	st, err := localstack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 100 * time.Millisecond, 99: 198 * time.Millisecond, 100: 200 * time.Millisecond, 0.1: time.Millisecond} {
		if got := localstack.Percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if got := localstack.Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}
