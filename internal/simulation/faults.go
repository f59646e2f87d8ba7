package simulation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sasflow/sas/internal/localstack/draw"
)

// Fault is a kind of fault the simulator injects.
type Fault string

// The faults. Each seed draws its own mix of them (swarm testing): some
// kinds off, the others at rates of their own, so rare combinations get
// their turn.
const (
	// KillBefore: the Lambda dies at a port call, before the call.
	KillBefore Fault = "kill-before"
	// KillAfter: the Lambda dies right after a write took effect.
	KillAfter Fault = "kill-after"
	// Throttle: a call fails without taking effect (a throttle, a 5xx, a
	// refused send).
	Throttle Fault = "throttle"
	// LoseAnswer: a write takes effect and its answer is lost; the caller
	// gets an error.
	LoseAnswer Fault = "lose-answer"
	// Slow: a call takes seconds instead of milliseconds.
	Slow Fault = "slow"
	// Copy: SQS hands out a copy of a message another consumer holds.
	Copy Fault = "copy"
	// StaleRead: an eventually consistent read returns the item as it was
	// before its latest write (within a second of it).
	StaleRead Fault = "stale-read"
	// MissedRun: a scheduled Supervisor run does not happen.
	MissedRun Fault = "missed-run"
	// Skew: each actor instance's clock is off by up to a few seconds.
	Skew Fault = "skew"
	// Remote: the remote services answer with faults (503, 422, hangs,
	// applied then failed or hung, applied later, garbage, oversize).
	Remote Fault = "remote"
	// Operator: operators retry and cancel orders at random times.
	Operator Fault = "operator"
	// Deploy: a deploy makes a new workflow version current while orders
	// are in flight, one function after the other, the Submission last.
	Deploy Fault = "deploy"
	// Duplicate: clients post an order again with its Idempotency-Key.
	Duplicate Fault = "duplicate"
	// Burst: clients post at 100 times the usual rate (2,000 orders a
	// second), past what the Agents take with their deployed concurrency,
	// so their queues fill past the backlog and the Submission sheds.
	Burst Fault = "burst"
	// Replica: one replica of the remote services is down for a while
	// (its calls refused, or answered 503 without reaching the shared
	// state) or slow (its calls hang past the Agent's timeout); the other
	// answers, and the Agents route around it.
	Replica Fault = "replica"
	// CrashAfterEffect: a try of a code step dies after the step (or its
	// undo) ran and before the ledger recorded it (codestep.Faults); the
	// message comes back after its visibility timeout.
	CrashAfterEffect Fault = "crash-after-effect"
	// CrashAfterLedger: a try of a code step dies after the ledger recorded
	// its outcome and before the reply; the next delivery replays it.
	CrashAfterLedger Fault = "crash-after-ledger"
	// Hold: a share of the orders are under a legal hold, whose undos
	// (remote or code) are refused for good until the hold is lifted.
	Hold Fault = "hold"
	// Fix: a day and a half after the faults stop (past the retention,
	// which such a run sets to its shortest, a day), the operators lift
	// every hold and retry, twice an hour apart, every order that waits for
	// one; the run ends when those are terminal again.
	Fix Fault = "fix"
	// RefuseAfterEffect: a share of the orders ship with a conditional put,
	// so a try of ship-order that finds the shipment there already refuses
	// for good ("already shipped") instead of writing it again.
	RefuseAfterEffect Fault = "refuse-after-effect"
	// Forge: a compromised Agent (any principal allowed to send to the
	// response queue) sends replies naming other steps of other orders.
	Forge Fault = "forge"
	// PartialBatch: a batch request succeeds and some of its entries fail,
	// each at this rate: SNS PublishBatch and SQS SendMessageBatch list
	// them in Failed (a server-side error), and an event source mapping's
	// delete of a handled message fails, so the message comes back when its
	// visibility timeout ends.
	PartialBatch Fault = "partial-batch"
	// LateRun: a scheduled Supervisor run is delivered late, up to a few
	// minutes after its minute (EventBridge's retries, Lambda's
	// asynchronous queue).
	LateRun Fault = "late-run"
	// DoubleRun: a scheduled Supervisor run is delivered twice, the second
	// within a second (half the time) or up to two minutes later.
	DoubleRun Fault = "double-run"
	// Unprocessed: BatchGetItem leaves a key unprocessed, as DynamoDB does
	// when a read is throttled; the store asks for it again.
	Unprocessed Fault = "unprocessed"
)

// AllFaults lists every Fault.
func AllFaults() []Fault {
	return []Fault{KillBefore, KillAfter, Throttle, LoseAnswer, Slow, Copy, StaleRead, MissedRun, Skew, Remote, Operator, Deploy, Duplicate, Burst, Replica, CrashAfterEffect, CrashAfterLedger,
		Hold, Fix, RefuseAfterEffect, Forge, PartialBatch, LateRun, DoubleRun, Unprocessed}
}

// Mix is a run's faults: the rate of each kind that is on.
type Mix map[Fault]float64

// String lists the kinds on, with their rates, in a stable order.
func (m Mix) String() string {
	var parts []string
	for _, f := range AllFaults() {
		if r, ok := m[f]; ok && r > 0 {
			parts = append(parts, fmt.Sprintf("%s=%g", f, r))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// ParseMix reads a Mix as String writes it.
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	if s == "none" || s == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, rate, ok := strings.Cut(part, "=")
		var r float64
		if _, err := fmt.Sscanf(rate, "%g", &r); !ok || err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("fault %q: want name=rate with rate in 0..1", part)
		}
		if !slices.Contains(AllFaults(), Fault(name)) {
			return nil, fmt.Errorf("fault %q: unknown kind (known: %v)", name, AllFaults())
		}
		m[Fault(name)] = r
	}
	return m, nil
}

// Swarm draws a seed's mix: each kind on or off at even odds, at a rate
// drawn from its range.
func Swarm(c Chooser) Mix {
	ranges := map[Fault][]float64{
		KillBefore: {0.002, 0.01, 0.03}, KillAfter: {0.002, 0.01, 0.03}, Throttle: {0.005, 0.02, 0.05},
		LoseAnswer: {0.002, 0.01, 0.03}, Slow: {0.01, 0.05}, Copy: {0.01, 0.05}, StaleRead: {0.1, 0.5},
		MissedRun: {0.1, 0.5}, Skew: {1}, Remote: {0.5, 1}, Operator: {0.01, 0.05}, Deploy: {1}, Duplicate: {0.05, 0.2}, Burst: {1},
		Replica: {0.001, 0.01},
		// Per try of a code step, far fewer than port calls.
		CrashAfterEffect: {0.02, 0.1}, CrashAfterLedger: {0.02, 0.1},
		// Shares of the orders.
		Hold: {0.2, 0.5}, Fix: {1}, RefuseAfterEffect: {0.2, 1}, Forge: {0.05, 0.2},
		// Per entry of a batch request.
		PartialBatch: {0.005, 0.02, 0.1},
		// Per scheduled run.
		LateRun: {0.1, 0.5}, DoubleRun: {0.1, 0.5},
		// Per key of a batch.
		Unprocessed: {0.01, 0.1},
	}
	m := Mix{}
	for _, f := range AllFaults() {
		if c.Intn(2) == 1 {
			r := ranges[f]
			m[f] = r[c.Intn(len(r))]
		}
	}
	return m
}

// Errors the faults return. Neither is a conflict: a handler can tell
// nothing from them but that the call failed, and for a lost answer, that
// it may have taken effect.
var (
	errThrottled  = errors.New("ThrottlingException: rate exceeded (the SDK's retries are spent)")
	errLostAnswer = errors.New("connection reset by peer: the answer was lost (the request may have taken effect)")
)

// faults injects the faults of a run at the ports' calls.
type faults struct {
	w   *World
	mix Mix
	// on until the faults stop, so the run can show that every order ends.
	on bool
	// budget, when set, bounds how many faults of a kind strike, and each
	// may strike at any call (the exhaustive search's mode).
	budget map[Fault]int
	counts map[Fault]int
	calls  int
	// seed draws the faults that are a share of the orders (ofOrder).
	seed uint64
	// lifted: the operators lifted every hold (Fix).
	lifted bool
}

func newFaults(w *World, mix Mix, seed uint64) *faults {
	return &faults{w: w, mix: mix, on: true, counts: map[Fault]int{}, seed: seed}
}

// ofOrder reports whether kind, a share of the orders (Hold,
// RefuseAfterEffect), applies to order id: a draw of its own per order and
// kind, from the seed, so an order's share is the same whatever the
// scheduler chose before.
func (f *faults) ofOrder(kind Fault, id string) bool {
	rate := f.mix[kind]
	return rate > 0 && f.budget == nil && draw.Unit(f.seed, string(kind)+"/"+id, 0) < rate
}

// held reports whether order id's undos are refused for good now: it is
// under a hold that has not been lifted.
func (f *faults) held(id string) bool { return !f.lifted && f.ofOrder(Hold, id) }

// strike decides whether f strikes now.
func (f *faults) strike(kind Fault) bool {
	if !f.on {
		return false
	}
	if f.budget != nil {
		key := kind
		if kind == KillAfter {
			key = KillBefore // one budget of crashes, before or after
		}
		if f.budget[key] <= 0 || f.w.choose.Intn(2) == 0 {
			return false
		}
		f.budget[key]--
	} else if !f.w.choose.Chance(f.mix[kind]) {
		return false
	}
	f.counts[kind]++
	return true
}

// latency is how long a call takes: a few milliseconds, or seconds when
// Slow strikes. The exhaustive search takes one millisecond for every call,
// so calls meet and every order of them is tried.
func (f *faults) latency() time.Duration {
	if f.budget != nil {
		return time.Millisecond
	}
	if f.strike(Slow) {
		return time.Duration(1+f.w.choose.Intn(3000)) * time.Millisecond
	}
	return time.Duration(1+f.w.choose.Intn(20)) * time.Millisecond
}

// call carries out one port call of the invocation ctx belongs to: it
// takes its latency, during which anything else may happen, and may be
// killed before it, fail, or (a write) take effect and lose its answer or
// be killed after it. Outside an invocation it just runs.
func (f *faults) call(ctx context.Context, site, about string, write bool, apply func() error) error {
	return f.port(ctx, site, about, write, false, apply)
}

// sdkCall carries out one AWS API call of the invocation ctx belongs to as
// the AWS SDK makes it: it takes its latency, and may be killed before it,
// fail (a throttle, once the SDK's retries are spent), or, a write, take
// effect and be killed after it, or lose its answer. A lost answer is what
// it is in production: the SDK sends the same request again (attempt, once
// more, against the tables as they are then), and the caller gets that
// answer, unless it is lost too. So a conditional write that took effect
// comes back as its own condition failing, and a transaction as the one
// its ClientRequestToken already committed. The exhaustive search crashes
// only at writes: a crash before a read leaves the tables as a crash
// before the next write, or after the last one, does. Outside an
// invocation it just runs.
func (f *faults) sdkCall(ctx context.Context, site, about string, write bool, attempt func() error) error {
	return f.port(ctx, site, about, write, true, attempt)
}

// port is call, or with sdk sdkCall.
func (f *faults) port(ctx context.Context, site, about string, write, sdk bool, attempt func() error) error {
	p := procOf(ctx)
	if p == nil {
		return attempt()
	}
	if p.dead() {
		p.exit()
	}
	f.calls++
	w := f.w
	if p.wait(f.latency()) {
		// The invocation died (killed, or timed out) while the request was
		// on its way: the service processes one already sent all the same,
		// or it never arrived; no answer comes back either way.
		if w.choose.Intn(2) == 1 && attempt() == nil {
			w.log.add(w.now, p.String(), "landed after the death "+site, about)
		}
		p.exit()
	}
	if (!sdk || write || f.budget == nil) && f.strike(KillBefore) {
		w.log.add(w.now, p.String(), "killed before "+site, about)
		p.exit()
	}
	if f.strike(Throttle) {
		w.log.add(w.now, p.String(), "throttled "+site, about)
		return fmt.Errorf("%s: %w", site, errThrottled)
	}
	if err := attempt(); err != nil {
		w.log.add(w.now, p.String(), site+" refused", about)
		return err
	}
	w.log.add(w.now, p.String(), site, about)
	if !write {
		return nil
	}
	if f.strike(LoseAnswer) {
		if !sdk {
			w.log.add(w.now, p.String(), "answer lost "+site, about)
			return fmt.Errorf("%s: %w", site, errLostAnswer)
		}
		w.log.add(w.now, p.String(), "answer lost "+site+", sent again", about)
		p.suspend(f.latency())
		if f.strike(LoseAnswer) {
			w.log.add(w.now, p.String(), "answer lost again "+site, about)
			return fmt.Errorf("%s: %w", site, errLostAnswer)
		}
		err := attempt()
		what := site + " again"
		if err != nil {
			what += " refused"
		}
		w.log.add(w.now, p.String(), what, about)
		return err
	}
	if f.strike(KillAfter) {
		w.log.add(w.now, p.String(), "killed after "+site, about)
		p.exit()
	}
	return nil
}

// sleep is an invocation's wait (the Agent's backoff).
func (f *faults) sleep(ctx context.Context, d time.Duration) error {
	p := procOf(ctx)
	if p == nil {
		return nil
	}
	if p.dead() {
		p.exit()
	}
	if d > 0 {
		p.suspend(d)
	}
	return nil
}
