package codestep_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/codestep"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

const (
	stepName = "ship-order"
	// tryTimeout is each try's deadline, as the agent's Handler gives it.
	tryTimeout = 5 * time.Second
)

// counted is a step whose Do and Undo are do and undo, counting the
// calls. Without undo it has no Undo (see plain).
type counted struct {
	mu    sync.Mutex
	runs  int
	undos int
	undid []step.Request
	do    func(ctx context.Context, n int, req step.Request) (json.RawMessage, error)
	undo  func(ctx context.Context, n int, req step.Request) (json.RawMessage, error)
}

func (c *counted) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
	c.mu.Lock()
	c.runs++
	n := c.runs
	c.mu.Unlock()
	if c.do == nil {
		return json.RawMessage(`{"shipment":"shipments/` + req.OrderID + `.json"}`), nil
	}
	return c.do(ctx, n, req)
}

func (c *counted) Undo(ctx context.Context, req step.Request) (json.RawMessage, error) {
	c.mu.Lock()
	c.undos++
	n := c.undos
	c.undid = append(c.undid, req)
	c.mu.Unlock()
	if c.undo == nil {
		return json.RawMessage(`{"deleted":true}`), nil
	}
	return c.undo(ctx, n, req)
}

func (c *counted) counts() (runs, undos int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs, c.undos
}

// fixture is a Service over a step and a memstore ledger on a fake clock.
type fixture struct {
	svc    *codestep.Service
	ledger *memstore.Store
	clk    *clock.Fake
}

func newFixture(t *testing.T, st step.Step, opts ...codestep.Option) fixture {
	t.Helper()
	clk := clock.NewFake(t0)
	ledger := memstore.New()
	ledger.Clock = clk
	svc, err := codestep.New(stepName, st, ledger, actor.Deps{Clock: clk}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{svc: svc, ledger: ledger, clk: clk}
}

// tryCtx is the context of one try, ending in tryTimeout.
func tryCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), tryTimeout)
	t.Cleanup(cancel)
	return ctx
}

func request(orderID string) step.Request {
	return step.Request{OrderID: orderID, Step: stepName, StepIndex: 3, Attempt: 1, Action: message.Perform,
		IdempotencyKey: workflow.IdempotencyKey(orderID, stepName), Input: json.RawMessage(`{"orderId":"` + orderID + `"}`)}
}

func undoRequest(orderID string) step.Request {
	r := request(orderID)
	r.Action, r.EffectKey, r.IdempotencyKey = message.Compensate, r.IdempotencyKey, workflow.CompensationKey(orderID, stepName)
	return r
}

func effectKey(orderID string) string {
	return statestore.LedgerKey(stepName, workflow.IdempotencyKey(orderID, stepName))
}

func (f fixture) entry(t *testing.T, key string) (statestore.LedgerEntry, bool) {
	t.Helper()
	e, err := f.ledger.Entry(context.Background(), key)
	if errors.Is(err, workflow.ErrNotFound) {
		return e, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return e, true
}

func TestDoRecordsItsOutputAndReplaysIt(t *testing.T) {
	t.Parallel()
	st := &counted{}
	f := newFixture(t, st)
	first, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil {
		t.Fatal(err)
	}
	// No TTL: the entry lives until its order ended for good (the Timer
	// gives it one then), however long the order waits for an operator.
	if e, _ := f.entry(t, effectKey("o-1")); e.State != statestore.LedgerDone || string(e.Output) != string(first) ||
		!e.ExpiresAt.IsZero() {
		t.Fatalf("the entry after a success: %+v", e)
	}
	f.clk.Advance(time.Hour)
	again, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil || string(again) != string(first) {
		t.Fatalf("a second Do = %s, %v; want the recorded %s", again, err, first)
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the step ran %d times, want once", runs)
	}
}

// TestTwoDeliveriesAtOnceRunTheEffectOnce: SQS delivers a request twice,
// and both copies are tried at once. The second finds the key held and is
// in progress until the first has recorded its outcome, then replays it.
func TestTwoDeliveriesAtOnceRunTheEffectOnce(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	answered := make(chan struct{})
	st := &counted{do: func(ctx context.Context, _ int, req step.Request) (json.RawMessage, error) {
		close(held)
		select {
		case <-answered:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(`{"shipment":"s-1"}`), nil
	}}
	f := newFixture(t, st)
	var (
		wg          sync.WaitGroup
		first       json.RawMessage
		errOfFirst  error
		secondError error
	)
	wg.Go(func() { first, errOfFirst = f.svc.Do(tryCtx(t), request("o-1")) })
	<-held
	_, secondError = f.svc.Do(tryCtx(t), request("o-1"))
	close(answered)
	wg.Wait()
	if !errors.Is(secondError, agent.ErrInProgress) || step.IsPermanent(secondError) || !step.IsUncertain(secondError) {
		t.Fatalf("the copy tried while the first ran: %v, want a transient, uncertain ErrInProgress", secondError)
	}
	if errOfFirst != nil {
		t.Fatal(errOfFirst)
	}
	again, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil || string(again) != string(first) {
		t.Fatalf("the copy tried again = %s, %v; want the first's %s", again, err, first)
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the effect ran %d times, want once", runs)
	}
}

// TestACrashAfterTheEffectRunsItAgainAfterTheLease is the window the
// ledger cannot close: a try that applied the effect and died before the
// ledger write leaves the key running; the next try waits for the lease to
// end, then runs the step a second time.
func TestACrashAfterTheEffectRunsItAgainAfterTheLease(t *testing.T) {
	t.Parallel()
	st := &counted{}
	crashes := 1
	f := newFixture(t, st, codestep.WithFaults(codestep.Faults{AfterEffect: func(key string) bool {
		if key != effectKey("o-1") || crashes == 0 {
			return false
		}
		crashes--
		return true
	}}))
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); !errors.Is(err, agent.ErrRedeliver) {
		t.Fatalf("the crashed try: %v, want ErrRedeliver", err)
	}
	running, ok := f.entry(t, effectKey("o-1"))
	if !ok || !running.Live(f.clk.Now()) {
		t.Fatalf("after the crash the key is %+v, want still held", running)
	}
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); !errors.Is(err, agent.ErrInProgress) {
		t.Fatalf("a try within the lease: %v, want ErrInProgress", err)
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the step ran %d times within the lease, want once", runs)
	}
	f.clk.Set(running.LeaseUntil)
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); err != nil {
		t.Fatalf("the try after the lease: %v", err)
	}
	if runs, _ := st.counts(); runs != 2 {
		t.Fatalf("the step ran %d times, want twice: the effect whose ledger write never happened runs again", runs)
	}
	if e, _ := f.entry(t, effectKey("o-1")); e.State != statestore.LedgerDone {
		t.Fatalf("the entry after the second run: %+v", e)
	}
}

// A step without an undo applies its effect and its try dies before the
// ledger write; the next try takes the key over after the lease and the
// step refuses for good, since its effect is there ("already shipped").
// That refusal does not prove nothing was applied: it is uncertain, as
// the reply the Scheduler commits and as the ledger replays it.
func TestARefusalAfterATakeoverIsUncertain(t *testing.T) {
	t.Parallel()
	shipped := false
	st := step.Func(func(ctx context.Context, req step.Request) (json.RawMessage, error) {
		if shipped {
			return nil, step.Reject("already_shipped", "the shipment of "+req.OrderID+" exists")
		}
		shipped = true
		return json.RawMessage(`{}`), nil
	})
	crashes := 1
	f := newFixture(t, st, codestep.WithFaults(codestep.Faults{AfterEffect: func(string) bool {
		crashes--
		return crashes == 0
	}}))
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); !errors.Is(err, agent.ErrRedeliver) {
		t.Fatalf("the crashed try: %v, want ErrRedeliver", err)
	}
	running, _ := f.entry(t, effectKey("o-1"))
	f.clk.Set(running.LeaseUntil)
	_, err := f.svc.Do(tryCtx(t), request("o-1"))
	if !step.IsPermanent(err) || !step.IsUncertain(err) || !agent.FaultOf(err).Uncertain {
		t.Fatalf("the refusal after the takeover: %v (permanent %v, uncertain %v), want permanent and uncertain", err, step.IsPermanent(err), step.IsUncertain(err))
	}
	if e, _ := f.entry(t, effectKey("o-1")); e.State != statestore.LedgerRejected || e.Fault == nil || !e.Fault.Uncertain {
		t.Fatalf("the ledger recorded %+v, want an uncertain rejection", e)
	}
	_, err = f.svc.Do(tryCtx(t), request("o-1"))
	if !step.IsUncertain(err) {
		t.Fatalf("the replay of the refusal: %v, want uncertain", err)
	}
	// A try whose put took effect and whose answer was lost fails
	// transiently and lets the key go; the next try, at once, finds the
	// shipment there: its refusal is uncertain too.
	put := false
	lost := step.Func(func(ctx context.Context, req step.Request) (json.RawMessage, error) {
		if put {
			return nil, step.Reject("already_shipped", "the shipment of "+req.OrderID+" exists")
		}
		put = true
		return nil, errors.New("s3: connection reset (the put may have taken effect)")
	})
	h := newFixture(t, lost)
	if _, err := h.svc.Do(tryCtx(t), request("o-3")); err == nil || step.IsPermanent(err) {
		t.Fatalf("the try whose answer was lost: %v, want transient", err)
	}
	if _, err := h.svc.Do(tryCtx(t), request("o-3")); !step.IsPermanent(err) || !step.IsUncertain(err) {
		t.Fatalf("the refusal after a released try: %v, want permanent and uncertain", err)
	}
	// A first try's own refusal stays certain.
	g := newFixture(t, step.Func(func(context.Context, step.Request) (json.RawMessage, error) {
		return nil, step.Reject("invalid_input", "no items")
	}))
	if _, err := g.svc.Do(tryCtx(t), request("o-2")); !step.IsPermanent(err) || step.IsUncertain(err) {
		t.Fatalf("a first try's refusal: %v, want permanent and certain", err)
	}
}

// TestACrashAfterTheLedgerWriteReplaysIt: the outcome is recorded, the
// reply never sent; the redelivery replays it without running the step.
func TestACrashAfterTheLedgerWriteReplaysIt(t *testing.T) {
	t.Parallel()
	st := &counted{}
	crashed := false
	f := newFixture(t, st, codestep.WithFaults(codestep.Faults{AfterLedger: func(string) bool {
		was := crashed
		crashed = true
		return !was
	}}))
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); !errors.Is(err, agent.ErrRedeliver) {
		t.Fatalf("the crashed try: %v, want ErrRedeliver", err)
	}
	out, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil || !strings.Contains(string(out), "shipments/o-1.json") {
		t.Fatalf("the redelivery = %s, %v; want the recorded output", out, err)
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the step ran %d times, want once", runs)
	}
}

func TestAPermanentErrorIsRemembered(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"rejected", step.Reject("no_address", "the order has no address")},
		{"rejected uncertainly", step.Uncertain(step.Reject("carrier_refused", "refused after the label was printed"))},
		{"plain permanent", step.Permanent(errors.New("bad label"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &counted{do: func(context.Context, int, step.Request) (json.RawMessage, error) { return nil, tt.err }}
			f := newFixture(t, st)
			_, first := f.svc.Do(tryCtx(t), request("o-1"))
			if !step.IsPermanent(first) {
				t.Fatalf("the first try: %v, want permanent", first)
			}
			f.clk.Advance(time.Hour)
			_, again := f.svc.Do(tryCtx(t), request("o-1"))
			if !step.IsPermanent(again) || agent.FaultOf(again) != agent.FaultOf(first) {
				t.Fatalf("the fault replayed: %+v (%v), want %+v", agent.FaultOf(again), again, agent.FaultOf(first))
			}
			if runs, _ := st.counts(); runs != 1 {
				t.Fatalf("the step ran %d times, want once", runs)
			}
			if e, _ := f.entry(t, effectKey("o-1")); e.State != statestore.LedgerRejected {
				t.Fatalf("the entry: %+v, want rejected", e)
			}
		})
	}
}

func TestATransientErrorReleasesTheKey(t *testing.T) {
	t.Parallel()
	st := &counted{do: func(_ context.Context, n int, req step.Request) (json.RawMessage, error) {
		if n == 1 {
			return nil, step.Transient(errors.New("s3: 503 slow down"))
		}
		return json.RawMessage(`{"shipment":"s"}`), nil
	}}
	f := newFixture(t, st)
	_, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err == nil || step.IsPermanent(err) || !strings.Contains(err.Error(), "slow down") {
		t.Fatalf("the failed try: %v, want the step's transient error", err)
	}
	if e, ok := f.entry(t, effectKey("o-1")); ok && e.Live(f.clk.Now()) {
		t.Fatalf("the key after a transient failure: %+v, want released", e)
	}
	// At once, not after the lease.
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); err != nil {
		t.Fatalf("the next try: %v", err)
	}
	if runs, _ := st.counts(); runs != 2 {
		t.Fatalf("the step ran %d times, want twice", runs)
	}
}

// TestUndoThenALateDoIsRefused: the undo marks the effect undone in the
// transaction that records it, so a late copy of the step's request is
// refused for good, and the undo is replayed, not repeated.
func TestUndoThenALateDoIsRefused(t *testing.T) {
	t.Parallel()
	st := &counted{}
	f := newFixture(t, st)
	out, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil {
		t.Fatal(err)
	}
	undone, err := f.svc.Undo(tryCtx(t), undoRequest("o-1"))
	if err != nil || string(undone) != `{"deleted":true}` {
		t.Fatalf("Undo = %s, %v", undone, err)
	}
	// The record may not hold the step's output; the undo gets the
	// ledger's.
	if got := string(st.undid[0].Previous[stepName]); got != string(out) {
		t.Fatalf("the undo saw the step's output %q, want %q", got, out)
	}
	_, late := f.svc.Do(tryCtx(t), request("o-1"))
	if f := agent.FaultOf(late); !step.IsPermanent(late) || f.Code != remote.CodeCompensated {
		t.Fatalf("a late Do: %v (%+v), want refused as %s", late, f, remote.CodeCompensated)
	}
	again, err := f.svc.Undo(tryCtx(t), undoRequest("o-1"))
	if err != nil || string(again) != string(undone) {
		t.Fatalf("the undo again = %s, %v; want the recorded %s", again, err, undone)
	}
	if runs, undos := st.counts(); runs != 1 || undos != 1 {
		t.Fatalf("ran %d times and undid %d times, want once each", runs, undos)
	}
}

// TestUndoOfAnAbsentKeyLeavesATombstone: an undo that overtakes the step
// (or follows a try that failed and released the key) refuses the step
// from then on, and still calls the step's undo, which answers success
// when nothing was applied: a released try may have left part of its
// effect.
func TestUndoOfAnAbsentKeyLeavesATombstone(t *testing.T) {
	t.Parallel()
	st := &counted{}
	f := newFixture(t, st)
	if _, err := f.svc.Undo(tryCtx(t), undoRequest("o-1")); err != nil {
		t.Fatalf("Undo of an absent key: %v", err)
	}
	if e, ok := f.entry(t, effectKey("o-1")); !ok || e.State != statestore.LedgerUndone {
		t.Fatalf("the effect's key after the undo: %+v, %v; want a tombstone", e, ok)
	}
	if _, undos := st.counts(); undos != 1 || st.undid[0].Previous[stepName] != nil {
		t.Fatalf("the undo ran %d times (saw %s), want once, without an output", undos, st.undid[0].Previous[stepName])
	}
	_, late := f.svc.Do(tryCtx(t), request("o-1"))
	if f := agent.FaultOf(late); f.Code != remote.CodeCompensated {
		t.Fatalf("the step after the tombstone: %v, want refused", late)
	}
	if runs, _ := st.counts(); runs != 0 {
		t.Fatalf("the step ran %d times, want never", runs)
	}
}

// TestUndoWaitsForALiveTry: a try of the step still running may yet apply
// it, so the undo is in progress and holds nothing.
func TestUndoWaitsForALiveTry(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	finish := make(chan struct{})
	st := &counted{do: func(ctx context.Context, _ int, _ step.Request) (json.RawMessage, error) {
		close(running)
		<-finish
		return json.RawMessage(`1`), nil
	}}
	f := newFixture(t, st)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = f.svc.Do(tryCtx(t), request("o-1")) })
	<-running
	_, err := f.svc.Undo(tryCtx(t), undoRequest("o-1"))
	close(finish)
	wg.Wait()
	if !errors.Is(err, agent.ErrInProgress) || step.IsPermanent(err) {
		t.Fatalf("Undo during a live try: %v, want in progress", err)
	}
	if e, ok := f.entry(t, statestore.LedgerKey(stepName, workflow.CompensationKey("o-1", stepName))); ok && e.Live(f.clk.Now()) {
		t.Fatalf("the undo's key after it waited: %+v, want released", e)
	}
	if _, err := f.svc.Undo(tryCtx(t), undoRequest("o-1")); err != nil {
		t.Fatalf("the undo once the try finished: %v", err)
	}
	if _, undos := st.counts(); undos != 1 {
		t.Fatalf("undid %d times, want once", undos)
	}
}

// TestAFailedUndoIsRememberedOrReleased: a permanent fault of the undo is
// replayed; a transient one releases the undo's key.
func TestAFailedUndoIsRememberedOrReleased(t *testing.T) {
	t.Parallel()
	st := &counted{undo: func(_ context.Context, n int, _ step.Request) (json.RawMessage, error) {
		if n == 1 {
			return nil, errors.New("s3: timeout")
		}
		return nil, step.Reject("retained", "the object is under legal hold")
	}}
	f := newFixture(t, st)
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); err != nil {
		t.Fatal(err)
	}
	undoKey := statestore.LedgerKey(stepName, workflow.CompensationKey("o-1", stepName))
	if _, err := f.svc.Undo(tryCtx(t), undoRequest("o-1")); err == nil || step.IsPermanent(err) {
		t.Fatalf("the first undo: %v, want transient", err)
	}
	if e, ok := f.entry(t, undoKey); ok && e.Live(f.clk.Now()) {
		t.Fatal("a transient undo failure kept the undo's key")
	}
	_, first := f.svc.Undo(tryCtx(t), undoRequest("o-1"))
	_, again := f.svc.Undo(tryCtx(t), undoRequest("o-1"))
	if agent.FaultOf(first).Code != "retained" || agent.FaultOf(again) != agent.FaultOf(first) {
		t.Fatalf("the undo's faults: %v then %v, want retained twice", first, again)
	}
	if _, undos := st.counts(); undos != 2 {
		t.Fatalf("undid %d times, want twice", undos)
	}
	if e, _ := f.entry(t, effectKey("o-1")); e.State != statestore.LedgerDone {
		t.Fatalf("the effect after a failed undo: %+v, want still done", e)
	}
}

func TestAStepWithoutUndoIsNotCompensable(t *testing.T) {
	t.Parallel()
	plain := step.Func(func(context.Context, step.Request) (json.RawMessage, error) { return nil, nil })
	f := newFixture(t, plain)
	_, err := f.svc.Undo(tryCtx(t), undoRequest("o-1"))
	if got := agent.FaultOf(err); !step.IsPermanent(err) || got.Code != agent.CodeNotCompensable {
		t.Fatalf("Undo of a step without one: %v, want %s", err, agent.CodeNotCompensable)
	}
	if _, ok := f.entry(t, effectKey("o-1")); ok {
		t.Fatal("a refused undo wrote the ledger")
	}
}

// TestAnOutputOverTheLimitIsRemembered: the step ran, but its output
// cannot travel: an uncertain permanent fault, the same on every try.
func TestAnOutputOverTheLimitIsRemembered(t *testing.T) {
	t.Parallel()
	st := &counted{do: func(context.Context, int, step.Request) (json.RawMessage, error) {
		return json.RawMessage(`{"label":"` + strings.Repeat("x", 64) + `"}`), nil
	}}
	f := newFixture(t, st, codestep.WithMaxOutputBytes(32))
	for range 2 {
		_, err := f.svc.Do(tryCtx(t), request("o-1"))
		if got := agent.FaultOf(err); got.Code != agent.CodeOutputTooLarge || !got.Uncertain {
			t.Fatalf("Do: %v (%+v), want an uncertain %s", err, got, agent.CodeOutputTooLarge)
		}
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the step ran %d times, want once", runs)
	}
}

// TestTheStepKeepsTheMarginForTheLedger: the step's context ends
// step.Margin before the try's, and the key is leased until the try's end,
// read through the clock.
func TestTheStepKeepsTheMarginForTheLedger(t *testing.T) {
	t.Parallel()
	var stepDeadline time.Time
	st := &counted{do: func(ctx context.Context, _ int, _ step.Request) (json.RawMessage, error) {
		stepDeadline, _ = ctx.Deadline()
		return nil, errors.New("look at the lease")
	}}
	f := newFixture(t, st, codestep.WithFaults(codestep.Faults{AfterEffect: func(string) bool { return true }}))
	ctx := tryCtx(t)
	tryDeadline, _ := ctx.Deadline()
	if _, err := f.svc.Do(ctx, request("o-1")); !errors.Is(err, agent.ErrRedeliver) {
		t.Fatal(err)
	}
	if gap := tryDeadline.Sub(stepDeadline); gap != step.Margin {
		t.Fatalf("the step's deadline is %v before the try's, want %v", gap, step.Margin)
	}
	e, _ := f.entry(t, effectKey("o-1"))
	if lease := e.LeaseUntil.Sub(t0); lease <= tryTimeout+codestep.ClockSkew-time.Second || lease > tryTimeout+codestep.ClockSkew {
		t.Fatalf("leased for %v, want the try's %v and the clock skew's %v", lease, tryTimeout, codestep.ClockSkew)
	}
	// A try with less than the margin left claims nothing.
	short, cancel := context.WithTimeout(context.Background(), step.Margin/2)
	defer cancel()
	if _, err := f.svc.Do(short, request("o-2")); err == nil || step.IsPermanent(err) {
		t.Fatalf("a try without time for the ledger: %v, want a transient error", err)
	}
	if _, ok := f.entry(t, effectKey("o-2")); ok {
		t.Fatal("a try without time claimed its key")
	}
}

// TestOnDynamoDBLocal runs a step, its replay, its undo and a late try on
// the DynamoDB ledger.
func TestOnDynamoDBLocal(t *testing.T) {
	t.Parallel()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Ledger: enginetest.UniqueName(t, "ledger")}
	if err := statestore.CreateTables(context.Background(), db, tables, statestore.WithoutTTL()); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	st := &counted{}
	svc, err := codestep.New(stepName, st, statestore.New(db, tables, statestore.WithClock(clk)), actor.Deps{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	out, err := svc.Do(tryCtx(t), request("o-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := svc.Do(tryCtx(t), request("o-1")); err != nil || string(again) != string(out) {
		t.Fatalf("the replay = %s, %v; want %s", again, err, out)
	}
	if _, err := svc.Undo(tryCtx(t), undoRequest("o-1")); err != nil {
		t.Fatalf("Undo: %v", err)
	}
	if _, late := svc.Do(tryCtx(t), request("o-1")); agent.FaultOf(late).Code != remote.CodeCompensated {
		t.Fatalf("a late Do: %v, want refused", late)
	}
	if runs, undos := st.counts(); runs != 1 || undos != 1 || string(st.undid[0].Previous[stepName]) != string(out) {
		t.Fatalf("ran %d, undid %d (with %s); want once each, with the output", runs, undos, st.undid[0].Previous[stepName])
	}
}

// An undo refused for good (the object is under a legal hold) leaves the
// order CompensationFailed. The operator lifts the hold and retries, as
// the runbook says: the retry runs the undo, under the next round of its
// key, instead of the ledger replaying the recorded refusal.
func TestAnUndoRefusedForGoodRunsAgainOnceFixed(t *testing.T) {
	t.Parallel()
	held := true
	st := &counted{undo: func(ctx context.Context, n int, req step.Request) (json.RawMessage, error) {
		if held {
			return nil, step.Reject("legal_hold", "the shipment is under a legal hold")
		}
		return json.RawMessage(`{"deleted":true}`), nil
	}}
	f := newFixture(t, st)
	m := workflow.Machine{Def: workflow.Definition{Name: "ship", Version: 1, Steps: []workflow.Step{
		{Name: stepName, Budget: 20 * time.Second, Compensable: true}}}, Policy: workflow.DefaultPolicy()}
	now := t0
	rec := m.Accept("o-1", json.RawMessage(`{"orderId":"o-1"}`), "submission", now)
	apply := func(c workflow.Change) {
		t.Helper()
		if !c.Fence.Admits(rec) {
			t.Fatalf("%s refused by %s", c.Transition, rec.ProcessState)
		}
		rec = c.Patch.Apply(rec)
	}
	run := func() error {
		t.Helper()
		req := followup.Request(rec)
		_, err := f.svc.Undo(tryCtx(t), step.Request{OrderID: req.OrderID, Step: req.Step, StepIndex: req.StepIndex, Attempt: req.Attempt,
			Action: req.Action, IdempotencyKey: req.IdempotencyKey, EffectKey: req.EffectKey, Input: req.Input})
		return err
	}
	if _, err := f.svc.Do(tryCtx(t), request("o-1")); err != nil {
		t.Fatal(err)
	}
	// The step's reply was lost and the order was cancelled: its undo runs.
	c, err := m.Cancel(rec, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	apply(c)
	apply(m.Claim("o-1", 0, true, "sched", now))
	err = run()
	if !step.IsPermanent(err) || step.IsUncertain(err) {
		t.Fatalf("the held undo: %v, want a certain refusal", err)
	}
	apply(m.UndoRejected("o-1", 0, rec.Attempt, workflow.UndoRejectedPrefix+err.Error(), false, workflow.State{}, now))
	if rec.ProcessState != workflow.CompensationFailed {
		t.Fatalf("after the refusal the order is %s", rec.ProcessState)
	}
	held = false
	c, err = m.Resubmit(rec, now.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	apply(c)
	apply(m.Claim("o-1", 0, true, "sched", now.Add(48*time.Hour)))
	if err := run(); err != nil {
		t.Fatalf("the undo retried once the hold was lifted: %v", err)
	}
	if _, undos := st.counts(); undos != 2 {
		t.Fatalf("the undo ran %d times, want twice: refused, then done", undos)
	}
	if e, _ := f.entry(t, effectKey("o-1")); e.State != statestore.LedgerUndone {
		t.Fatalf("the effect's entry after the undo: %+v", e)
	}
}

// An order in Error or CompensationFailed is kept for good, and an
// operator may retry it years later: a ledger entry must outlive it. The
// entry has no TTL until the Timer gives it its order's, once the order
// ended for good; a retry two days later (past the shortest retention, a
// day) replays the recorded output and does not run the step again.
func TestAnEntryOutlivesARetryDaysLater(t *testing.T) {
	t.Parallel()
	st := &counted{}
	f := newFixture(t, st)
	first, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(2 * workflow.MinRetention)
	again, err := f.svc.Do(tryCtx(t), request("o-1"))
	if err != nil || string(again) != string(first) {
		t.Fatalf("the retry two days later: %s, %v; want the recorded %s", again, err, first)
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the step ran %d times, want once: its entry expired under an order that may still try its key", runs)
	}
}
