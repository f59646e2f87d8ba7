// Package chaos injects faults into the real handlers at the points where a
// serverless system breaks: a Lambda invocation killed between two of its
// writes, SQS delivering a message twice or late. It wraps what internal/localstack/wiring
// gives each handler (the state store and the queue sender), so the handlers
// run unchanged.
//
// Every decision is a hash of the seed, the fault point, what is being done
// (order, step, attempt, message) and how often that was done before, not a
// draw from a shared random stream: the same seed injects the same faults into
// the same operations however the goroutines interleave, so a failing seed
// can be replayed.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/localstack/draw"
	"github.com/sasflow/sas/internal/localstack/lossy"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/shared/codestep"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/workflow"
)

// Point is where a fault strikes.
type Point string

const (
	// KillAfterAccept: Submission wrote the order with its first step
	// claimed, then died before dispatching it (the client sees a 500 and
	// retries; the Supervisor retries the step after its CompleteBy).
	KillAfterAccept Point = "kill-after-accept"
	// KillAfterClaim: a Scheduler claimed a step, then died before
	// dispatching it.
	KillAfterClaim Point = "kill-after-claim"
	// KillAfterCommit: a Scheduler committed a reply (and claimed the next
	// step), then died before dispatching the next step.
	KillAfterCommit Point = "kill-after-commit"
	// KillBeforeReply: an Agent's remote effect happened, then it died
	// before replying.
	KillBeforeReply Point = "kill-before-reply"
	// KillAfterRecover: a Supervisor reset a record, then died before
	// re-sending its step.
	KillAfterRecover Point = "kill-after-recover"
	// DuplicateSend: SQS delivers a message twice.
	DuplicateSend Point = "duplicate-send"
	// DelaySend: a message arrives up to three seconds late, behind later
	// ones.
	DelaySend Point = "delay-send"
	// KillAfterPublish: the order-event Notifier published the events of
	// its stream batch, then died before the batch was done; the batch comes
	// again, its events published twice. Each event is struck at most once.
	KillAfterPublish Point = "kill-after-publish"
	// FailDispatch: the Scheduler's sends of one step's (or one undo's)
	// request to its agent's queue fail, as under a revoked permission or
	// key: for one, two, or every try (a queue that stays broken).
	FailDispatch Point = "fail-dispatch"
	// ThrottleCommit: the Scheduler's commit of a reply fails as a throttled
	// DynamoDB write does once the SDK's retries are spent.
	ThrottleCommit Point = "throttle-commit"
	// LoseAnswer: a state write commits, but its answer is lost on the way
	// back (a reset connection); the SDK retries it.
	LoseAnswer Point = "lose-answer"
	// ReplicaFault: one replica of a step's remote service goes down
	// (answering 503, or refusing connections) or slow (every call delayed
	// past the Agent's timeout) for a period of the run, the others
	// healthy. The Agents route around it: the orders complete as without
	// it, with no step left to the Supervisor. Its rate is the share of
	// periods with such a fault (ReplicaOutage).
	ReplicaFault Point = "replica-fault"
	// CrashAfterEffect: a code step's effect happened, then its Lambda died
	// before the ledger recorded it; the next try runs the step again once
	// the ledger's lease ends (the window docs/architecture.md names).
	CrashAfterEffect Point = "crash-after-effect"
	// CrashAfterLedger: a code step's ledger recorded its output, then its
	// Lambda died before replying; the next try replays the output.
	CrashAfterLedger Point = "crash-after-ledger"
)

// Points lists every Point.
func Points() []Point {
	return []Point{KillAfterAccept, KillAfterClaim, KillAfterCommit, KillBeforeReply, KillAfterRecover, DuplicateSend, DelaySend, KillAfterPublish,
		FailDispatch, ThrottleCommit, LoseAnswer, ReplicaFault, CrashAfterEffect, CrashAfterLedger}
}

// Killed is what a killed invocation panics with. Lambda's runtime reports
// an invocation that dies as failed: its SQS batch comes back after the
// visibility timeout, its API request gets a 500.
type Killed struct{ Point Point }

func (k Killed) String() string { return "chaos: invocation killed at " + string(k.Point) }

// Injector decides and counts the faults of one run.
type Injector struct {
	seed  uint64
	rates map[Point]float64

	mu     sync.Mutex
	tries  map[string]int // how often each (point, operation) was decided
	counts map[Point]int
	// bursts holds, for each dispatch FailDispatch struck, how many of its
	// sends still fail.
	bursts map[string]int
	// strikes records every strike on an order (Strikes).
	strikes []Strike

	ledger Ledger
}

// New returns an Injector striking each point at its rate (0..1).
func New(seed uint64, rates map[Point]float64) (*Injector, error) {
	for p, r := range rates {
		if r < 0 || r > 0.5 || math.IsNaN(r) {
			return nil, fmt.Errorf("chaos: rate of %s is %v, must be within 0..0.5", p, r)
		}
	}
	return &Injector{seed: seed, rates: maps.Clone(rates), tries: map[string]int{}, counts: map[Point]int{}, bursts: map[string]int{}}, nil
}

// Strike is one fault struck on an order: where, when, and what it struck,
// so a run can tell which of its Supervisor retries and stale replies a
// fault caused (localstack's attribution).
type Strike struct {
	At    time.Time
	Point Point
	// OrderID is the order struck; Attempt the claim of its step struck,
	// 0 when the operation names none (a lost answer, a code step's try,
	// a published event), and then the time tells which it was.
	OrderID string
	Attempt int
	// Message is the kind of message struck (message.KindAgentRequest,
	// ...), when a message was.
	Message string
}

// on is what an operation is about, as a Strike records it.
type on struct {
	order   string
	attempt int
	message string
}

// Strikes returns every strike on an order so far, in the order struck.
// A replica fault strikes a replica, not an order, and is not among them.
func (in *Injector) Strikes() []Strike {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.strikes)
}

// hit decides whether p strikes the operation op, which is about what. The
// n-th decision for the same (p, op) hashes n in, so a redelivered message
// is not killed forever.
func (in *Injector) hit(p Point, op string, what on) bool { return in.strike(p, op, what, false) }

// hitFirst is hit where only the first decision for (p, op) may strike.
func (in *Injector) hitFirst(p Point, op string, what on) bool { return in.strike(p, op, what, true) }

func (in *Injector) strike(p Point, op string, what on, firstOnly bool) bool {
	rate := in.rates[p]
	if rate == 0 {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	k := string(p) + "|" + op
	n := in.tries[k]
	in.tries[k] = n + 1
	if (firstOnly && n > 0) || draw.Unit(in.seed, k, uint64(n)) >= rate {
		return false
	}
	in.counts[p]++
	if what.order != "" {
		in.strikes = append(in.strikes, Strike{At: time.Now(), Point: p, OrderID: what.order, Attempt: what.attempt, Message: what.message})
	}
	return true
}

// ReplicaOutage is one period's fault of one replica (ReplicaFault).
type ReplicaOutage struct {
	// Replica is the index of the replica struck.
	Replica int
	Fault   remotesim.ReplicaFault
}

// ReplicaOutage decides whether ReplicaFault strikes the n-th period of a
// run whose remote has replicas endpoints serving steps, and how: which
// replica, for which step, down (503 or refusing) or slower than slow.
func (in *Injector) ReplicaOutage(n int, steps []string, replicas int, slow time.Duration) (ReplicaOutage, bool) {
	op := "period-" + strconv.Itoa(n)
	if replicas < 2 || len(steps) == 0 || !in.hit(ReplicaFault, op, on{}) {
		return ReplicaOutage{}, false
	}
	pick := func(what string, n int) int {
		return min(int(draw.Unit(in.seed, string(ReplicaFault)+"|"+op+"|"+what, 0)*float64(n)), n-1)
	}
	o := ReplicaOutage{Replica: pick("replica", replicas)}
	o.Fault.Step = steps[pick("step", len(steps))]
	switch pick("kind", 3) {
	case 0:
		o.Fault.Down = true
	case 1:
		// A replica refusing connections refuses every step's.
		o.Fault.Refuse, o.Fault.Step = true, ""
	default:
		o.Fault.Slow = slow
	}
	return o, true
}

// Counts returns how often each point struck.
func (in *Injector) Counts() map[Point]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.counts)
}

// CountsString renders Counts in Points order.
func (in *Injector) CountsString() string {
	c := in.Counts()
	s := ""
	for _, p := range Points() {
		if s != "" {
			s += " · "
		}
		s += fmt.Sprintf("%s %d", p, c[p])
	}
	return s
}

// Ledger returns the record of claims and commits the store wrappers saw.
func (in *Injector) Ledger() *Ledger { return &in.ledger }

// Store wraps the state store given to role.
func (in *Injector) Store(role string, s wiring.Store) wiring.Store {
	return &store{Store: s, in: in, role: role}
}

// Sender wraps the queue sender given to role.
func (in *Injector) Sender(role string, s wiring.Sender) wiring.Sender {
	return &sender{next: s, in: in, role: role}
}

// Events wraps what the Notifier publishes with: KillAfterPublish is
// decided for each event a batch published, in order, and kills the
// invocation at the first it strikes.
func (in *Injector) Events(s notifier.Sender) notifier.Sender { return &publisher{next: s, in: in} }

type publisher struct {
	next notifier.Sender
	in   *Injector
}

// PublishBatch strikes an event on its first publication only: a kill makes
// the Notifier publish its whole batch again, and deciding anew for every
// event already through would strike a batch of a hundred events nearly
// every time (1 - 0.95^100 at 5%), so a busy shard would barely move.
func (p *publisher) PublishBatch(ctx context.Context, evs []notifier.Event) (int, error) {
	n, err := p.next.PublishBatch(ctx, evs)
	for _, ev := range evs[:n] {
		if p.in.hitFirst(KillAfterPublish, ev.OrderID+"/"+strconv.Itoa(ev.Seq), on{order: ev.OrderID}) {
			panic(Killed{KillAfterPublish})
		}
	}
	return n, err
}

type store struct {
	wiring.Store
	in   *Injector
	role string
}

func opKey(orderID string, stepIndex, attempt int) string {
	return orderID + "/" + strconv.Itoa(stepIndex) + "/" + strconv.Itoa(attempt)
}

func (s *store) CreateOrder(ctx context.Context, o workflow.Order, st workflow.State) error {
	if err := s.Store.CreateOrder(ctx, o, st); err != nil {
		return err
	}
	if st.Attempt > 0 {
		// The first step comes claimed (workflow.Machine.Accept).
		s.in.ledger.claimed(st.OrderID, st.StepIndex, st.Attempt)
	}
	if s.in.hit(KillAfterAccept, o.OrderID, on{order: o.OrderID, attempt: st.Attempt}) {
		panic(Killed{KillAfterAccept})
	}
	return nil
}

// ErrThrottled is what a ThrottleCommit strike returns, as the store would
// after the SDK's retries of a throttled write.
var ErrThrottled = &types.ProvisionedThroughputExceededException{Message: aws.String("chaos: the request rate exceeds the table's throughput")}

// Apply carries out a change, with the faults of the point it is at: a
// Scheduler's commit of a reply may be throttled before it reaches the
// store; after a write, the invocation may die (after a claim, after a
// commit that claimed what comes next, after a recovery), and the ledger
// records the claims and commits the store confirmed.
func (s *store) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	op := changeOp(c)
	if c.CommitsReply() && s.role == "scheduler" && s.in.hit(ThrottleCommit, op, on{order: c.OrderID, attempt: *c.Fence.Attempt}) {
		return workflow.State{}, fmt.Errorf("commit %s: %w", op, ErrThrottled)
	}
	st, err := s.Store.Apply(ctx, c)
	if err != nil {
		return st, err
	}
	if c.CommitsReply() {
		s.in.ledger.committed(c.OrderID, *c.Fence.StepIndex, *c.Fence.Attempt)
	}
	if c.Dispatch {
		s.in.ledger.claimed(st.OrderID, st.StepIndex, st.Attempt)
	}
	// The claim the write leaves: what a kill now leaves undispatched.
	claim := on{order: st.OrderID, attempt: st.Attempt}
	switch {
	case c.Transition == workflow.TransitionClaimed:
		if s.in.hit(KillAfterClaim, opKey(st.OrderID, st.StepIndex, st.Attempt), claim) {
			panic(Killed{KillAfterClaim})
		}
	case c.CommitsReply() && c.Alert == "":
		// Committed, and what comes next claimed and not yet dispatched.
		if s.in.hit(KillAfterCommit, op, claim) {
			panic(Killed{KillAfterCommit})
		}
	case !c.Fence.CompleteBy.IsZero():
		if s.in.hit(KillAfterRecover, op, claim) {
			panic(Killed{KillAfterRecover})
		}
	}
	return st, nil
}

// changeOp names a change by what it is about: the order, the step and
// attempt its fence names, and its transition.
func changeOp(c workflow.Change) string {
	step, attempt := -1, -1
	if c.Fence.StepIndex != nil {
		step = *c.Fence.StepIndex
	}
	if c.Fence.Attempt != nil {
		attempt = *c.Fence.Attempt
	}
	return opKey(c.OrderID, step, attempt) + "/" + string(c.Transition)
}

type sender struct {
	next wiring.Sender
	in   *Injector
	role string
}

// late is how much later a DelaySend strike makes the message op, about
// what, arrive: 1–3 s, the same for every send of op; 0 when it does not
// strike.
func (in *Injector) late(op string, what on) time.Duration {
	if !in.hit(DelaySend, op, what) {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(op))
	return time.Duration(1+h.Sum64()%3) * time.Second
}

// Deadlines wraps what the Timer sends Deadlines with: DuplicateSend sends
// a struck Deadline twice, DelaySend holds it 1–3 s longer, each decided
// per Deadline; the fast path must recover a record once whatever comes.
func (in *Injector) Deadlines(s timer.Sender) timer.Sender { return &deadlines{next: s, in: in} }

type deadlines struct {
	next timer.Sender
	in   *Injector
}

func (d *deadlines) SendBatch(ctx context.Context, queueURL string, msgs []queue.Outgoing) error {
	out := make([]queue.Outgoing, 0, len(msgs))
	var dups []queue.Outgoing
	for _, m := range msgs {
		op, what := MessageOp(queueURL, m.Body), messageOn(m.Body)
		m.Delay += d.in.late(op, what)
		out = append(out, m)
		if d.in.hit(DuplicateSend, op, what) {
			dups = append(dups, queue.Outgoing{Body: m.Body})
		}
	}
	if err := d.next.SendBatch(ctx, queueURL, out); err != nil {
		return err
	}
	if len(dups) > 0 {
		// A duplicate at once, before the Deadline is due: the fast path
		// must find it early and bring it back, not act on it.
		return d.next.SendBatch(ctx, queueURL, dups)
	}
	return nil
}

// messageOn is what a message is about: its kind, order and attempt.
func messageOn(body string) on {
	var m struct {
		Kind    string `json:"kind"`
		OrderID string `json:"orderId"`
		Attempt int    `json:"attempt"`
	}
	if json.Unmarshal([]byte(body), &m) != nil {
		return on{}
	}
	return on{order: m.OrderID, attempt: m.Attempt, message: m.Kind}
}

// MessageOp names a message by what it is, not by its bytes, which carry
// timestamps: kind, order, step, attempt, reason and outcome are the same
// in a replay.
func MessageOp(queueURL, body string) string {
	var m struct {
		Kind      string `json:"kind"`
		OrderID   string `json:"orderId"`
		StepIndex int    `json:"stepIndex"`
		Attempt   int    `json:"attempt"`
		Reason    string `json:"reason"`
		Outcome   string `json:"outcome"`
	}
	if json.Unmarshal([]byte(body), &m) != nil || m.OrderID == "" {
		h := fnv.New64a()
		h.Write([]byte(queueURL + "\x00" + body))
		return strconv.FormatUint(h.Sum64(), 36)
	}
	return fmt.Sprintf("%s/%s/%d/%d/%s/%s", m.Kind, m.OrderID, m.StepIndex, m.Attempt, m.Reason, m.Outcome)
}

// ErrDispatchRefused is what a FailDispatch strike returns.
var ErrDispatchRefused = errors.New("chaos: AccessDenied: the Scheduler may not send to this queue")

// refused decides whether the Scheduler's send of an agent request fails:
// the first send of a step's (or undo's) request decides whether the queue
// refuses it, and for how many sends: one, two, or all (burstForever).
func (s *sender) refused(body string) bool {
	if s.role != "scheduler" {
		return false
	}
	var m struct {
		Kind, OrderID, Action string
		StepIndex, Attempt    int
	}
	if json.Unmarshal([]byte(body), &m) != nil || m.Kind != "agent.request" {
		return false
	}
	op := fmt.Sprintf("%s/%d/%s", m.OrderID, m.StepIndex, m.Action)
	in := s.in
	in.mu.Lock()
	left, decided := in.bursts[op]
	in.mu.Unlock()
	if !decided {
		left = 0
		if in.hit(FailDispatch, op, on{order: m.OrderID, attempt: m.Attempt, message: m.Kind}) {
			left = []int{1, 2, burstForever}[int(draw.Unit(in.seed, "burst|"+op, 0)*3)]
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if left > 0 {
		in.bursts[op] = left - 1
		return true
	}
	in.bursts[op] = 0
	return false
}

// burstForever is a refusal that outlasts any number of tries.
const burstForever = 1 << 30

func (s *sender) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	if s.refused(body) {
		return ErrDispatchRefused
	}
	op, what := MessageOp(queueURL, body), messageOn(body)
	if s.role == "agent" && s.in.hit(KillBeforeReply, op, what) {
		panic(Killed{KillBeforeReply})
	}
	delay += s.in.late(op, what)
	if err := s.next.Send(ctx, queueURL, body, delay); err != nil {
		return err
	}
	if s.in.hit(DuplicateSend, op, what) {
		return s.next.Send(ctx, queueURL, body, 0)
	}
	return nil
}

// Transport wraps the HTTP transport of the handlers' DynamoDB client: a
// state write (UpdateItem) struck by LoseAnswer commits, and its answer is
// lost. Each write to an order is a new decision, keyed by the order and how
// often it was written before.
func (in *Injector) Transport(next http.RoundTripper) http.RoundTripper {
	return &lossy.Transport{Next: next, Lose: func(target string, body []byte) bool {
		if target != "DynamoDB_20120810.UpdateItem" {
			return false
		}
		var req struct {
			Key struct {
				OrderID struct{ S string }
			}
		}
		if json.Unmarshal(body, &req) != nil || req.Key.OrderID.S == "" {
			return false
		}
		return in.hit(LoseAnswer, req.Key.OrderID.S, on{order: req.Key.OrderID.S})
	}}
}

// CodeFaults are the crashes of code steps' tries (codestep.WithFaults):
// CrashAfterEffect and CrashAfterLedger, each decided per idempotency key
// and try.
func (in *Injector) CodeFaults() codestep.Faults {
	return codestep.Faults{
		AfterEffect: func(key string) bool { return in.hit(CrashAfterEffect, key, keyOn(key)) },
		AfterLedger: func(key string) bool { return in.hit(CrashAfterLedger, key, keyOn(key)) },
	}
}

// keyOn is the order of an idempotency key (workflow.IdempotencyKey): a
// code step's try names no attempt.
func keyOn(key string) on {
	order, _, _ := strings.Cut(key, "/")
	return on{order: order}
}

// Ledger records, in the order the store confirmed them, every claim and
// every commit (a reply's Advance or Fail), to check fencing afterwards.
type Ledger struct {
	mu     sync.Mutex
	seq    atomic.Int64
	events []ledgerEvent
}

type ledgerEvent struct {
	seq                int64
	commit             bool
	order              string
	stepIndex, attempt int
}

func (l *Ledger) claimed(order string, step, attempt int) { l.add(false, order, step, attempt) }

func (l *Ledger) committed(order string, step, attempt int) { l.add(true, order, step, attempt) }

func (l *Ledger) add(commit bool, order string, step, attempt int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ledgerEvent{seq: l.seq.Add(1), commit: commit, order: order, stepIndex: step, attempt: attempt})
}

// StaleCommits lists commits of an attempt older than a claim of the same
// order that the store had already confirmed: a reply from a superseded
// attempt that got through. The store's fencing must keep it empty.
func (l *Ledger) StaleCommits() []string {
	l.mu.Lock()
	events := append([]ledgerEvent(nil), l.events...)
	l.mu.Unlock()
	sort.Slice(events, func(i, j int) bool { return events[i].seq < events[j].seq })
	latest := map[string]int{}
	var stale []string
	for _, e := range events {
		if !e.commit {
			latest[e.order] = max(latest[e.order], e.attempt)
			continue
		}
		if e.attempt < latest[e.order] {
			stale = append(stale, fmt.Sprintf("%s step %d attempt %d (attempt %d already claimed)", e.order, e.stepIndex, e.attempt, latest[e.order]))
		}
	}
	return stale
}

// Commits counts the commits recorded.
func (l *Ledger) Commits() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.commit {
			n++
		}
	}
	return n
}
