package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Machine is the state machine of an order: a workflow definition and the
// policy that times it. Every event that changes a state record is one of
// its methods, which returns the whole Change, decided: nothing else in the
// system decides a transition.
//
// Each method names the actor that raises its event:
//
//   - Submission: Accept (the new record, not a Change).
//   - Scheduler: Claim, StepCompleted, StepRejected, UndoCompleted,
//     UndoRejected, DispatchFailed.
//   - Supervisor: Expired; Stranded for a record pinned to a version the
//     deployment does not run.
//   - the alert deliverer (Scheduler, Supervisor, operators' API):
//     AlertSent.
//   - operators: Cancel, Resubmit.
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
		p.MoveTo, p.FailureCount = &StepRef{next, m.Def.Steps[next].Name}, ptr(0)
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
	c.Transition, c.Alert = TransitionFailed, AlertPermanentFailure
	if len(stop.Residue) > 0 {
		p.LastError = ptr(m.Def.notUndoable(k, stop.Residue, msg))
		c.Alert = AlertNotUndoable
	}
	return c
}

// UndoCompleted commits the successful reply of attempt of the undo of step
// k: the next undo (last step first) is claimed in the same write and
// dispatched, or, after the last (LastUndo), the order is Compensated, or
// Cancelled when a cancel started its compensation. cancelled is the
// record's Cancelled, which only the last undo needs (the Scheduler reads
// the record for it then): a cancelled order may have left a step without
// an undo applied (Machine.Cancel), so it is never called Compensated.
func (m Machine) UndoCompleted(orderID string, k, attempt int, output json.RawMessage, cancelled bool, owner string, now time.Time) (c Change) {
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
	p.State, p.InFlight = Compensated, ptr(false)
	if cancelled {
		p.State = Cancelled
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
func (m Machine) UndoRejected(orderID string, k, attempt int, msg string, now time.Time) (c Change) {
	defer m.decided(&c, State{})
	c = reply(orderID, Compensating, k, attempt, now)
	c.Transition, c.Alert = TransitionCompensationFailed, AlertCompensationFailed
	p := &c.Patch
	p.State, p.AlertPending, p.LastError = CompensationFailed, ptr(true), ptr(msg)
	p.CompleteBy = now.Add(m.Policy.AlertTimeout)
	p.unlock()
	sp := p.step(k)
	sp.Compensation, sp.UndoError = StepFailed, ptr(msg)
	return c
}

// AlertSent confirms that the alert of attempt went out, which takes the
// record out of the Supervisor's index. The record now waits for a person,
// who may take any time: its orders item is kept for good with it
// (KeepOrder; see retention.go). A failed fence means another actor
// confirmed it first, or an operator acted already. It reads neither Def
// nor Policy, and is not pinned to a version (no Fence.Workflow): the
// deliverer confirms the alerts of every version, and the Attempt fence
// already names the one record state that owes this alert.
func (Machine) AlertSent(orderID string, attempt int, now time.Time) Change {
	c := Change{OrderID: orderID,
		Fence: Fence{In: []ProcessState{Error, CompensationFailed}, AlertPending: true, Attempt: ptr(attempt)}}
	c.Patch = Patch{Now: now, AlertPending: ptr(false), InFlight: ptr(false), KeepOrder: true, Seal: true}
	return c
}

// Expired decides what the Supervisor does with a record it found with its
// CompleteBy passed; false means nothing (not due after all, or not the
// Supervisor's business). A claimed step or undo counts a failure (see
// failed); an unclaimed one is re-sent to the Scheduler, each further
// requeue waiting twice as long; a record whose alert was not confirmed
// owes it again. The fence re-checks the state, Attempt and CompleteBy seen,
// so of two Supervisors, or a Supervisor and a Scheduler committing just in
// time, exactly one write wins.
func (m Machine) Expired(seen State, now time.Time) (c Change, ok bool) {
	defer m.decided(&c, seen)
	if now.Before(seen.CompleteBy) {
		return Change{}, false
	}
	switch seen.ProcessState {
	case Processing, Compensating:
		return m.failed(seen, now, CauseTimeout, TimeoutMessage(seen)), true
	case Pending, CompensationPending:
		c = m.recovery(seen, now)
		c.Transition = TransitionRequeued
		c.Patch.Requeue = true
		c.Patch.CompleteBy = now.Add(m.Policy.requeueWait(seen.Requeues))
		c.Handback = &Handback{StepIndex: seen.StepIndex, Undo: seen.ProcessState.Undoing(), Reason: "requeue"}
		return c, true
	case Error, CompensationFailed:
		if !seen.AlertPending {
			return Change{}, false
		}
		c = m.recovery(seen, now)
		c.Fence.AlertPending = true
		c.Patch.CompleteBy = now.Add(m.Policy.AlertTimeout)
		c.Alert = m.Policy.alertOf(seen)
		return c, true
	}
	return Change{}, false
}

// DispatchFailed decides for a record a Scheduler has just claimed but
// whose request it could not send. A failed dispatch counts as a failure of
// the step (or undo), exactly like a timeout, so a queue that keeps refusing
// (a revoked permission or key, a deleted queue) ends in a give-up with an
// alert instead of an endless claim and re-send; a short outage is retried
// after the same backoff and recovers. cause is the send's error, which the
// record keeps as LastError.
func (m Machine) DispatchFailed(claimed State, now time.Time, cause string) (c Change) {
	defer m.decided(&c, claimed)
	what := "step " + claimed.Step
	if claimed.ProcessState == Compensating {
		what = undoDispatch + "step " + claimed.Step
	}
	reason := Clip(fmt.Sprintf("%s%s attempt %d failed: %s", DispatchFailurePrefix, what, claimed.Attempt, cause), MaxErrorBytes)
	return m.failed(claimed, now, CauseDispatch, reason)
}

// Cancel stops an order still going forward, or closes one in Error,
// undoing whatever may have been applied and can be (Definition.StopAt with
// StopCancel): its compensation waits for a claim until claimBy, or it is
// Cancelled outright; a compensation a cancel started ends Cancelled too
// (UndoCompleted). A step that may have been applied and has no undo is
// named in LastError and told to the operators at once (Notice). It takes
// a new Attempt, so the reply of an agent still working on the step is
// refused as stale. An order in Error keeps its failed step's history and
// LastError, which named such a step already; its alert is no longer owed.
func (m Machine) Cancel(seen State, now, claimBy time.Time) (c Change, err error) {
	defer m.decided(&c, seen)
	if !CanCancel(seen) {
		return Change{}, fmt.Errorf("cancel %s: %w", seen.OrderID, ErrNotCancellable)
	}
	c = Change{OrderID: seen.OrderID, Transition: TransitionCancelled,
		Fence: Fence{In: []ProcessState{seen.ProcessState}, Attempt: ptr(seen.Attempt)}}
	p := &c.Patch
	p.Now, p.Notify, p.Cancel, p.NextAttempt = now, true, true, true
	stop := m.Def.StopAt(seen.StepIndex, Uncertain(seen), StopCancel)
	if seen.ProcessState == Error {
		p.AlertPending = ptr(false)
	} else {
		msg := CancelledPrefix + seen.Step
		stopStep(p, seen.StepIndex, StepCancelled, msg)
		if len(stop.Residue) > 0 {
			p.LastError = ptr(m.Def.notUndoable(seen.StepIndex, stop.Residue, msg))
		}
	}
	if len(stop.Residue) > 0 {
		c.Notice = AlertNotUndoable
	}
	if stop.UndoFrom < 0 {
		p.State, p.InFlight = stop.Terminal, ptr(false)
		return c, nil
	}
	if stop.UndoFrom >= len(seen.Steps) {
		return Change{}, fmt.Errorf("cancel %s: step %d to undo is not in its history", seen.OrderID, stop.UndoFrom)
	}
	startUndo(p, stop.UndoFrom, m.Def.Steps[stop.UndoFrom].Name)
	// An Error record whose alert went out has left the Supervisor's
	// index; its compensation must be watched again.
	p.CompleteBy, p.InFlight = claimBy, ptr(true)
	c.Handback = &Handback{StepIndex: stop.UndoFrom, Undo: true, Reason: "cancelled"}
	return c, nil
}

// Resubmit is an operator's restart of a stopped order: from its failed step
// for Error, from its failed undo for CompensationFailed, with a fresh
// FailureCount. The fence is the state and Attempt seen, so of two operators
// resubmitting at once exactly one wins.
func (m Machine) Resubmit(seen State, now time.Time) (c Change, err error) {
	defer m.decided(&c, seen)
	c = Change{OrderID: seen.OrderID, Transition: TransitionResubmitted,
		Fence: Fence{In: []ProcessState{seen.ProcessState}, Attempt: ptr(seen.Attempt)}}
	p := &c.Patch
	sp := p.step(seen.StepIndex)
	switch seen.ProcessState {
	case Error:
		p.State, sp.State = Pending, StepPending
	case CompensationFailed:
		p.State, sp.Compensation = CompensationPending, StepPending
	default:
		return Change{}, fmt.Errorf("order %s is %s: %w", seen.OrderID, seen.ProcessState, ErrNotResubmittable)
	}
	p.Now, p.Notify, p.Resubmit = now, true, true
	p.FailureCount, p.AlertPending, p.InFlight = ptr(0), ptr(false), ptr(true)
	p.CompleteBy = now.Add(m.Policy.ClaimTimeout)
	c.Handback = &Handback{StepIndex: seen.StepIndex, Undo: p.State == CompensationPending, Reason: "resubmitted"}
	return c, nil
}

// failed counts one failure of the claimed step or undo of seen: below the
// threshold it is handed back after a backoff; at the threshold a forward
// step gives up into its compensation when something may need undoing,
// else into Error; an undo gives up into CompensationFailed. Each give-up
// owes an operator an alert, except one that starts a compensation, which
// alerts only when a refused dispatch caused it (the queue needs fixing).
func (m Machine) failed(seen State, now time.Time, cause Cause, reason string) Change {
	c := m.recovery(seen, now)
	p := &c.Patch
	k, undoing := seen.StepIndex, seen.ProcessState == Compensating
	failures := seen.FailureCount + 1
	p.unlock()
	sp := p.step(k)
	if failures < m.Policy.MaxFailures {
		delay := m.Policy.Backoff(failures)
		p.FailureCount, p.LastError = ptr(failures), ptr(reason)
		p.CompleteBy = now.Add(delay + m.Policy.ClaimTimeout)
		if undoing {
			p.State, sp.Compensation, sp.UndoFailed = CompensationPending, StepPending, true
		} else {
			p.State, sp.State, sp.Failed = Pending, StepPending, true
		}
		c.Transition = TransitionRetried
		c.Handback = &Handback{StepIndex: k, Undo: undoing, Delay: delay, Reason: "retry"}
		return c
	}
	p.Notify = true
	p.CompleteBy = now.Add(m.Policy.AlertTimeout)
	switch {
	case undoing:
		p.State, p.AlertPending, p.FailureCount, p.LastError = CompensationFailed, ptr(true), ptr(failures), ptr(reason)
		sp.Compensation, sp.UndoError, sp.UndoFailed = StepFailed, ptr(reason), true
		c.Transition, c.Alert = TransitionCompensationFailed, AlertCompensationFailed
		return c
	}
	reasonStop := StopTimeouts
	kind := AlertRetriesExhausted
	if cause == CauseDispatch {
		reasonStop, kind = StopDispatch, AlertDispatchFailed
	}
	sp.Failed = true
	stop := m.Def.StopAt(k, Uncertain(seen), reasonStop)
	if undo := stop.UndoFrom; undo >= 0 {
		stopStep(p, k, StepFailed, reason)
		startUndo(p, undo, m.Def.Steps[undo].Name)
		p.CompleteBy = now.Add(m.Policy.ClaimTimeout)
		c.Transition = TransitionCompensating
		c.Handback = &Handback{StepIndex: undo, Undo: true, Reason: "give-up"}
		if cause == CauseDispatch {
			c.Notice = AlertDispatchFailed
		}
		return c
	}
	failStep(p, k, reason)
	p.FailureCount = ptr(failures)
	c.Transition, c.Alert = TransitionGaveUp, kind
	if len(stop.Residue) > 0 {
		p.LastError = ptr(m.Def.notUndoable(k, stop.Residue, reason))
		c.Alert = AlertNotUndoable
		if cause == CauseDispatch {
			// The queue still needs fixing, whatever the order needs.
			c.Notice = AlertDispatchFailed
		}
	}
	return c
}

// recovery is the Supervisor's (or a failed dispatch's) change of seen:
// fenced on the state, Attempt and CompleteBy it saw.
func (m Machine) recovery(seen State, now time.Time) Change {
	c := Change{OrderID: seen.OrderID, Fence: Fence{In: []ProcessState{seen.ProcessState},
		Attempt: ptr(seen.Attempt), CompleteBy: seen.CompleteBy}}
	c.Patch.Now = now
	return c
}

// alertOf is the alert a record that needs an operator owes.
func (p Policy) alertOf(s State) AlertKind {
	switch {
	case strings.HasPrefix(s.LastError, StrandedPrefix):
		return AlertWorkflowMissing
	case strings.HasPrefix(s.LastError, NotUndoablePrefix):
		return AlertNotUndoable
	case s.ProcessState == CompensationFailed:
		return AlertCompensationFailed
	case strings.HasPrefix(s.LastError, DispatchFailurePrefix):
		return AlertDispatchFailed
	case s.FailureCount < p.MaxFailures:
		return AlertPermanentFailure
	}
	return AlertRetriesExhausted
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
	p.State, p.MoveTo, p.FailureCount = CompensationPending, &StepRef{i, step}, ptr(0)
	p.step(i).Compensation = StepPending
}

// failStep moves a record to Error with its alert pending; it stays in the
// Supervisor's index, so an alert lost to a crash is still sent.
func failStep(p *Patch, k int, msg string) {
	stopStep(p, k, StepFailed, msg)
	p.State, p.AlertPending = Error, ptr(true)
}
