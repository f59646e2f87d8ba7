package agent_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
)

// The replicas of the router's tests.
const (
	epA = "https://a.remote.example/v1/steps/charge-payment"
	epB = "https://b.remote.example/v1/steps/charge-payment"
	epC = "https://c.remote.example/v1/steps/charge-payment"
)

// newRouter returns a router whose breakers open after 3 failures for 10s,
// a failure costing 1s and a record halving every 10s, drawing ties with
// draw.
func newRouter(draw func(int) int) (*agent.Router, *clock.Fake) {
	clk := clock.NewFake(t0)
	return agent.NewRouter(agent.NewBreakers(3, 10*time.Second, clk), clk, time.Second, 10*time.Second, draw), clk
}

// first draws the lowest number: ties go to the cheapest, the first listed
// among equals.
func first(int) int { return 0 }

// reverse draws ever lower numbers: a tie goes to the last of the tied in
// order of cost, so a test tells a tie from a preference.
func reverse() func(int) int {
	n := 1 << 20
	return func(int) int { n--; return n }
}

func TestRouterPicks(t *testing.T) {
	t.Parallel()
	eps := []string{epA, epB, epC}
	type try struct {
		ep   string
		took time.Duration
		res  agent.Result
	}
	fail := func(ep string, n int) []try {
		var out []try
		for range n {
			out = append(out, try{ep, time.Millisecond, agent.Failure})
		}
		return out
	}
	ok := func(ep string, took time.Duration) try { return try{ep, took, agent.Success} }
	tests := []struct {
		name     string
		eps      []string
		history  []try
		advance  time.Duration // after the history
		failed   []bool        // earlier in the same request
		want     string        // the endpoint picked, "" for a refusal
		wantWait time.Duration // of a refusal
	}{
		{name: "a fresh router ties every replica", eps: eps, want: epC},
		{name: "skips an open breaker", eps: eps[:2], history: fail(epA, 3), want: epB},
		{name: "avoids a replica failing below the threshold", eps: eps[:2],
			history: append(fail(epA, 1), ok(epB, 80*time.Millisecond)), want: epB},
		{name: "prefers lower latency", eps: eps,
			history: []try{ok(epA, 300*time.Millisecond), ok(epB, 20*time.Millisecond), ok(epC, 90*time.Millisecond)}, want: epB},
		{name: "latencies within the tolerance are tied", eps: eps[:2],
			history: []try{ok(epA, 21*time.Millisecond), ok(epB, 20*time.Millisecond)}, want: epA},
		{name: "a try that failed in the request sends the next elsewhere", eps: eps[:2],
			history: []try{ok(epA, 10*time.Millisecond), ok(epB, 400*time.Millisecond)}, failed: []bool{true, false}, want: epB},
		{name: "when every replica failed in the request, the best of them", eps: eps[:2],
			history: []try{ok(epA, 10*time.Millisecond), ok(epB, 400*time.Millisecond)}, failed: []bool{true, true}, want: epA},
		{name: "prefers a closed breaker to a half-open probe", eps: eps[:2],
			history: append(fail(epA, 3), ok(epB, 900*time.Millisecond)), advance: 10 * time.Second, want: epB},
		{name: "a half-open probe when nothing else lets the try through", eps: eps[:2],
			history: append(fail(epA, 3), fail(epB, 3)...), advance: 10*time.Second - 2*time.Millisecond, want: epA},
		{name: "every breaker open fails fast, waiting for the first to cool", eps: eps[:2],
			history: append(fail(epA, 3), fail(epB, 3)...), advance: 2 * time.Second, wantWait: 8*time.Second - 3*time.Millisecond},
		{name: "a slow replica is tried again once its record fades", eps: eps[:2],
			history: []try{ok(epA, 4*time.Second), ok(epB, 20*time.Millisecond)}, advance: 3 * time.Minute, want: epA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, clk := newRouter(reverse())
			for _, h := range tt.history {
				if err := r.Record(clk, h.ep, h.took, h.res); err != nil {
					t.Fatalf("record %+v: %v", h, err)
				}
			}
			clk.Advance(tt.advance)
			failed := tt.failed
			if failed == nil {
				failed = make([]bool, len(tt.eps))
			}
			i, report, err := r.Pick(tt.eps, failed)
			if tt.want == "" {
				var oe *agent.OpenError
				if !errors.As(err, &oe) || !errors.Is(err, agent.ErrOpen) {
					t.Fatalf("Pick = %d, %v; want an open breaker's refusal", i, err)
				}
				if oe.Wait != tt.wantWait {
					t.Errorf("refusal waits %v, want %v", oe.Wait, tt.wantWait)
				}
				return
			}
			if err != nil {
				t.Fatalf("Pick: %v", err)
			}
			defer report(agent.Success)
			if got := tt.eps[i]; got != tt.want {
				t.Errorf("picked %s, want %s (health A %+v, B %+v)", got, tt.want, r.Health(epA), r.Health(epB))
			}
		})
	}
}

// One half-open probe at a time: while it is in flight, the next try is
// refused when no other replica lets it through, and its success closes
// the breaker.
func TestRouterHalfOpenProbe(t *testing.T) {
	t.Parallel()
	r, clk := newRouter(first)
	for range 3 {
		if err := r.Record(clk, epA, time.Millisecond, agent.Failure); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(10 * time.Second)
	eps := []string{epA}
	i, probe, err := r.Pick(eps, []bool{false})
	if err != nil || i != 0 {
		t.Fatalf("probe: Pick = %d, %v", i, err)
	}
	if _, _, err := r.Pick(eps, []bool{false}); !errors.Is(err, agent.ErrOpen) {
		t.Fatalf("a second try while the probe is in flight: %v, want refused", err)
	}
	probe(agent.Success)
	if got := r.Health(epA).Breaker; got != agent.Closed {
		t.Errorf("after the probe's success the breaker is %v, want closed", got)
	}
}

// Ties are drawn at random, so a cold container spreads its tries over the
// replicas instead of piling onto the first; and the one with fewer tries
// in flight wins a tie.
func TestRouterSpreadsTies(t *testing.T) {
	t.Parallel()
	t.Run("drawn", func(t *testing.T) {
		t.Parallel()
		rnd := rand.New(rand.NewPCG(1, 2))
		r, clk := newRouter(rnd.IntN)
		eps := []string{epA, epB}
		count := map[string]int{}
		for range 200 {
			i, report, err := r.Pick(eps, []bool{false, false})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(10 * time.Millisecond)
			report(agent.Success)
			count[eps[i]]++
		}
		if count[epA] < 60 || count[epB] < 60 {
			t.Errorf("tries per replica %v, want both well used", count)
		}
	})
	t.Run("fewer in flight", func(t *testing.T) {
		t.Parallel()
		r, _ := newRouter(first)
		eps := []string{epA, epB, epC}
		seen := map[int]bool{}
		for range 3 {
			// None reports: each pick sees the others in flight.
			i, _, err := r.Pick(eps, []bool{false, false, false})
			if err != nil {
				t.Fatal(err)
			}
			seen[i] = true
		}
		if len(seen) != 3 {
			t.Errorf("three tries in flight went to %v, want one per replica", seen)
		}
	})
}

// The router is used by a batch's records at once (run with -race).
func TestRouterConcurrentUse(t *testing.T) {
	t.Parallel()
	r, clk := newRouter(nil)
	eps := []string{epA, epB, epC}
	var wg sync.WaitGroup
	for n := range 50 {
		wg.Go(func() {
			failed := make([]bool, len(eps))
			i, report, err := r.Pick(eps, failed)
			if err != nil {
				return
			}
			clk.Advance(time.Millisecond)
			report([]agent.Result{agent.Success, agent.Failure, agent.Ignored}[n%3])
			_ = r.Health(eps[i])
		})
	}
	wg.Wait()
	for _, ep := range eps {
		if h := r.Health(ep); h.InFlight != 0 {
			t.Errorf("%s: %d in flight after every try ended", ep, h.InFlight)
		}
	}
}
