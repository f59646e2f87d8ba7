package workflow

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// An operator's retry of a step, or of an undo, whose last outcome was a
// certain rejection runs it again under the next round of its key: the
// service remembers the rejection under the old key (and would replay it
// for good), and applied nothing under it.
func TestAnOperatorsRetryOfACertainRejectionRunsItAgain(t *testing.T) {
	t.Parallel()
	resubmit := func(s State) Change { return mustChange(machineOf().Resubmit(s, s.UpdatedAt.Add(time.Second))) }
	// c is refused past b, which has no undo: Error, nothing undone.
	s := record(t, claim, done, done, rejected)
	if s.ProcessState != Error || !s.Steps[2].Refused {
		t.Fatalf("after a certain rejection past b: %s, refused %v", s.ProcessState, s.Steps[2].Refused)
	}
	if step, _ := s.Keys(2); step != "o-1/c" {
		t.Fatalf("the refused key is %q", step)
	}
	s = apply(t, s, resubmit(s))
	if step, undo := s.Keys(2); step != "o-1/c/r1" || undo != "o-1/c/undo" {
		t.Errorf("after the retry the keys are %q and %q, want o-1/c/r1 and o-1/c/undo", step, undo)
	}
	if s.Steps[2].Refused {
		t.Error("the retry left the step marked refused")
	}
	// An undo refused for good (an object under a legal hold) runs again
	// once the operator fixed the cause.
	s = record(t, claim, rejected, undoRejected)
	if s.ProcessState != CompensationFailed || !s.Steps[0].UndoRefused {
		t.Fatalf("after a certain rejection of the undo: %s, undo refused %v", s.ProcessState, s.Steps[0].UndoRefused)
	}
	s = apply(t, s, resubmit(s))
	if step, undo := s.Keys(0); step != "o-1/a" || undo != "o-1/a/undo/r1" {
		t.Errorf("after the retry of the undo the keys are %q and %q, want o-1/a and o-1/a/undo/r1", step, undo)
	}
	// Refused again under the new round: the next retry takes the next.
	s = apply(t, s, claim(s))
	s = apply(t, s, undoRejected(s))
	s = apply(t, s, resubmit(s))
	if _, undo := s.Keys(0); undo != "o-1/a/undo/r2" {
		t.Errorf("the second retry runs under %q, want o-1/a/undo/r2", undo)
	}
	steps, undos := StepKeys(s, 0)
	if len(steps) != 1 || len(undos) != 3 {
		t.Errorf("StepKeys = %v, %v: want the step's one key and the undo's three rounds", steps, undos)
	}
}

// Any other last outcome keeps the key: an effect that may have been
// applied under it is replayed by its service, never applied twice.
func TestAnUncertainOutcomeKeepsItsKey(t *testing.T) {
	t.Parallel()
	m := machineOf()
	resubmit := func(s State) Change { return mustChange(m.Resubmit(s, s.UpdatedAt.Add(time.Second))) }
	uncertainUndo := func(s State) Change {
		return m.UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "compensation timeout: no answer", true, State{}, s.UpdatedAt.Add(time.Second))
	}
	for _, tc := range []struct {
		name   string
		events []func(State) Change
		step   int
	}{
		{"an uncertain rejection past a step without an undo", []func(State) Change{claim, done, done, uncertainlyRejected}, 2},
		{"timeouts of a step without an undo", []func(State) Change{claim, done, expired, claim, expired, claim, expired}, 1},
		{"an uncertain rejection of an undo", []func(State) Change{claim, rejected, uncertainUndo}, 0},
		{"timeouts of an undo", []func(State) Change{claim, rejected, expired, claim, expired, claim, expired}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := record(t, tc.events...)
			if !s.ProcessState.NeedsOperator() {
				t.Fatalf("%s: the order is %s", tc.name, s.ProcessState)
			}
			step, undo := s.Keys(tc.step)
			after := apply(t, s, resubmit(s))
			if gotStep, gotUndo := after.Keys(tc.step); gotStep != step || gotUndo != undo {
				t.Errorf("the retry moved the keys from %q, %q to %q, %q", step, undo, gotStep, gotUndo)
			}
		})
	}
}

// A cancel past a step without an undo owes the operators a not-undoable
// alert, through the record's outbox like every alert: AlertPending until a
// delivery is confirmed, watched by the Supervisor meanwhile, whether the
// order is cancelled outright or its compensation runs first.
func TestACancelsNotUndoableAlertGoesThroughTheOutbox(t *testing.T) {
	t.Parallel()
	m := machineOf()
	s := record(t, claim, done, cancelled)
	if s.ProcessState != CompensationPending || !s.AlertPending || !s.InFlight {
		t.Fatalf("after the cancel: %s, alert pending %v, in flight %v", s.ProcessState, s.AlertPending, s.InFlight)
	}
	// Its compensation runs; the alert is still owed when it ends, so the
	// ended record stays watched until the alert goes out.
	s = record(t, claim, done, cancelled, claim)
	end := apply(t, s, undone(s))
	if end.ProcessState != Cancelled || !end.AlertPending || !end.InFlight || !end.CompleteBy.After(end.UpdatedAt) {
		t.Fatalf("after the last undo: %s, alert pending %v, in flight %v, CompleteBy %v", end.ProcessState, end.AlertPending, end.InFlight, end.CompleteBy)
	}
	c, ok := m.Expired(end, end.CompleteBy)
	if !ok || c.Alert != AlertNotUndoable || !c.Fence.AlertPending {
		t.Fatalf("the Supervisor on the ended record that owes its alert: %v, alert %q, fenced on it %v", ok, c.Alert, c.Fence.AlertPending)
	}
	resent := apply(t, end, c)
	sent := apply(t, resent, Machine{}.AlertSent(resent.OrderID, resent.Attempt, resent.ProcessState, resent.UpdatedAt.Add(time.Second)))
	if sent.AlertPending || sent.InFlight || sent.ExpiresAt.IsZero() {
		t.Errorf("confirmed: alert pending %v, in flight %v, expires %v", sent.AlertPending, sent.InFlight, sent.ExpiresAt)
	}
	// Confirmed while the compensation runs, it stays watched for the
	// compensation's sake.
	running := record(t, claim, done, cancelled, claim)
	confirmed := apply(t, running, Machine{}.AlertSent(running.OrderID, running.Attempt, running.ProcessState, running.UpdatedAt.Add(time.Second)))
	if confirmed.AlertPending || !confirmed.InFlight {
		t.Errorf("confirmed during the compensation: alert pending %v, in flight %v", confirmed.AlertPending, confirmed.InFlight)
	}
	// Confirmed between the Scheduler's read and its last undo's write: the
	// ended record leaves the index at its deadline.
	stray := apply(t, confirmed, m.UndoCompleted(confirmed.OrderID, confirmed.StepIndex, confirmed.Attempt, nil, running, "sched", confirmed.UpdatedAt.Add(time.Second)))
	c, ok = m.Expired(stray, stray.CompleteBy)
	if !ok || c.Alert != "" {
		t.Fatalf("the Supervisor on an ended record that owes nothing: %v, alert %q", ok, c.Alert)
	}
	if left := apply(t, stray, c); left.InFlight {
		t.Error("the ended record that owes nothing stays in the index")
	}
	// Cancelled outright (nothing to undo): watched until its deadline.
	nothing := Machine{Def: Definition{Name: "no-undo", Version: 1, Steps: []Step{{Name: "x", Budget: 30 * time.Second}}}, Policy: testPol}
	first := nothing.Claim("o-2", 0, false, "sched", mt0)
	r := first.Patch.Apply(NewState("o-2", nothing.Def, nil, mt0, mt0.Add(time.Minute)))
	c, err := nothing.Cancel(r, mt0.Add(time.Second), mt0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	out := apply(t, r, c)
	if out.ProcessState != Cancelled || !out.AlertPending || !out.InFlight || !out.CompleteBy.Equal(mt0.Add(time.Minute)) || c.Alert != AlertNotUndoable {
		t.Errorf("cancelled outright: %s, alert pending %v, in flight %v, CompleteBy %v, alert %q", out.ProcessState, out.AlertPending, out.InFlight, out.CompleteBy, c.Alert)
	}
}

// A cancel's not-undoable alert still owed when an undo of the rest then
// fails goes out with the compensation-failed alert: the outbox holds one
// alert, and the compensation-failed one must not take its place, or the
// operators who fix the undo are never told of the effect that stays.
func TestAFailedUndoAfterANotUndoableCancelOwesBothAlerts(t *testing.T) {
	t.Parallel()
	m := machineOf()
	running := record(t, claim, done, cancelled, claim)
	c := m.UndoRejected(running.OrderID, running.StepIndex, running.Attempt, "legal_hold: held", false, running, running.UpdatedAt.Add(time.Second))
	failed := apply(t, running, c)
	if failed.ProcessState != CompensationFailed || !failed.AlertPending || !strings.HasPrefix(failed.LastError, NotUndoablePrefix) {
		t.Fatalf("after the failed undo: %s, alert pending %v, last error %q", failed.ProcessState, failed.AlertPending, failed.LastError)
	}
	want := []AlertKind{AlertCompensationFailed, AlertNotUndoable}
	if got := AlertsOf(c.Alert, failed); !slices.Equal(got, want) {
		t.Errorf("the failed undo delivers %v, want %v", got, want)
	}
	// Delivered again by the Supervisor, still both.
	again, ok := m.Expired(failed, failed.CompleteBy)
	if !ok {
		t.Fatal("the Supervisor leaves the record that owes its alerts")
	}
	if got := AlertsOf(again.Alert, apply(t, failed, again)); !slices.Equal(got, want) {
		t.Errorf("the Supervisor delivers %v, want %v", got, want)
	}
	// A failed undo of an order not cancelled, or cancelled with nothing
	// left applied, owes one alert.
	for _, s := range []State{
		{ProcessState: CompensationFailed, LastError: "compensation legal_hold: held"},
		{ProcessState: CompensationFailed, Cancelled: true, LastError: "compensation legal_hold: held"},
	} {
		if got := AlertsOf(AlertCompensationFailed, s); !slices.Equal(got, []AlertKind{AlertCompensationFailed}) {
			t.Errorf("a failed undo (cancelled %v) delivers %v", s.Cancelled, got)
		}
	}
}
