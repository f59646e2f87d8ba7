package workflow

import (
	"encoding/json"
	"strings"
	"time"
)

// Machine is the state machine of an order: a workflow definition and the
// policy that times it. Every event that changes a state record is one of
// its methods, which returns the whole Change, decided: nothing else in the
// system decides a transition.
//
// Its methods, by the actor that raises the event:
//
//   - Submission: Accept (the new record, not a Change).
//   - Scheduler: Claim, StepCompleted, StepRejected, UndoCompleted,
//     UndoRejected (this file); DispatchFailed (recovery.go, as it counts
//     a failure the way a timeout does).
//   - Supervisor: Expired; Stranded for a record pinned to a version the
//     deployment does not run (recovery.go).
//   - the alert deliverer (Scheduler, Supervisor, operators' API):
//     AlertSent (recovery.go).
//   - operators: Cancel, Resubmit (operator.go).
//
// A Machine resolved for the record's version (Catalog.Machine) decides
// all of them. Two need less, for callers that have no Definition: Stranded
// reads only the Policy, since the record's version is not deployed
// (Machine{Policy: p}.Stranded), and AlertSent reads neither, since the
// deliverer confirms the alerts of every version (Machine{}.AlertSent).
type Machine struct {
	Def    Definition
	Policy Policy
}

// decided is the last step of every method above that returns a Change
// (deferred, so it sees the Change returned): the change is pinned to the
// version that decided it (pin), and carries what it does to the TTLs
// (Policy.retain). seen is the record the change was decided on, when
// there was one (zero for an agent's reply, which the Scheduler commits
// without reading).
func (m Machine) decided(c *Change, seen State) {
	pin(c, m.Def.ID())
	m.Policy.retain(c, seen, m.Def.LongestRun())
}

// pin fences c on the workflow version id, so a record pinned to another
// version refuses it (Fence.Workflow): a message naming another version
// than its order's is never carried out by the wrong definition. It is the
// one place that sets Fence.Workflow. A zero Change (nothing to do) stays
// zero.
func pin(c *Change, id string) {
	if c.OrderID != "" {
		c.Fence.Workflow = id
	}
}

// Claim is a Scheduler taking step k of an order, or with undo its
// compensation, while it waits unclaimed; the written record is dispatched.
// A failed fence means another Scheduler has it, or the message is stale.
func (m Machine) Claim(orderID string, k int, undo bool, owner string, now time.Time) (c Change) {
	defer m.decided(&c, State{})
	want := Pending
	if undo {
		want = CompensationPending
	}
	c = Change{OrderID: orderID, Transition: TransitionClaimed, Dispatch: true,
		Fence: Fence{In: []ProcessState{want}, Unlocked: true, StepIndex: ptr(k)}}
	c.Patch.Now = now
	if undo {
		m.claimUndo(&c.Patch, k, owner, now)
	} else {
		m.claimStep(&c.Patch, k, owner, now)
	}
	return c
}

// Accept is the record a new order starts as: its first step already
// claimed by owner, as a Scheduler's Claim would leave it (Processing,
// attempt 1, CompleteBy one step lease away). The Submission writes it in
// the order's own transaction and dispatches the step itself, so the first
// step needs no Schedule message and no claim write. Its EventSeq is 1, so
// the client is told "accepted" (StatusOf) until the step completes. Its
// OpenUntil is the bound of its orders item's TTL (see retention.go).
func (m Machine) Accept(orderID string, input json.RawMessage, owner string, now time.Time) State {
	c := m.Claim(orderID, 0, false, owner, now)
	st := c.Patch.Apply(NewState(orderID, m.Def, input, now, now))
	st.OpenUntil = m.Policy.openUntil(now, m.Def.LongestRun())
	return st
}

// StepCompleted commits the successful reply of attempt of step k: its
// output is kept and the next step claimed in the same write (then
// dispatched), or, after the last step, the order is Processed.
func (m Machine) StepCompleted(orderID string, k, attempt int, output json.RawMessage, owner string, now time.Time) (c Change) {
	defer m.decided(&c, State{})
	c = reply(orderID, Processing, k, attempt, now)
	p := &c.Patch
	sp := p.step(k)
	sp.State, sp.Finished, sp.Output = StepSucceeded, true, output
	if next := k + 1; next < len(m.Def.Steps) {
		p.MoveTo, p.FailureCount, p.WaitRound = &StepRef{next, m.Def.Steps[next].Name}, ptr(0), ptr(0)
		m.claimStep(p, next, owner, now)
		c.Transition, c.Dispatch = TransitionStepCompleted, true
		return c
	}
	p.State, p.InFlight = Processed, ptr(false)
	p.unlock()
	c.Transition = TransitionProcessed
	return c
}

// StepRejected commits a permanent fault of attempt of step k with the
// message msg; uncertain says the fault does not prove that nothing was
// applied (the agent's Fault.Uncertain). The order stops as
// Definition.StopAt decides: its compensation starts, claimed in the same
// write and dispatched, when anything needs undoing and all of it can be;
// else the order is in Error and owes an alert. Step k itself is undone too
// when it can be: the fence admits only the record whose claim of step k
// this attempt was, so the step was dispatched, and the plan needs no read
// of the record.
func (m Machine) StepRejected(orderID string, k, attempt int, msg string, uncertain bool, owner string, now time.Time) (c Change) {
	defer m.decided(&c, State{})
	c = reply(orderID, Processing, k, attempt, now)
	p := &c.Patch
	p.step(k).Refused = ptr(!uncertain)
	stop := m.Def.StopAt(k, uncertain, StopPermanent)
	if stop.UndoFrom >= 0 {
		stopStep(p, k, StepFailed, msg)
		startUndo(p, stop.UndoFrom, m.Def.Steps[stop.UndoFrom].Name)
		m.claimUndo(p, stop.UndoFrom, owner, now)
		c.Transition, c.Dispatch = TransitionCompensating, true
		return c
	}
	failStep(p, k, msg)
	p.CompleteBy = now.Add(m.Policy.AlertTimeout)
	c.Transition, c.Alert, c.MaxFailures = TransitionFailed, AlertPermanentFailure, m.MaxFailuresOf(k)
	if len(stop.Residue) > 0 {
		p.LastError = ptr(m.Def.notUndoable(k, stop.Residue, msg))
		c.Alert = AlertNotUndoable
	}
	return c
}

// UndoCompleted commits the successful reply of attempt of the undo of step
// k: the next undo (last step first) is claimed in the same write and
// dispatched, or, after the last (LastUndo), the order is Compensated, or
// Cancelled when a cancel started its compensation. seen is the record as
// the Scheduler read it for the last undo (zero for any other): a
// cancelled order may have left a step without an undo applied
// (Machine.Cancel), so it is never called Compensated, and one that still
// owes its alert stays in the Supervisor's index until the alert is
// confirmed, AlertTimeout from now.
func (m Machine) UndoCompleted(orderID string, k, attempt int, output json.RawMessage, seen State, owner string, now time.Time) (c Change) {
	defer m.decided(&c, State{})
	c = reply(orderID, Compensating, k, attempt, now)
	p := &c.Patch
	sp := p.step(k)
	sp.Compensation, sp.Undone, sp.UndoOutput = StepSucceeded, true, output
	if next := m.Def.NextCompensation(k); next >= 0 {
		startUndo(p, next, m.Def.Steps[next].Name)
		m.claimUndo(p, next, owner, now)
		c.Transition, c.Dispatch = TransitionUndone, true
		return c
	}
	p.State, p.InFlight = Compensated, ptr(seen.AlertPending)
	if seen.Cancelled {
		p.State = Cancelled
	}
	if seen.AlertPending {
		p.CompleteBy = now.Add(m.Policy.AlertTimeout)
	}
	p.unlock()
	c.Transition = TransitionCompensated
	return c
}

// LastUndo reports whether the undo of step k is the last of its
// compensation: its success ends the order.
func (m Machine) LastUndo(k int) bool { return m.Def.NextCompensation(k) < 0 }

// UndoRejected commits a permanent fault of attempt of the undo of step k:
// the order is CompensationFailed and owes an alert; a person must act.
// uncertain says the refusal does not prove the undo applied nothing (the
// agent's Fault.Uncertain): an operator's retry then keeps its key. seen is
// the record as the Scheduler read it before the commit: one that names a
// step whose effect stays (a cancel past a step without an undo) keeps
// that LastError.
func (m Machine) UndoRejected(orderID string, k, attempt int, msg string, uncertain bool, seen State, now time.Time) (c Change) {
	defer m.decided(&c, State{})
	c = reply(orderID, Compensating, k, attempt, now)
	c.Transition, c.Alert, c.MaxFailures = TransitionCompensationFailed, AlertCompensationFailed, m.MaxFailuresOf(k)
	p := &c.Patch
	p.State, p.AlertPending, p.LastError = CompensationFailed, ptr(true), ptr(msg)
	if strings.HasPrefix(seen.LastError, NotUndoablePrefix) {
		// A cancel past the point of no return: LastError names the step
		// whose effect stays, which the order must say however it ends;
		// the undo's failure is in its step's history.
		p.LastError = nil
	}
	p.CompleteBy = now.Add(m.Policy.AlertTimeout)
	p.unlock()
	sp := p.step(k)
	sp.Compensation, sp.UndoError, sp.UndoRefused = StepFailed, ptr(msg), ptr(!uncertain)
	return c
}

// reply starts the commit of a reply: its fence (the record is still in
// state at step k under attempt, and its CompleteBy has not passed), and a
// patch that changes the client's status.
func reply(orderID string, state ProcessState, k, attempt int, now time.Time) Change {
	return Change{OrderID: orderID,
		Fence: Fence{In: []ProcessState{state}, Attempt: ptr(attempt), StepIndex: ptr(k), LiveAt: now},
		Patch: Patch{Now: now, Notify: true}}
}

// claimStep claims step k for owner until its lease runs out (the queue
// allowance plus the budget), under a new Attempt.
func (m Machine) claimStep(p *Patch, k int, owner string, now time.Time) {
	p.State, p.CompleteBy, p.NextAttempt = Processing, now.Add(m.Def.Steps[k].Lease()), true
	p.lock(owner)
	sp := p.step(k)
	sp.State, sp.Claimed = StepProcessing, true
}

// claimUndo claims the undo of step k, as claimStep claims a step.
func (m Machine) claimUndo(p *Patch, k int, owner string, now time.Time) {
	p.State, p.CompleteBy, p.NextAttempt = Compensating, now.Add(m.Def.Steps[k].Lease()), true
	p.lock(owner)
	sp := p.step(k)
	sp.Compensation, sp.UndoClaimed = StepProcessing, true
}

// stopStep ends the forward path at step k: its history says how, and the
// record keeps the reason as LastError.
func stopStep(p *Patch, k int, state StepState, msg string) {
	p.LastError = ptr(msg)
	p.unlock()
	sp := p.step(k)
	sp.State, sp.Error, sp.Finished = state, ptr(msg), true
}

// startUndo moves the record to the undo of step i, unclaimed.
func startUndo(p *Patch, i int, step string) {
	p.State, p.MoveTo, p.FailureCount, p.WaitRound = CompensationPending, &StepRef{i, step}, ptr(0), ptr(0)
	p.step(i).Compensation = StepPending
}

// failStep moves a record to Error with its alert pending; it stays in the
// Supervisor's index, so an alert lost to a crash is still sent.
func failStep(p *Patch, k int, msg string) {
	stopStep(p, k, StepFailed, msg)
	p.State, p.AlertPending = Error, ptr(true)
}
