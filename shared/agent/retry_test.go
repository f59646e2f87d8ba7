package agent_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/agent"
)

func TestBackoffCeiling(t *testing.T) {
	t.Parallel()
	b := agent.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	tests := []struct {
		n    int
		want time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{2, 400 * time.Millisecond},
		{3, 800 * time.Millisecond},
		{4, time.Second},
		{63, time.Second},
		{1 << 20, time.Second},
	}
	for _, tt := range tests {
		if got := b.Ceiling(tt.n); got != tt.want {
			t.Errorf("Ceiling(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
	huge := agent.Backoff{Base: time.Duration(math.MaxInt64 / 3), Max: time.Duration(math.MaxInt64)}
	for n := range 10 {
		if got := huge.Ceiling(n); got <= 0 {
			t.Errorf("Ceiling(%d) overflowed to %v", n, got)
		}
	}
}

func TestBackoffDelayFullJitterWithinBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rand func() float64
	}{
		{"zero", func() float64 { return 0 }},
		{"almost one", func() float64 { return math.Nextafter(1, 0) }},
		{"one", func() float64 { return 1 }},
		{"above one", func() float64 { return 7 }},
		{"negative", func() float64 { return -1 }},
		{"NaN", func() float64 { return math.NaN() }},
		{"seeded", rand.New(rand.NewPCG(1, 2)).Float64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := agent.Backoff{Base: 50 * time.Millisecond, Max: 3 * time.Second, Rand: tt.rand}
			for n := range 40 {
				for range 50 {
					d := b.Delay(n)
					if d < 0 || d > b.Ceiling(n) || d > b.Max {
						t.Fatalf("Delay(%d) = %v outside [0, %v]", n, d, b.Ceiling(n))
					}
				}
			}
		})
	}
}

func TestBackoffDelayScalesWithRand(t *testing.T) {
	t.Parallel()
	b := agent.Backoff{Base: time.Second, Max: 8 * time.Second, Rand: func() float64 { return 0.5 }}
	if got, want := b.Delay(2), 2*time.Second; got != want {
		t.Errorf("Delay(2) = %v, want %v", got, want)
	}
	if got := (agent.Backoff{Rand: func() float64 { return 0.5 }}).Delay(3); got != 0 {
		t.Errorf("zero backoff Delay = %v, want 0", got)
	}
}

func FuzzBackoffDelay(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), 3, 0.5)
	f.Add(int64(1), int64(math.MaxInt64), 62, 0.999)
	f.Fuzz(func(t *testing.T, base, maxD int64, n int, r float64) {
		if n < 0 || n > 1<<16 {
			return
		}
		b := agent.Backoff{Base: time.Duration(base), Max: time.Duration(maxD), Rand: func() float64 { return r }}
		d := b.Delay(n)
		if d < 0 || (b.Max > 0 && d > b.Max) {
			t.Fatalf("Delay(%d) = %v outside [0, %v]", n, d, b.Max)
		}
	})
}
