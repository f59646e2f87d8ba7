package localstack

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/shared/message"
)

// Cause is why a claim of a step (or of its undo) outlived its deadline:
// what made the Supervisor retry it, or the Scheduler refuse its reply as
// stale. A fault the run injected is named by what injected it: a remote
// fault as "remote " and its kind (remotesim.Fault), a chaos fault by its
// point (chaos.Point); the others are the constants below.
type Cause string

// The causes that are not an injected fault of the remote or of chaos.
const (
	// CauseCrash: the Agent invocation the request reached was killed
	// before it started (Options.Crash); the request came back after the
	// visibility timeout, past its deadline.
	CauseCrash Cause = "agent crash"
	// CauseQueue: the request waited in its Agent's queue: no Agent took
	// it before its CompleteBy, or one took it with less than half its
	// Budget left (it had waited past its Wait allowance and half its
	// Budget), too late to ride out a slow or failed try. Whatever the
	// Agent met then is not what made the claim late.
	CauseQueue Cause = "queue wait"
	// CauseReplyQueue: the Agent replied before the deadline, and the
	// reply waited for the Scheduler (in the response queue) past it.
	CauseReplyQueue Cause = "reply queue wait"
	// CauseReplica: a try failed on a replica of the remote at fault
	// (chaos.ReplicaFault).
	CauseReplica Cause = "replica fault"
	// CauseOutage: an engine was cut off during the claim (Options.OutageEvery).
	CauseOutage Cause = "engine outage"
	// CauseAgentLag: nothing else found, and the Agents' clocks run
	// behind (Options.AgentLag): a zombie replied past the deadline.
	CauseAgentLag Cause = "agent clock behind"
	// CauseEarly: it came before the claim's CompleteBy: a Supervisor
	// whose clock runs ahead retried the claim, or a second copy of a
	// reply came after the first was committed.
	CauseEarly Cause = "before its deadline"
	// CauseNone: an Agent took the request in time, met no fault, and
	// still did not reply before the deadline: its tries were slow (a
	// starved machine).
	CauseNone Cause = "no fault found"
)

// remoteCause names a fault of the remote simulator.
func remoteCause(f remotesim.Fault) Cause { return Cause("remote " + f.String()) }

// claimKey names one claim of an order's step or undo: every claim
// increments the record's Attempt, so the order and the Attempt are enough.
type claimKey struct {
	order   string
	attempt int
}

// claimLife is what the stack saw of one claim's request and reply.
type claimLife struct {
	step       string
	undo       bool
	completeBy time.Time
	// budget is the step's Budget in the order's version.
	budget time.Duration
	// deliveries are the Agent invocations the request reached, in order.
	deliveries []delivery
	// replied is when an Agent first sent the claim's reply.
	replied time.Time
}

type delivery struct {
	at      time.Time
	crashed bool
}

// taken is when an Agent invocation that was not killed first took the
// request; zero if none did.
func (l claimLife) taken() time.Time {
	for _, d := range l.deliveries {
		if !d.crashed {
			return d.at
		}
	}
	return time.Time{}
}

// claims records, for every claim whose request reached an Agent, when it
// did and whether the invocation was killed, and when its reply was sent.
// It is safe for concurrent use.
type claims struct {
	mu sync.Mutex
	m  map[claimKey]*claimLife
}

// delivered notes that req, of a step whose Budget is budget, reached an
// Agent invocation at at, killed before it started when crashed.
func (c *claims) delivered(req message.AgentRequest, budget time.Duration, at time.Time, crashed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[claimKey]*claimLife{}
	}
	k := claimKey{req.OrderID, req.Attempt}
	l := c.m[k]
	if l == nil {
		l = &claimLife{step: req.Step, undo: req.Action.Undo(), completeBy: req.CompleteBy, budget: budget}
		c.m[k] = l
	}
	l.deliveries = append(l.deliveries, delivery{at: at, crashed: crashed})
}

// replied notes that an Agent sent a claim's reply at at.
func (c *claims) replied(order string, attempt int, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.m[claimKey{order, attempt}]; l != nil && l.replied.IsZero() {
		l.replied = at
	}
}

// replySender records the replies an Agent sends (claims.replied).
type replySender struct {
	next   wiring.Sender
	claims *claims
}

func (r replySender) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	if err := r.next.Send(ctx, queueURL, body, delay); err != nil {
		return err
	}
	if rep, err := message.DecodeAgentReply(body); err == nil {
		r.claims.replied(rep.OrderID, rep.Attempt, time.Now())
	}
	return nil
}

// snapshot copies what was recorded.
func (c *claims) snapshot() map[claimKey]claimLife {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[claimKey]claimLife, len(c.m))
	for k, l := range c.m {
		cp := *l
		cp.deliveries = slices.Clone(l.deliveries)
		out[k] = cp
	}
	return out
}

// mark is one fault the run injected, as the attribution reads it.
type mark struct {
	cause Cause
	// from and to are when it acted (equal for a moment).
	from, to time.Time
	// order is the order it struck ("" every order: an engine outage);
	// attempt the claim, 0 when not known, and then the claim live at the
	// time (of step, and undo, when step is set) is the one struck.
	order   string
	attempt int
	step    string
	undo    bool
	phase   phase
}

// phase is which part of a claim's life a fault strikes.
type phase int

const (
	// phaseAgent: the Agent's work on the request (a remote's fault, a
	// replica's, an Agent killed before its reply).
	phaseAgent phase = iota
	// phaseRequest: before an Agent can take the request (a killed
	// invocation, a dispatch never sent, a request delayed, an engine cut
	// off), so a request late in its queue is its doing, not the queue's.
	phaseRequest
	// phaseReply: the reply on its way to the Scheduler (a reply delayed
	// or sent twice, a commit throttled or its answer lost).
	phaseReply
)

// claimEvent is a Supervisor retry or a stale reply, as the Tap read it.
type claimEvent struct {
	at      time.Time
	order   string
	step    string
	attempt int
	undo    bool
}

// attribution names the cause of each claimEvent from what the run
// recorded: the claims' requests, and the faults injected.
type attribution struct {
	claims map[claimKey]claimLife
	// marks by order, "" for those of every order; each in time order.
	marks map[string][]mark
	// lease is a step's lease (Wait plus Budget), the longest of its
	// versions': how long before its deadline a claim began.
	lease func(step string) time.Duration
	// agentLag says the Agents' clocks run behind (zombies).
	agentLag bool
}

// newAttribution sorts marks by order and time.
func newAttribution(claims map[claimKey]claimLife, marks []mark, lease func(string) time.Duration, agentLag bool) attribution {
	byOrder := map[string][]mark{}
	for _, m := range marks {
		byOrder[m.order] = append(byOrder[m.order], m)
	}
	for _, ms := range byOrder {
		slices.SortStableFunc(ms, func(a, b mark) int { return a.from.Compare(b.from) })
	}
	return attribution{claims: claims, marks: byOrder, lease: lease, agentLag: agentLag}
}

// cause is why ev's claim outlived its deadline, in this order: it came
// before the deadline (CauseEarly, unless a fault on the claim explains
// it); the first fault, by time, that struck before an Agent could take
// the request (phaseRequest); the Agent's queue (CauseQueue); if the Agent
// replied in time, the first fault on the reply's way (phaseReply), else
// the Scheduler's queue (CauseReplyQueue); the first fault the Agent met
// (phaseAgent); the Agents' lag; none.
func (a attribution) cause(ev claimEvent) Cause {
	life, seen := a.claims[claimKey{ev.order, ev.attempt}]
	end := ev.at
	if seen && !life.completeBy.IsZero() {
		end = life.completeBy
	}
	start := end.Add(-a.lease(ev.step))
	var struck [3][]mark // by phase
	for _, m := range slices.Concat(a.marks[ev.order], a.marks[""]) {
		if !m.from.After(end) && a.about(m, ev, start) {
			struck[m.phase] = append(struck[m.phase], m)
		}
	}
	if seen {
		for _, d := range life.deliveries {
			if d.crashed && d.at.Before(end) {
				struck[phaseRequest] = append(struck[phaseRequest], mark{cause: CauseCrash, from: d.at})
			}
		}
	}
	if seen && ev.at.Before(life.completeBy) {
		if c, ok := first(struck[:]...); ok {
			return c
		}
		return CauseEarly
	}
	if c, ok := first(struck[phaseRequest]); ok {
		return c
	}
	if !seen || life.taken().IsZero() || life.taken().After(end.Add(-life.budget/2)) {
		return CauseQueue
	}
	if !life.replied.IsZero() && life.replied.Before(end) {
		if c, ok := first(struck[phaseReply]); ok {
			return c
		}
		return CauseReplyQueue
	}
	if c, ok := first(struck[phaseAgent]); ok {
		return c
	}
	if a.agentLag {
		return CauseAgentLag
	}
	return CauseNone
}

// first is the cause of the earliest of the marks, if any.
func first(marks ...[]mark) (Cause, bool) {
	all := slices.Concat(marks...)
	if len(all) == 0 {
		return "", false
	}
	return slices.MinFunc(all, func(a, b mark) int { return a.from.Compare(b.from) }).cause, true
}

// about says whether m struck ev's claim, which began at start: by its
// attempt, or by its time (and step) when it names none.
func (a attribution) about(m mark, ev claimEvent, start time.Time) bool {
	if m.attempt != 0 {
		return m.attempt == ev.attempt
	}
	if m.step != "" && (m.step != ev.step || m.undo != ev.undo) {
		return false
	}
	return !m.to.Before(start)
}

// count attributes every event and counts them by cause.
func (a attribution) count(evs []claimEvent) map[Cause]int {
	out := map[Cause]int{}
	for _, ev := range evs {
		out[a.cause(ev)]++
	}
	return out
}

// remoteMarks are the remote simulator's injected faults.
func remoteMarks(in []remotesim.Injection) []mark {
	out := make([]mark, 0, len(in))
	for _, i := range in {
		out = append(out, mark{cause: remoteCause(i.Fault), from: i.At, to: i.At, order: i.OrderID, step: i.Step, undo: i.Undo})
	}
	return out
}

// chaosMarks are chaos's strikes on orders, each in the phase of a claim
// it strikes: a kill that leaves a claim undispatched, a refused dispatch,
// a request delayed or sent twice before an Agent takes it; a reply
// delayed or sent twice, a commit throttled or its answer lost on the
// reply's way; the rest in the Agent's work.
func chaosMarks(strikes []chaos.Strike) []mark {
	out := make([]mark, 0, len(strikes))
	for _, s := range strikes {
		switch {
		case s.Point == chaos.KillAfterPublish:
			continue // an order's events, not its claims
		case s.Message != "" && s.Message != string(message.KindAgentRequest) && s.Message != string(message.KindAgentReply):
			continue // a Deadline or a hand-back, sent or late, ends no claim
		}
		ph := phaseAgent
		switch s.Point {
		case chaos.KillAfterAccept, chaos.KillAfterClaim, chaos.KillAfterCommit, chaos.KillAfterRecover, chaos.FailDispatch:
			ph = phaseRequest
		case chaos.DelaySend, chaos.DuplicateSend:
			ph = phaseReply
			if s.Message == string(message.KindAgentRequest) {
				ph = phaseRequest
			}
		case chaos.ThrottleCommit, chaos.LoseAnswer:
			ph = phaseReply
		}
		out = append(out, mark{cause: Cause(s.Point), from: s.At, to: s.At, order: s.OrderID, attempt: s.Attempt, phase: ph})
	}
	return out
}

// Causes counts the Supervisor's retries and the stale replies by cause.
type Causes struct {
	Retries, StaleReplies map[Cause]int
}

// causeOrder lists causes for a person: most first, then by name.
func causeOrder(m map[Cause]int) []Cause {
	return slices.SortedFunc(maps.Keys(m), func(a, b Cause) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
}
