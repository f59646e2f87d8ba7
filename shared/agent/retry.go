package agent

import (
	"context"
	"time"
)

// Backoff computes retry delays with full jitter: the n-th retry (from 0)
// waits a uniformly random time in [0, min(Max, Base*2^n)]. Full jitter
// spreads the retries of many agents hitting the same struggling remote.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
	// Rand returns a number in [0, 1); injected so tests are deterministic.
	Rand func() float64
}

// Ceiling is the upper bound of the n-th delay: min(Max, Base*2^n).
func (b Backoff) Ceiling(n int) time.Duration {
	if b.Base <= 0 || b.Max <= 0 {
		return 0
	}
	d := b.Base
	for i := 0; i < n; i++ {
		// Doubling past Max (or overflowing) ends the growth.
		if d >= b.Max || d > b.Max/2 {
			return b.Max
		}
		d *= 2
	}
	return min(d, b.Max)
}

// Delay is the n-th retry's delay.
func (b Backoff) Delay(n int) time.Duration {
	ceil := b.Ceiling(n)
	if ceil <= 0 {
		return 0
	}
	f := b.Rand()
	// A misbehaving source must not push the delay outside [0, ceil].
	switch {
	case f != f || f < 0: // NaN or negative
		f = 0
	case f > 1:
		f = 1
	}
	// float64(ceil) may round up past ceil (and past MaxInt64), so clamp
	// before converting back.
	x := f * float64(ceil)
	if x >= float64(ceil) {
		return ceil
	}
	return time.Duration(x)
}

// SleepFunc waits d or until ctx ends, returning ctx's error then.
type SleepFunc func(ctx context.Context, d time.Duration) error
