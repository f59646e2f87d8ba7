package agent_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// newBreaker returns a breaker of the endpoint "remote" on a fake clock at
// t0.
func newBreaker(failures int, cooldown time.Duration) (*agent.Breaker, *clock.Fake) {
	clk := clock.NewFake(t0)
	return agent.NewBreaker("remote", failures, cooldown, clk), clk
}

// op is one step of a breaker script.
type op struct {
	do        string // "fail", "ok", "ignore", "refused", "advance"
	d         time.Duration
	wantState string        // "" checks nothing
	wantWait  time.Duration // for "refused"
}

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	const cooldown = 10 * time.Second
	tests := []struct {
		name string
		ops  []op
	}{
		{"stays closed below the threshold", []op{
			{do: "fail", wantState: "closed"},
			{do: "fail", wantState: "closed"},
			{do: "ok", wantState: "closed"},
			{do: "fail", wantState: "closed"},
			{do: "fail", wantState: "closed"},
		}},
		{"opens after consecutive failures", []op{
			{do: "fail", wantState: "closed"},
			{do: "fail", wantState: "closed"},
			{do: "fail", wantState: "open"},
			{do: "refused", wantState: "open", wantWait: cooldown},
			{do: "advance", d: 4 * time.Second, wantState: "open"},
			{do: "refused", wantState: "open", wantWait: 6 * time.Second},
		}},
		{"ignored results do not count", []op{
			{do: "fail", wantState: "closed"},
			{do: "fail", wantState: "closed"},
			{do: "ignore", wantState: "closed"},
			{do: "ok", wantState: "closed"},
			{do: "fail", wantState: "closed"},
		}},
		{"half-open probe success closes", []op{
			{do: "fail"}, {do: "fail"}, {do: "fail", wantState: "open"},
			{do: "advance", d: cooldown, wantState: "half-open"},
			{do: "ok", wantState: "closed"},
			{do: "fail", wantState: "closed"},
		}},
		{"half-open probe failure reopens for a full cooldown", []op{
			{do: "fail"}, {do: "fail"}, {do: "fail", wantState: "open"},
			{do: "advance", d: cooldown + time.Second, wantState: "half-open"},
			{do: "fail", wantState: "open"},
			{do: "refused", wantState: "open", wantWait: cooldown},
		}},
		{"ignored probe frees the slot", []op{
			{do: "fail"}, {do: "fail"}, {do: "fail", wantState: "open"},
			{do: "advance", d: cooldown, wantState: "half-open"},
			{do: "ignore", wantState: "half-open"},
			{do: "ok", wantState: "closed"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, clk := newBreaker(3, cooldown)
			for i, o := range tt.ops {
				switch o.do {
				case "advance":
					clk.Advance(o.d)
				case "refused":
					_, err := b.Allow()
					var oe *agent.OpenError
					if !errors.As(err, &oe) || !errors.Is(err, agent.ErrOpen) {
						t.Fatalf("op %d: Allow = %v, want an OpenError", i, err)
					}
					if oe.Wait != o.wantWait {
						t.Errorf("op %d: Wait = %v, want %v", i, oe.Wait, o.wantWait)
					}
				default:
					done, err := b.Allow()
					if err != nil {
						t.Fatalf("op %d (%s): Allow = %v", i, o.do, err)
					}
					done(map[string]agent.Result{"ok": agent.Success, "fail": agent.Failure, "ignore": agent.Ignored}[o.do])
				}
				if got := b.State(); o.wantState != "" && got.String() != o.wantState {
					t.Errorf("op %d (%s): state %v, want %v", i, o.do, got, o.wantState)
				}
			}
		})
	}
}

func TestBreakerOneProbeAtATime(t *testing.T) {
	t.Parallel()
	b, clk := newBreaker(1, time.Second)
	done, _ := b.Allow()
	done(agent.Failure)
	clk.Advance(time.Second)

	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted []func(agent.Result)
	)
	for range n {
		wg.Go(func() {
			if d, err := b.Allow(); err == nil {
				mu.Lock()
				granted = append(granted, d)
				mu.Unlock()
			} else if !errors.Is(err, agent.ErrOpen) {
				t.Errorf("Allow = %v", err)
			}
		})
	}
	wg.Wait()
	if len(granted) != 1 {
		t.Fatalf("%d probes let through, want 1", len(granted))
	}
	granted[0](agent.Success)
	granted[0](agent.Failure) // a second report of one call is ignored
	if got := b.State(); got != agent.Closed {
		t.Errorf("state %v after a successful probe, want closed", got)
	}
}

func TestBreakerIgnoresResultsFromBeforeATransition(t *testing.T) {
	t.Parallel()
	b, _ := newBreaker(2, time.Second)
	slow, _ := b.Allow()
	for range 2 {
		d, _ := b.Allow()
		d(agent.Failure)
	}
	slow(agent.Success) // started while closed; must not close the open breaker
	if got := b.State(); got != agent.Open {
		t.Errorf("state %v, want open", got)
	}
}

func TestBreakerConcurrentUse(t *testing.T) {
	t.Parallel()
	b, clk := newBreaker(3, time.Millisecond)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				if d, err := b.Allow(); err == nil {
					d(agent.Result((i + j) % 3))
				}
				if j%10 == 0 {
					clk.Advance(time.Millisecond)
				}
				_ = b.State()
			}
		})
	}
	wg.Wait()
}

func TestBreakersOnePerEndpoint(t *testing.T) {
	t.Parallel()
	s := agent.NewBreakers(1, time.Minute, clock.NewFake(t0))
	if first, again := s.For("a"), s.For("a"); first != again {
		t.Errorf("For returned two breakers for one endpoint")
	}
	d, _ := s.For("a").Allow()
	d(agent.Failure)
	if s.For("a").State() != agent.Open || s.For("b").State() != agent.Closed {
		t.Errorf("endpoints share a breaker")
	}
}

func TestBreakerStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[agent.BreakerState]string{agent.Closed: "closed", agent.Open: "open", agent.HalfOpen: "half-open", 9: "BreakerState(9)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}
