package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sasflow/sas/shared/clock"
)

// BreakerState is the state of a circuit breaker.
type BreakerState int

const (
	// Closed lets every call through and counts consecutive failures.
	Closed BreakerState = iota
	// Open fails calls fast until the cooldown ends.
	Open
	// HalfOpen lets one probe through; its result closes or reopens.
	HalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// Result is what a call let through by a Breaker reports back.
type Result int

const (
	// Success: the remote answered (a permanent rejection is an answer too).
	Success Result = iota
	// Failure: a transient failure that counts against the remote.
	Failure
	// Ignored: the call ended for reasons that say nothing about the remote,
	// such as our own deadline; it only frees a half-open probe slot.
	Ignored
)

// ErrOpen is the sentinel of a call refused by an open breaker; test for it
// with errors.Is. It is transient.
var ErrOpen = errors.New("circuit breaker open")

// OpenError is returned by Allow when the breaker refuses a call.
type OpenError struct {
	Endpoint string
	// Wait is how long until the breaker lets a probe through; zero when a
	// probe is already in flight.
	Wait time.Duration
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit breaker for %s open (retry in %v)", e.Endpoint, e.Wait)
}

// Is makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// RetryAfter tells the retry loop to wait for the cooldown's end.
func (e *OpenError) RetryAfter() time.Duration { return e.Wait }

// Breaker is a circuit breaker for one remote endpoint. It is safe for
// concurrent use: a handler runs a batch's records concurrently.
type Breaker struct {
	endpoint  string
	threshold int
	cooldown  time.Duration
	clk       clock.Clock

	mu       sync.Mutex
	state    BreakerState
	failures int
	openedAt time.Time
	probing  bool
	// gen changes at every transition so a result of a call let through
	// before it (a slow call finishing after the breaker opened) is ignored.
	gen uint64
	// notify, when set, hears of every transition, outside the lock.
	notify func(endpoint string, to BreakerState)
	// changed is the transition to notify once the lock is released.
	changed []BreakerState
}

// NewBreaker returns a closed breaker that opens after threshold
// consecutive failures and lets a probe through cooldown after opening.
func NewBreaker(endpoint string, threshold int, cooldown time.Duration, clk clock.Clock) *Breaker {
	return &Breaker{endpoint: endpoint, threshold: max(threshold, 1), cooldown: cooldown, clk: clk}
}

// State returns the current state; an Open breaker whose cooldown ended
// reports HalfOpen.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && !b.clk.Now().Before(b.openedAt.Add(b.cooldown)) {
		return HalfOpen
	}
	return b.state
}

// Allow asks to make one call. On nil error the caller must call done exactly
// once with the call's result. Otherwise the error is an *OpenError.
func (b *Breaker) Allow() (done func(Result), err error) {
	b.mu.Lock()
	defer b.unlock()
	now := b.clk.Now()
	switch b.state {
	case Open:
		reopen := b.openedAt.Add(b.cooldown)
		if now.Before(reopen) {
			return nil, &OpenError{Endpoint: b.endpoint, Wait: reopen.Sub(now)}
		}
		b.transition(HalfOpen)
		fallthrough
	case HalfOpen:
		if b.probing {
			return nil, &OpenError{Endpoint: b.endpoint}
		}
		b.probing = true
	}
	gen := b.gen
	var once sync.Once
	return func(r Result) { once.Do(func() { b.report(gen, r) }) }, nil
}

func (b *Breaker) report(gen uint64, r Result) {
	b.mu.Lock()
	defer b.unlock()
	if gen != b.gen {
		return
	}
	switch b.state {
	case Closed:
		switch r {
		case Success:
			b.failures = 0
		case Failure:
			b.failures++
			if b.failures >= b.threshold {
				b.open()
			}
		}
	case HalfOpen:
		b.probing = false
		switch r {
		case Success:
			b.transition(Closed)
		case Failure:
			b.open()
		}
	}
}

func (b *Breaker) open() {
	b.transition(Open)
	b.openedAt = b.clk.Now()
}

// unlock releases the lock, then tells notify of the transitions made
// under it.
func (b *Breaker) unlock() {
	changed, notify := b.changed, b.notify
	b.changed = nil
	b.mu.Unlock()
	if notify != nil {
		for _, s := range changed {
			notify(b.endpoint, s)
		}
	}
}

// refusal is the error Allow would return for an open breaker still cooling
// down; nil otherwise.
func (b *Breaker) refusal() *OpenError {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clk.Now()
	if reopen := b.openedAt.Add(b.cooldown); b.state == Open && now.Before(reopen) {
		return &OpenError{Endpoint: b.endpoint, Wait: reopen.Sub(now)}
	}
	return nil
}

func (b *Breaker) transition(s BreakerState) {
	if b.notify != nil {
		b.changed = append(b.changed, s)
	}
	b.state = s
	b.failures = 0
	b.probing = false
	b.gen++
}

// Breakers holds one Breaker per endpoint, made on first use with the same
// settings. It is safe for concurrent use.
type Breakers struct {
	threshold int
	cooldown  time.Duration
	clk       clock.Clock

	mu       sync.Mutex
	m        map[string]*Breaker
	onChange func(endpoint string, to BreakerState)
}

// NewBreakers returns an empty set.
func NewBreakers(threshold int, cooldown time.Duration, clk clock.Clock) *Breakers {
	return &Breakers{threshold: threshold, cooldown: cooldown, clk: clk, m: make(map[string]*Breaker)}
}

// For returns the breaker of endpoint.
func (s *Breakers) For(endpoint string) *Breaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[endpoint]
	if !ok {
		b = NewBreaker(endpoint, s.threshold, s.cooldown, s.clk)
		b.notify = s.onChange
		s.m[endpoint] = b
	}
	return b
}

// OnChange makes f hear of every transition of the breakers made from now
// on (the Handler logs the openings and closings).
func (s *Breakers) OnChange(f func(endpoint string, to BreakerState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = f
	for _, b := range s.m {
		b.mu.Lock()
		b.notify = f
		b.mu.Unlock()
	}
}
