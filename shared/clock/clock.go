// Package clock lets the Scheduler, Supervisor and Agents read time through an
// interface so tests can move it deterministically.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	Now() time.Time
}

// System is the wall clock.
type System struct{}

// Now returns time.Now in UTC.
func (System) Now() time.Time { return time.Now().UTC() }

var _ Clock = System{}

// Fake is a manually advanced clock for tests. The zero value is not usable;
// build it with NewFake.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake time forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// Set moves the fake time to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t.UTC()
}

var _ Clock = (*Fake)(nil)

// Offset is the wall clock shifted by an adjustable offset: time flows as
// usual and a test can jump ahead (to expire a deadline) or skew one actor's
// clock against another's.
type Offset struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the wall clock plus the offset.
func (o *Offset) Now() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Now().UTC().Add(o.offset)
}

// Advance jumps the clock forward by d.
func (o *Offset) Advance(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.offset += d
}

var _ Clock = (*Offset)(nil)

// Sleep waits d or until ctx ends, returning ctx's error then. Callers take
// it as an injectable function so tests never really wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
