// Package simulation runs every actor of the system in one process under a
// simulated clock and a seeded scheduler, with in-memory models of SQS, the
// state table's stream, SNS and the remote services, and injects faults at
// every port call. The same seed replays the same run, event for event: a
// failure found once is found again, and shrunk.
//
// The actors are the real handlers (shared/...), wired as the stack wires
// them; only their ports end in the models. Each invocation runs as a
// coroutine: a goroutine that runs only while the scheduler waits for it,
// and hands control back at every port call and every sleep. So exactly one
// goroutine runs at any time, and the order of everything is the
// scheduler's choice, drawn from the seed.
package simulation

import (
	"container/heap"
	"context"
	"fmt"
	"runtime"
	"time"
)

// World is one run: the simulated time, the events due, the choices and
// the log.
type World struct {
	now    time.Time
	events eventHeap
	seq    uint64
	choose Chooser
	log    *Log
	// yield is how the running coroutine hands control back.
	yield chan struct{}
	procs int
	// exhaustive: every choice that matters is made by the Chooser, and
	// the others take a fixed value (see delay).
	exhaustive bool
}

// Chooser makes every choice of a run: which of several events due at once
// runs first, how long a call takes, whether a fault strikes.
type Chooser interface {
	// Intn returns a number in [0, n).
	Intn(n int) int
	// Chance reports true with probability p (0..1).
	Chance(p float64) bool
	// Float returns a number in [0, 1).
	Float() float64
}

type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// delay draws a time in [lo, hi] at millisecond steps: when a poller
// wakes, a client retries, a deploy reaches a function. The exhaustive
// search takes lo, so its choices are the orders of events, not times.
func (w *World) delay(lo, hi time.Duration) time.Duration {
	if w.exhaustive || hi <= lo {
		return lo
	}
	return lo + time.Duration(w.choose.Intn(int((hi-lo)/time.Millisecond)+1))*time.Millisecond
}

// either picks one of n alike things (a warm container): any will do, so
// the exhaustive search takes the first.
func (w *World) either(n int) int {
	if w.exhaustive {
		return 0
	}
	return w.choose.Intn(n)
}

// float is a jitter in [0, 1); the exhaustive search takes the middle.
func (w *World) float() float64 {
	if w.exhaustive {
		return 0.5
	}
	return w.choose.Float()
}

// newWorld starts a world at start.
func newWorld(start time.Time, c Chooser, log *Log) *World {
	return &World{now: start, choose: c, log: log, yield: make(chan struct{})}
}

// Now is the simulated time.
func (w *World) Now() time.Time { return w.now }

// at schedules fn at t (never before now).
func (w *World) at(t time.Time, fn func()) {
	if t.Before(w.now) {
		t = w.now
	}
	w.seq++
	heap.Push(&w.events, event{at: t, seq: w.seq, fn: fn})
}

// after schedules fn d from now.
func (w *World) after(d time.Duration, fn func()) { w.at(w.now.Add(d), fn) }

// step runs the next event: of those due at the earliest time, the one
// the Chooser picks, so events due at once run in every order across
// seeds. It reports false when nothing is left or the time is past until.
func (w *World) step(until time.Time) bool {
	if len(w.events) == 0 || w.events[0].at.After(until) {
		return false
	}
	first := heap.Pop(&w.events).(event)
	due := []event{first}
	for len(w.events) > 0 && w.events[0].at.Equal(first.at) {
		due = append(due, heap.Pop(&w.events).(event))
	}
	pick := 0
	if len(due) > 1 {
		pick = w.choose.Intn(len(due))
	}
	for i, e := range due {
		if i != pick {
			heap.Push(&w.events, e)
		}
	}
	w.now = first.at
	due[pick].fn()
	return true
}

// run runs events until none is left or the next is past until.
func (w *World) run(until time.Time) {
	for w.step(until) {
	}
}

// proc is one invocation of a handler, run as a coroutine.
type proc struct {
	w    *World
	name string
	id   int
	wake chan struct{}
	// dead: the invocation was killed; its goroutines end at their next
	// port call.
	dead bool
	done bool
	// started is when it began, for the Lambda's timeout.
	started time.Time
	timeout time.Duration
	// then runs once the invocation has ended, killed or not.
	then func(killed bool)
	// ends run then too, in the order they were added.
	ends []func(killed bool)
}

// atEnd runs fn once the invocation has ended, killed or not.
func (p *proc) atEnd(fn func(killed bool)) { p.ends = append(p.ends, fn) }

type procKey struct{}

// procOf is the invocation ctx belongs to.
func procOf(ctx context.Context) *proc {
	p, _ := ctx.Value(procKey{}).(*proc)
	return p
}

// spawn starts body as an invocation now; then, if set, runs when it
// ends (killed or not).
func (w *World) spawn(name string, timeout time.Duration, body func(ctx context.Context), then func(killed bool)) {
	w.procs++
	p := &proc{w: w, name: name, id: w.procs, wake: make(chan struct{}), started: w.now, timeout: timeout, then: then}
	ctx := context.WithValue(context.Background(), procKey{}, p)
	go func() {
		<-p.wake
		defer func() {
			p.done = true
			w.yield <- struct{}{}
		}()
		body(ctx)
	}()
	w.at(w.now, func() { w.resume(p) })
}

// resume runs p until it yields or ends. Called by the scheduler only.
func (w *World) resume(p *proc) {
	p.wake <- struct{}{}
	<-w.yield
	if p.done {
		for _, fn := range p.ends {
			fn(p.dead)
		}
		if p.then != nil {
			p.then(p.dead)
		}
		p.ends, p.then = nil, nil
	}
}

// suspend hands control back to the scheduler for d of simulated time.
// Called from p's own goroutine.
func (p *proc) suspend(d time.Duration) {
	w := p.w
	w.after(d, func() { w.resume(p) })
	w.yield <- struct{}{}
	<-p.wake
	if p.dead || p.expired() {
		p.exit()
	}
}

// exit ends the calling goroutine of a killed invocation.
func (p *proc) exit() {
	p.dead = true
	runtime.Goexit()
}

// expired reports whether the invocation ran past its Lambda timeout.
func (p *proc) expired() bool {
	return p.timeout > 0 && p.w.now.Sub(p.started) > p.timeout
}

func (p *proc) String() string { return fmt.Sprintf("%s#%d", p.name, p.id) }
