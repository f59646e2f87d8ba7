// Package simulation runs every actor of the system in one process under a
// simulated clock and a seeded scheduler, with in-memory models of SQS, the
// state table's stream, SNS and the remote services, and injects faults at
// every port call. The same seed replays the same run, event for event: a
// failure found once is found again, and shrunk.
//
// The actors are the real handlers (shared/...), wired as the stack wires
// them; only their ports end in the models. Each invocation runs as one or
// more coroutines (an Agent's records each on one of its own): goroutines
// that run only while the scheduler waits for them, and hand control back
// at every port call and every sleep. So exactly one goroutine runs at any
// time, and the order of everything is the scheduler's choice, drawn from
// the seed.
package simulation

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// World is one run: the simulated time, the events due, the choices and
// the log.
type World struct {
	now    time.Time
	events eventHeap
	// due are the events due at dueAt (the simulated now), taken off the
	// heap in the order they were scheduled, one of which runs next.
	due    []event
	dueAt  int64
	seq    uint64
	choose Chooser
	log    *Log
	// yield is how the running coroutine hands control back.
	yield chan struct{}
	procs int
	// idle are the goroutines whose coroutine returned, each waiting for
	// the next: their stacks have grown to what the handlers need, which a
	// new goroutine would grow again, copy by copy.
	idle []*runner
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
	// at is the time it is due, in Unix nanoseconds; seq, the order it
	// was scheduled in.
	at  int64
	seq uint64
	fn  func()
}

func (e event) before(o event) bool { return e.at < o.at || e.at == o.at && e.seq < o.seq }

// eventHeap is a binary min-heap of events, written out: a run makes
// millions of pushes and pops, which container/heap's interface calls
// made a tenth of its time.
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !q[i].before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].before(q[l]) {
			m = r
		}
		if !q[m].before(q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
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
	e := event{at: t.UnixNano(), seq: w.seq, fn: fn}
	if len(w.due) > 0 && e.at == w.dueAt {
		// Due with the events already taken off the heap: it joins them,
		// last, as it would have in the heap.
		w.due = append(w.due, e)
		return
	}
	w.events.push(e)
}

// after schedules fn d from now.
func (w *World) after(d time.Duration, fn func()) { w.at(w.now.Add(d), fn) }

// step runs the next event: of those due at the earliest time, the one
// the Chooser picks, so events due at once run in every order across
// seeds. It reports false when nothing is left or the time is past until.
func (w *World) step(until time.Time) bool {
	if len(w.due) == 0 {
		if len(w.events) == 0 || w.events[0].at > until.UnixNano() {
			return false
		}
		first := w.events.pop()
		w.due = append(w.due, first)
		for len(w.events) > 0 && w.events[0].at == first.at {
			w.due = append(w.due, w.events.pop())
		}
		w.dueAt = first.at
		w.now = time.Unix(0, first.at).UTC()
	}
	pick := 0
	if len(w.due) > 1 {
		pick = w.choose.Intn(len(w.due))
	}
	fn := w.due[pick].fn
	w.due = slices.Delete(w.due, pick, pick+1)
	fn()
	return true
}

// run runs events until none is left or the next is past until.
func (w *World) run(until time.Time) {
	for w.step(until) {
	}
}

// invocation is one Lambda invocation. Its coroutines (the handler's, and
// the workers it starts, as an Agent does for the records of a batch) live
// and die together: a kill or the Lambda's timeout ends the invocation at
// once, and each of its coroutines exits when it next wakes.
type invocation struct {
	// dead: the invocation was killed or timed out.
	dead bool
	// ended: its ends have run.
	ended bool
	// live counts its coroutines that have not returned.
	live int
	// parked are its coroutines that wait without an event of their own
	// (a handler waiting for its workers).
	parked []*proc
	// workers counts the workers it started, to name them.
	workers int
	// deadline is when the function's timeout stops it (zero: none);
	// armed says the event that does so is scheduled, which it is only
	// once a coroutine waits past it.
	deadline time.Time
	armed    bool
	// label names it in the log.
	label string
	// then runs once the invocation has ended, killed or not.
	then func(killed bool)
	// ends run then too, in the order they were added.
	ends []func(killed bool)
}

// proc is one coroutine of an invocation: its handler's, or a worker's.
type proc struct {
	w    *World
	inv  *invocation
	name string
	// id is unique in the run; label names the coroutine in the log.
	id    int
	label string
	wake  chan struct{}
	done  bool
	// onDone runs in the scheduler once the coroutine has returned.
	onDone func()
	parked bool
}

// atEnd runs fn once the invocation has ended, killed or not.
func (p *proc) atEnd(fn func(killed bool)) { p.inv.ends = append(p.inv.ends, fn) }

// dead reports whether p's invocation was killed or timed out.
func (p *proc) dead() bool { return p.inv.dead }

type procKey struct{}

// procOf is the coroutine ctx belongs to.
func procOf(ctx context.Context) *proc {
	p, _ := ctx.Value(procKey{}).(*proc)
	return p
}

// spawn starts body as an invocation now; then, if set, runs when it
// ends (killed or not). At timeout, if set, the invocation dies as Lambda
// stops a function that runs past its timeout.
func (w *World) spawn(name string, timeout time.Duration, body func(ctx context.Context), then func(killed bool)) {
	inv := &invocation{then: then}
	if timeout > 0 {
		inv.deadline = w.now.Add(timeout)
	}
	p := w.coroutine(inv, name, "", context.Background(), body, nil)
	inv.label = p.String()
}

// arm schedules inv's timeout if a wait until wake would outlast it: an
// invocation can only live past its timeout through such a wait, so one
// that ends sooner (most do) costs no event.
func (w *World) arm(inv *invocation, wake time.Time) {
	if inv.armed || inv.deadline.IsZero() || !wake.After(inv.deadline) {
		return
	}
	inv.armed = true
	w.at(inv.deadline, func() {
		if !inv.ended {
			w.log.add(w.now, inv.label, "timed out", "")
			w.kill(inv)
		}
	})
}

// coroutine starts body as a coroutine of inv now, with ctx naming it.
func (w *World) coroutine(inv *invocation, name, label string, ctx context.Context, body func(ctx context.Context), onDone func()) *proc {
	w.procs++
	p := &proc{w: w, inv: inv, name: name, id: w.procs, label: label, wake: make(chan struct{}), onDone: onDone}
	inv.live++
	ctx = context.WithValue(ctx, procKey{}, p)
	r := w.runner()
	r.tasks <- task{p: p, ctx: ctx, body: body}
	w.at(w.now, func() { w.resume(p) })
	return p
}

// runner is a goroutine that runs coroutines one after another.
type runner struct{ tasks chan task }

type task struct {
	p    *proc
	ctx  context.Context
	body func(ctx context.Context)
}

// runner returns an idle runner, or a new one.
func (w *World) runner() *runner {
	if n := len(w.idle); n > 0 {
		r := w.idle[n-1]
		w.idle = w.idle[:n-1]
		return r
	}
	r := &runner{tasks: make(chan task, 1)}
	go r.loop(w)
	return r
}

// loop runs each task once the scheduler first resumes it. A coroutine
// that exits (runtime.Goexit: its invocation died) takes its goroutine
// with it; one that returns hands it back idle, before it yields, while it
// still holds the scheduler's turn.
func (r *runner) loop(w *World) {
	for t := range r.tasks {
		p := t.p
		<-p.wake
		returned := false
		func() {
			defer func() {
				p.done = true
				if returned {
					w.idle = append(w.idle, r)
				}
				w.yield <- struct{}{}
			}()
			t.body(t.ctx)
			returned = true
		}()
	}
}

// close ends the idle runners' goroutines once the run is over.
func (w *World) close() {
	for _, r := range w.idle {
		close(r.tasks)
	}
	w.idle = nil
}

// resume runs p until it yields or ends. Called by the scheduler only.
func (w *World) resume(p *proc) {
	p.wake <- struct{}{}
	<-w.yield
	if !p.done {
		return
	}
	inv := p.inv
	inv.live--
	if p.onDone != nil {
		p.onDone()
	}
	switch {
	case inv.dead:
		w.kill(inv)
	case inv.live == 0:
		w.end(inv)
	}
}

// kill ends inv now, as a dead Lambda: its parked coroutines wake to
// exit, the others exit at their next wake.
func (w *World) kill(inv *invocation) {
	inv.dead = true
	for _, p := range inv.parked {
		w.unpark(p)
	}
	w.end(inv)
}

// end runs inv's ends, once.
func (w *World) end(inv *invocation) {
	if inv.ended {
		return
	}
	inv.ended = true
	for _, fn := range inv.ends {
		fn(inv.dead)
	}
	if inv.then != nil {
		inv.then(inv.dead)
	}
	inv.ends, inv.then = nil, nil
}

// suspend hands control back to the scheduler for d of simulated time.
// Called from p's own goroutine; p exits if its invocation died meanwhile.
func (p *proc) suspend(d time.Duration) {
	if p.wait(d) {
		p.exit()
	}
}

// wait is suspend that reports whether p's invocation died meanwhile
// instead of exiting, for a call already sent, which may still land.
func (p *proc) wait(d time.Duration) (died bool) {
	w := p.w
	w.arm(p.inv, w.now.Add(d))
	w.after(d, func() { w.resume(p) })
	w.yield <- struct{}{}
	<-p.wake
	return p.inv.dead
}

// park hands control back until unpark; p exits if its invocation died
// meanwhile.
func (p *proc) park() {
	p.parked = true
	p.inv.parked = append(p.inv.parked, p)
	p.w.yield <- struct{}{}
	<-p.wake
	if p.inv.dead {
		p.exit()
	}
}

// unpark wakes a parked p now.
func (w *World) unpark(p *proc) {
	if !p.parked {
		return
	}
	p.parked = false
	p.inv.parked = slices.DeleteFunc(p.inv.parked, func(q *proc) bool { return q == p })
	w.at(w.now, func() { w.resume(p) })
}

// exit ends the calling coroutine, and its invocation with it: a Lambda
// that dies takes every goroutine of its invocation down.
func (p *proc) exit() {
	p.inv.dead = true
	runtime.Goexit()
}

// workers runs work(ctx, i) for i in [0, n) as coroutines of ctx's
// invocation, at most limit at a time, each started once a slot is free,
// in order, and returns when every one has returned (agent.Workers). They
// die with the invocation. Outside an invocation they run one by one.
func (w *World) workers(ctx context.Context, n, limit int, work func(ctx context.Context, i int)) {
	p := procOf(ctx)
	if p == nil {
		for i := range n {
			work(ctx, i)
		}
		return
	}
	if n == 0 {
		return
	}
	inv := p.inv
	next, running := 0, 0
	var start func()
	start = func() {
		for running < limit && next < n && !inv.dead {
			i := next
			next++
			running++
			inv.workers++
			w.coroutine(inv, p.name, p.String()+"."+strconv.Itoa(inv.workers), ctx, func(ctx context.Context) { work(ctx, i) }, func() {
				running--
				start()
				if running == 0 && (next == n || inv.dead) {
					w.unpark(p)
				}
			})
		}
	}
	start()
	p.park()
}

func (p *proc) String() string {
	if p.label != "" {
		return p.label
	}
	return fmt.Sprintf("%s#%d", p.name, p.id)
}
