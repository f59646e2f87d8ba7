package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sasflow/sas/internal/testkit/ddbmodel"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/workflow"
	shiporder "github.com/sasflow/sas/steps/ship-order"
)

// codeSteps are the code steps (steps.All) the simulator runs as code: each
// the real step over a model of what it acts on. A code step without one
// here would run as an HTTP step against the remote model;
// TestEveryCodeStepIsModelled keeps the two lists together.
var codeSteps = map[string]func(m *codeModel) step.Step{
	shiporder.Name: func(m *codeModel) step.Step { return shiporder.NewStep(bucket{m}) },
}

// CodeStepReport is what the code steps did in a run, and the window the
// ledger cannot close: a try that ran the step and never recorded it
// (crashed after the effect, killed, its ledger write failed, its lease
// taken over) leaves the key to be run again.
type CodeStepReport struct {
	// Puts and Deletes are the effects and undos applied (ship-order's
	// objects written and deleted), re-runs included.
	Puts, Deletes int
	// Reruns are the effects applied again under a key already applied.
	Reruns int
	// Openings are the tries that applied an effect and did not record it
	// in the ledger; CrashOpenings those of them a crash-after-effect
	// ended. Reruns = Openings less the keys whose effect no try recorded
	// (undone before a re-run).
	Openings, CrashOpenings int
}

func (c *CodeStepReport) add(o CodeStepReport) {
	c.Puts += o.Puts
	c.Deletes += o.Deletes
	c.Reruns += o.Reruns
	c.Openings += o.Openings
	c.CrashOpenings += o.CrashOpenings
}

// String is the report as make sim prints it.
func (c CodeStepReport) String() string {
	return fmt.Sprintf("%d effects and %d undos applied; the window: %d effects run again, after %d tries that applied theirs and did not record it (%d crashed after the effect)",
		c.Puts, c.Deletes, c.Reruns, c.Openings, c.CrashOpenings)
}

// codeModel is the code steps' world: what ship-order's bucket holds, the
// effects per idempotency key, and each try of a code step (from its claim
// in the ledger to its end), so the checks can tell a re-run inside the
// window from one the ledger should have stopped.
type codeModel struct {
	w  *World
	f  *faults
	st *store
	// objects are the bucket's objects; orders, the order of each.
	objects map[string][]byte
	// puts, deletes and reruns count by ledger key (step#idempotency key)
	// of the step; recorded, the tries that applied the effect and
	// recorded it done.
	puts, reruns, recorded map[string]int
	deletes                map[string]int
	// openings by the key's tries, and what ended them.
	openings map[string]int
	report   CodeStepReport
	// tries are the tries running, by coroutine: each record of an
	// Agent's batch runs on a coroutine of its own, one try at a time.
	tries map[*proc]*codeTry
	// last is the coroutine that last returned from the step or the
	// ledger: the fault points, called right after, belong to it.
	last       *proc
	owners     int
	violations []string
	// ran lists the code steps run for each order, by name.
	ran map[string][]string
}

// codeTry is one try of a code step or its undo.
type codeTry struct {
	key        string
	owner      string
	leaseUntil time.Time
	// applied: the try's effect happened; recorded: its outcome is in the
	// ledger; crashed: a crash-after-effect ended it.
	applied, recorded, crashed, closed bool
}

func newCodeModel(w *World, f *faults, st *store) *codeModel {
	return &codeModel{w: w, f: f, st: st, objects: map[string][]byte{}, puts: map[string]int{}, reruns: map[string]int{},
		recorded: map[string]int{}, deletes: map[string]int{}, openings: map[string]int{}, tries: map[*proc]*codeTry{},
		ran: map[string][]string{}}
}

// owner is a try's token: a counter, so a run replays exactly.
func (m *codeModel) owner() string {
	m.owners++
	return "try-" + strconv.Itoa(m.owners)
}

// claimed starts p's try of key, ending the one before it.
func (m *codeModel) claimed(p *proc, key, owner string, leaseUntil time.Time) {
	if p == nil {
		return
	}
	if t := m.tries[p]; t != nil {
		m.close(t)
	} else {
		p.atEnd(func(killed bool) {
			if t := m.tries[p]; t != nil {
				m.close(t)
				// A dead invocation's call already sent may land later
				// (lateEffect): its try stays known.
				if !killed {
					delete(m.tries, p)
				}
			}
		})
	}
	m.tries[p] = &codeTry{key: key, owner: owner, leaseUntil: leaseUntil}
	step, rest, _ := strings.Cut(key, "#")
	if order, _, ok := strings.Cut(rest, "/"); ok && !slices.Contains(m.ran[order], step) {
		m.ran[order] = append(m.ran[order], step)
	}
}

// close ends a try: one that applied its effect and did not record it
// opened the window.
func (m *codeModel) close(t *codeTry) {
	if t.closed {
		return
	}
	t.closed = true
	if t.applied && !t.recorded {
		m.openings[t.key]++
		m.report.Openings++
		if t.crashed {
			m.report.CrashOpenings++
		}
	}
}

// applied records the effect of p's try: a step's put under its key must
// come from a try that holds the key in the ledger, or held it until its
// lease ended (a late effect, inside the window).
func (m *codeModel) applied(ctx context.Context, what string) *codeTry {
	p := procOf(ctx)
	t := m.tries[p]
	switch {
	case t != nil && t.closed && p.dead():
		// A call its invocation sent before it died, landing after: the
		// try applied its effect and never recorded it.
		if !t.applied && !t.recorded {
			m.openings[t.key]++
			m.report.Openings++
		}
	case t == nil || t.closed:
		m.violations = append(m.violations, fmt.Sprintf("effects: %s by %v, which holds no key of a code step", what, p))
		return nil
	}
	t.applied = true
	e, err := m.st.truth.Entry(context.Background(), t.key)
	if err == nil && e.State == statestore.LedgerRunning && e.Owner == t.owner {
		return t
	}
	if m.w.now.Before(t.leaseUntil) {
		m.violations = append(m.violations, fmt.Sprintf("effects: %s under %s by a try whose lease runs until %s, and the ledger says %s by %s (%v)",
			what, t.key, t.leaseUntil.Format(time.TimeOnly), e.State, e.Owner, err))
	}
	return t
}

// bucket is ship-order's S3 bucket, behind the port's faults.
type bucket struct{ m *codeModel }

func (b bucket) PutObject(ctx context.Context, key string, body []byte) error {
	m := b.m
	return m.f.call(ctx, "s3.PutObject", key, true, func() error {
		t := m.applied(ctx, "put "+key)
		m.objects[key] = slices.Clone(body)
		m.report.Puts++
		if t == nil {
			return nil
		}
		if m.puts[t.key] > 0 {
			m.reruns[t.key]++
			m.report.Reruns++
		}
		m.puts[t.key]++
		return nil
	})
}

func (b bucket) DeleteObject(ctx context.Context, key string) error {
	m := b.m
	return m.f.call(ctx, "s3.DeleteObject", key, true, func() error {
		m.applied(ctx, "delete "+key)
		delete(m.objects, key)
		m.report.Deletes++
		m.deletes[key]++
		return nil
	})
}

// counted is a code step as the simulator runs it: the step itself, which
// names its invocation as the last to return before the fault point.
type counted struct {
	m    *codeModel
	step step.Step
}

// Do runs the step, as the order ships: with a conditional put
// (RefuseAfterEffect) a shipment already there is refused for good
// ("already shipped"), the step's own effect from an earlier try.
func (c counted) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
	defer func() { c.m.last = procOf(ctx) }()
	if _, there := c.m.objects[shiporder.Key(req.OrderID)]; there && c.m.f.ofOrder(RefuseAfterEffect, req.OrderID) {
		c.m.f.counts["code-refused-after-effect"]++
		return nil, step.Reject("already_shipped", "the shipment of order "+req.OrderID+" exists")
	}
	return c.step.Do(ctx, req)
}

// Undo runs the step's undo, refused for good while its order is under a
// hold (Hold): the object cannot be deleted until the hold is lifted.
func (c counted) Undo(ctx context.Context, req step.Request) (json.RawMessage, error) {
	defer func() { c.m.last = procOf(ctx) }()
	u, ok := c.step.(step.Undoer)
	if !ok {
		return nil, errors.New("simulation: the undo of a step that has none")
	}
	if c.m.f.held(req.OrderID) {
		c.m.f.counts["code-held-undo"]++
		return nil, step.Reject("legal_hold", "the shipment of order "+req.OrderID+" is under a legal hold")
	}
	return u.Undo(ctx, req)
}

// wrap is st as the simulator runs it, with an undo only when st has one.
func (m *codeModel) wrap(st step.Step) step.Step {
	c := counted{m: m, step: st}
	if _, ok := st.(step.Undoer); ok {
		return c
	}
	return doOnly{c}
}

type doOnly struct{ c counted }

func (d doOnly) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
	return d.c.Do(ctx, req)
}

// crashAfterEffect is codestep.Faults.AfterEffect: a seeded draw.
func (m *codeModel) crashAfterEffect(key string) bool {
	if !m.f.strike(CrashAfterEffect) {
		return false
	}
	m.w.log.add(m.w.now, m.last.String(), "crashed after the effect", key)
	if t := m.tries[m.last]; t != nil && t.key == key {
		t.crashed = true
		m.close(t)
	}
	return true
}

// crashAfterLedger is codestep.Faults.AfterLedger.
func (m *codeModel) crashAfterLedger(key string) bool {
	if !m.f.strike(CrashAfterLedger) {
		return false
	}
	m.w.log.add(m.w.now, m.last.String(), "crashed after the ledger write", key)
	return true
}

// ledger is the idempotency ledger the code steps are given: the real
// store's (statestore.Store) on the ledger's table of the DynamoDB model,
// with the container's clock, as its own table with no stream; the faults
// strike at its API calls. The tries are followed from the writes the
// table takes (ledgerWrote): a claim or an outcome that took effect counts
// whatever answer its caller got.
type ledger struct {
	m  *codeModel
	st *statestore.Store
}

var _ statestore.LedgerPort = ledger{}

// ledgerOp is the ledger call a write belongs to, in its context.
type ledgerOp struct {
	op         string
	key, owner string
	leaseUntil time.Time
	fault      bool
}

type ledgerOpKey struct{}

func withLedgerOp(ctx context.Context, op ledgerOp) context.Context {
	return context.WithValue(ctx, ledgerOpKey{}, &op)
}

func (l ledger) Begin(ctx context.Context, key, owner string, leaseUntil time.Time) (statestore.LedgerEntry, bool, error) {
	return l.st.Begin(withLedgerOp(ctx, ledgerOp{op: "begin", key: key, owner: owner, leaseUntil: leaseUntil}), key, owner, leaseUntil)
}

func (l ledger) Entry(ctx context.Context, key string) (statestore.LedgerEntry, error) {
	return l.st.Entry(ctx, key)
}

func (l ledger) Finish(ctx context.Context, key, owner string, out statestore.Outcome) error {
	err := l.st.Finish(withLedgerOp(ctx, ledgerOp{op: "finish", key: key, owner: owner, fault: out.Fault != nil}), key, owner, out)
	l.m.last = procOf(ctx)
	return err
}

func (l ledger) Release(ctx context.Context, key, owner string) error {
	return l.st.Release(ctx, key, owner)
}

func (l ledger) Tombstone(ctx context.Context, key string) (statestore.LedgerEntry, error) {
	return l.st.Tombstone(ctx, key)
}

func (l ledger) Expire(ctx context.Context, key string, at time.Time) error {
	return l.st.Expire(ctx, key, at)
}

func (l ledger) FinishUndo(ctx context.Context, effectKey, undoKey, owner string, output json.RawMessage) error {
	err := l.st.FinishUndo(withLedgerOp(ctx, ledgerOp{op: "finishUndo", key: undoKey, owner: owner}), effectKey, undoKey, owner, output)
	l.m.last = procOf(ctx)
	return err
}

// The ledger's attributes the tries are followed by (shared/statestore's
// ledger.go).
const (
	ledgerStateAttr = "state"
	ledgerOwnerAttr = "owner"
)

// ledgerWrote follows the tries by the ledger's writes: a claim starts a
// try, an outcome recorded by the try that holds the key ends it.
func (m *codeModel) ledgerWrote(ctx context.Context, w ddbmodel.Write) {
	op, _ := ctx.Value(ledgerOpKey{}).(*ledgerOp)
	p := procOf(ctx)
	if op == nil || p == nil || w.Key != op.key || ledgerAttr(w.New, ledgerOwnerAttr) != op.owner {
		return
	}
	state := statestore.LedgerState(ledgerAttr(w.New, ledgerStateAttr))
	switch {
	case op.op == "begin" && state == statestore.LedgerRunning:
		m.claimed(p, op.key, op.owner, op.leaseUntil)
	case op.op == "finish" && (state == statestore.LedgerDone || state == statestore.LedgerRejected):
		if t := m.recording(p, op.key, op.owner); t != nil && t.applied && !op.fault {
			m.recorded[op.key]++
			if m.recorded[op.key] > 1 {
				m.violations = append(m.violations, fmt.Sprintf("effects: %s recorded done by %d tries that applied it", op.key, m.recorded[op.key]))
			}
		}
	case op.op == "finishUndo" && state == statestore.LedgerDone:
		m.recording(p, op.key, op.owner)
	}
}

// recording marks p's try of key under owner recorded in the ledger and
// returns it, or nil when p holds no such try. A write its invocation sent
// before it died may land after it: the try closed as one that applied its
// effect and did not record it, which it now has.
func (m *codeModel) recording(p *proc, key, owner string) *codeTry {
	t := m.tries[p]
	if t == nil || t.key != key || t.owner != owner || t.recorded || t.closed && !p.dead() {
		return nil
	}
	if t.closed && t.applied {
		m.openings[key]--
		m.report.Openings--
		if t.crashed {
			m.report.CrashOpenings--
		}
	}
	t.recorded = true
	m.close(t)
	return t
}

// check holds the code steps to their invariants at the end of a run,
// for step of order s: it ran as code with its effect recorded by
// one try at most (checked as it happened), re-run only inside the window,
// and nothing left by an order that ended compensated or cancelled.
func (m *codeModel) check(s workflow.State, i int, compensable bool, bad func(string, ...any)) {
	step := s.Steps[i]
	name := step.Name
	// Every round of the step's key: a new one only after a certain
	// refusal, under which nothing was applied.
	keys, _ := workflow.StepKeys(s, i)
	key := statestore.LedgerKey(name, workflow.IdempotencyKey(s.OrderID, name))
	puts, reruns, openings := 0, 0, 0
	for _, k := range keys {
		lk := statestore.LedgerKey(name, k)
		puts, reruns, openings = puts+m.puts[lk], reruns+m.reruns[lk], openings+m.openings[lk]
	}
	_, left := m.objects[shiporder.Key(s.OrderID)]
	stopped := s.ProcessState == workflow.Compensated || s.ProcessState == workflow.Cancelled
	named := strings.HasPrefix(s.LastError, workflow.NotUndoablePrefix) && strings.Contains(s.LastError, "step "+name+" ")
	switch {
	case reruns > openings:
		bad("effects: %s applied %d times, re-run %d times after %d tries that applied it and did not record it", key, puts, reruns, openings)
	case step.State == workflow.StepSucceeded && (puts == 0 || !left && s.ProcessState == workflow.Processed):
		bad("effects: step %s of order %s succeeded without its effect (%d puts, shipment kept %t)", name, s.OrderID, puts, left)
	case s.ProcessState == workflow.Processed && m.deletes[shiporder.Key(s.OrderID)] > 0:
		bad("effects: step %s of processed order %s undone", name, s.OrderID)
	case stopped && compensable && left:
		bad("left applied: %s (shipment %s kept after %d puts and %d deletes, order %s)", key, shiporder.Key(s.OrderID), puts, m.deletes[shiporder.Key(s.OrderID)], s.ProcessState)
	case !compensable && left && s.ProcessState != workflow.Processed && s.ProcessState != workflow.CompensationFailed &&
		(s.ProcessState == workflow.Compensated || !named):
		// Applied, no undo, and the order did not complete: it must say so.
		bad("unreported: %s applied without an undo, order %s, last error %q", key, s.ProcessState, s.LastError)
	}
}

// finish ends the tries still open at the end of a run.
func (m *codeModel) finish() {
	for _, p := range slices.SortedFunc(mapsKeys(m.tries), func(a, b *proc) int { return a.id - b.id }) {
		m.close(m.tries[p])
	}
}
