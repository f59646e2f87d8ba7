package workflow

import (
	"fmt"
	"strings"
	"time"
)

// The Supervisor's decisions: a record whose CompleteBy passed (Expired),
// or whose workflow version is not deployed (Stranded); a claimed step or
// undo that failed to run (failed, which a Scheduler's failed dispatch
// shares); and the alert a record owes, and its confirmation.

// Expired decides what the Supervisor does with a record it found with its
// CompleteBy passed; false means nothing (not due after all, or not the
// Supervisor's business). A claimed step or undo counts a failure (see
// failed); an unclaimed one is re-sent to the Scheduler, each further
// requeue waiting twice as long; a Waiting record's wait is over, and its
// step is handed back (waitOver); a record whose alert was not confirmed
// owes it again. The fence re-checks the state, Attempt and CompleteBy seen,
// so of two Supervisors, or a Supervisor and a Scheduler committing just in
// time, exactly one write wins.
func (m Machine) Expired(seen State, now time.Time) (c Change, ok bool) {
	defer m.decided(&c, seen)
	defer m.owed(&c, seen)
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
	case Waiting:
		return m.waitOver(seen, now), true
	case Error, CompensationFailed, Processed, Compensated, Cancelled:
		switch {
		case seen.AlertPending:
			c = m.recovery(seen, now)
			c.Fence.AlertPending = true
			c.Patch.CompleteBy = now.Add(m.Policy.AlertTimeout)
			c.Alert, c.MaxFailures = m.alertOf(seen), m.MaxFailuresOf(seen.StepIndex)
			return c, true
		case seen.InFlight && seen.ProcessState.Ended():
			// Ended while it owed an alert that was confirmed before the
			// ending write (UndoCompleted read the record first): nothing
			// is owed, so it leaves the index.
			c = m.recovery(seen, now)
			c.Patch.InFlight = ptr(false)
			return c, true
		}
	}
	return Change{}, false
}

// owed adds to an Expired change of an in-flight record that still owes an
// alert (a cancel's not-undoable, whose first delivery failed) the alert
// itself, so each recovery of the record delivers it again until it is
// confirmed; a change that raises an alert of its own carries that one.
func (m Machine) owed(c *Change, seen State) {
	if seen.AlertPending && c.Alert == "" && c.OrderID != "" {
		c.Alert, c.MaxFailures = m.alertOf(seen), m.MaxFailuresOf(seen.StepIndex)
	}
}

// StrandedPrefix starts the LastError of an order stopped because its
// workflow version is not deployed (Stranded).
const StrandedPrefix = "workflow version not deployed: "

// Stranded decides what the Supervisor does with a due record pinned to a
// workflow version the deployment does not run: a version removed from the
// catalog while orders were still open on it. It reads only m.Policy (the
// record's Definition is not deployed: Machine{Policy: p}.Stranded) and
// pins the change to the record's own version. No definition can move such
// an order on, so instead of leaving it in flight for every sweep to trip
// over, it stops where it is, in Error (or CompensationFailed when it was
// undoing), and owes an operator an alert (AlertWorkflowMissing): deploy
// the version again, then resubmit the order, which carries on from its
// step. A record that already owes that alert owes it again, as in
// Machine.Expired. The fence is the state, Attempt, CompleteBy and version
// seen, so of two Supervisors exactly one write wins; false means nothing
// is due.
func (m Machine) Stranded(seen State, now time.Time) (c Change, ok bool) {
	p := m.Policy
	if now.Before(seen.CompleteBy) {
		return Change{}, false
	}
	c = Change{OrderID: seen.OrderID, Fence: Fence{In: []ProcessState{seen.ProcessState},
		Attempt: ptr(seen.Attempt), CompleteBy: seen.CompleteBy}}
	c.Patch.Now = now
	c.Patch.CompleteBy = now.Add(p.AlertTimeout)
	switch {
	case seen.ProcessState.InFlight():
		msg := Clip(fmt.Sprintf("%s%s: %s%s%s deploy %s again (shared/catalog/workflows.json), then resubmit it",
			StrandedPrefix, seen.Workflow, strandedAt, seen.Step, strandedEnd, seen.Workflow), MaxErrorBytes)
		pt := &c.Patch
		pt.unlock()
		pt.Notify, pt.AlertPending, pt.LastError = true, ptr(true), ptr(msg)
		sp := pt.step(seen.StepIndex)
		if seen.ProcessState.Undoing() {
			pt.State = CompensationFailed
			sp.Compensation, sp.UndoError = StepFailed, ptr(msg)
		} else {
			pt.State = Error
			sp.State, sp.Error, sp.Finished = StepFailed, ptr(msg), true
		}
		c.Transition, c.Alert = TransitionStranded, AlertWorkflowMissing
	case seen.ProcessState.NeedsOperator() && seen.AlertPending:
		c.Fence.AlertPending = true
		c.Alert = Machine{Policy: p}.alertOf(seen)
	default:
		return Change{}, false
	}
	pin(&c, seen.Workflow)
	// Stranded orders stop where they are: nothing moves them on but an
	// operator, whose change bounds them anew.
	p.retain(&c, seen, 0)
	return c, true
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

// failed counts one failure of the claimed step or undo of seen, under its
// step's policy (policyFor): below the threshold it is handed back after a
// backoff (retry); at the threshold a step whose policy says so waits
// while it has rounds left (wait), and otherwise it is given up
// (stepGivenUp, undoGivenUp). An undo never waits.
func (m Machine) failed(seen State, now time.Time, cause Cause, reason string) Change {
	c := m.recovery(seen, now)
	c.Patch.unlock()
	pol := m.policyFor(seen.StepIndex)
	c.MaxFailures = pol.MaxFailures
	failures := seen.FailureCount + 1
	switch {
	case failures < pol.MaxFailures:
		m.retry(&c, seen, now, failures, reason)
	case seen.ProcessState == Compensating:
		m.undoGivenUp(&c, seen, now, failures, reason)
	case pol.wait > 0 && seen.WaitRound < pol.rounds:
		m.wait(&c, seen, now, pol.wait, reason)
	default:
		m.stepGivenUp(&c, seen, now, cause, failures, reason)
	}
	return c
}

// wait puts the failed step of seen on hold for the extended wait of its
// policy: Waiting until now plus wait, with a fresh failure count and one
// more WaitRound, and a notice to the operators (AlertWaiting, of lower
// severity than an alert), since the order goes on by itself. The record
// stays in the Supervisor's index, which finds it when the wait is over
// (waitOver); a wait longer than an SQS delay costs nothing meanwhile (the
// Timer leaves it to the sweep).
func (m Machine) wait(c *Change, seen State, now time.Time, wait time.Duration, reason string) {
	p := &c.Patch
	sp := p.step(seen.StepIndex)
	p.State, p.Notify = Waiting, true
	p.FailureCount, p.WaitRound, p.LastError = ptr(0), ptr(seen.WaitRound+1), ptr(reason)
	p.CompleteBy = now.Add(wait)
	sp.State, sp.Failed = StepPending, true
	c.Transition, c.Notice = TransitionWaiting, AlertWaiting
}

// waitOver hands the step of a Waiting record whose wait is over back to
// the Scheduler, as a retry does: Pending, to be claimed by ClaimTimeout
// from now.
func (m Machine) waitOver(seen State, now time.Time) Change {
	c := m.recovery(seen, now)
	p := &c.Patch
	p.State, p.Notify = Pending, true
	p.CompleteBy = now.Add(m.Policy.ClaimTimeout)
	p.step(seen.StepIndex).State = StepPending
	c.Transition = TransitionRetried
	c.Handback = &Handback{StepIndex: seen.StepIndex, Reason: "wait-over"}
	return c
}

// retry hands the failed step or undo of seen back to the Scheduler after
// the backoff of its failures.
func (m Machine) retry(c *Change, seen State, now time.Time, failures int, reason string) {
	p := &c.Patch
	k, undoing := seen.StepIndex, seen.ProcessState == Compensating
	sp := p.step(k)
	delay := m.policyFor(k).Backoff(failures)
	p.FailureCount, p.LastError = ptr(failures), ptr(reason)
	if undoing && strings.HasPrefix(seen.LastError, NotUndoablePrefix) {
		// A cancel past the point of no return: LastError names the step
		// whose effect stays, which the order must still say when it ends;
		// the undo's failure goes in its step's history instead.
		p.LastError, sp.UndoError = nil, ptr(reason)
	}
	p.CompleteBy = now.Add(delay + m.Policy.ClaimTimeout)
	if undoing {
		p.State, sp.Compensation, sp.UndoFailed = CompensationPending, StepPending, true
	} else {
		p.State, sp.State, sp.Failed = Pending, StepPending, true
	}
	c.Transition = TransitionRetried
	c.Handback = &Handback{StepIndex: k, Undo: undoing, Delay: delay, Reason: "retry"}
}

// undoGivenUp gives up the undo of seen: CompensationFailed, with an
// alert.
func (m Machine) undoGivenUp(c *Change, seen State, now time.Time, failures int, reason string) {
	p := &c.Patch
	sp := p.step(seen.StepIndex)
	p.Notify = true
	p.CompleteBy = now.Add(m.Policy.AlertTimeout)
	p.State, p.AlertPending, p.FailureCount, p.LastError = CompensationFailed, ptr(true), ptr(failures), ptr(reason)
	sp.Compensation, sp.UndoError, sp.UndoFailed = StepFailed, ptr(reason), true
	if strings.HasPrefix(seen.LastError, NotUndoablePrefix) {
		// As in retry: the step whose effect stays is still named.
		p.LastError = nil
	}
	c.Transition, c.Alert = TransitionCompensationFailed, AlertCompensationFailed
}

// stepGivenUp gives up the step of seen, as Definition.StopAt decides: into
// its compensation when something may need undoing and all of it can be,
// else into Error with an alert. A compensation started alerts only when a
// refused dispatch caused it (the queue needs fixing).
func (m Machine) stepGivenUp(c *Change, seen State, now time.Time, cause Cause, failures int, reason string) {
	p := &c.Patch
	k := seen.StepIndex
	sp := p.step(k)
	p.Notify = true
	p.CompleteBy = now.Add(m.Policy.AlertTimeout)
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
		return
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
}

// recovery is the Supervisor's (or a failed dispatch's) change of seen:
// fenced on the state, Attempt and CompleteBy it saw.
func (m Machine) recovery(seen State, now time.Time) Change {
	c := Change{OrderID: seen.OrderID, Fence: Fence{In: []ProcessState{seen.ProcessState},
		Attempt: ptr(seen.Attempt), CompleteBy: seen.CompleteBy}}
	c.Patch.Now = now
	return c
}

// alertOf is the alert a record that needs an operator owes. A step that
// stopped before its threshold (its own, policyFor) stopped on a
// permanent fault.
func (m Machine) alertOf(s State) AlertKind {
	switch {
	case strings.HasPrefix(s.LastError, StrandedPrefix):
		return AlertWorkflowMissing
	case s.ProcessState == CompensationFailed:
		// Its LastError may still name a step whose effect stays (a
		// cancel's); what the operator must fix first is the undo.
		return AlertCompensationFailed
	case strings.HasPrefix(s.LastError, NotUndoablePrefix):
		return AlertNotUndoable
	case strings.HasPrefix(s.LastError, DispatchFailurePrefix):
		return AlertDispatchFailed
	case s.FailureCount < m.policyFor(s.StepIndex).MaxFailures:
		return AlertPermanentFailure
	}
	return AlertRetriesExhausted
}

// AlertsOf is what an alert of kind a record owes goes out as, st being
// the record as the change that raised it left it: the alert itself, and
// with a compensation-failed alert of an order cancelled past a step
// without an undo (its LastError names that step) the not-undoable alert
// too. The record's outbox holds one alert; without the second, a failed
// undo before the cancel's alert went out would leave the operators
// never told of the effect that stays (their fix of the undo ends the order
// Cancelled, owing nothing).
func AlertsOf(kind AlertKind, st State) []AlertKind {
	if kind == AlertCompensationFailed && st.Cancelled && strings.HasPrefix(st.LastError, NotUndoablePrefix) {
		return []AlertKind{kind, AlertNotUndoable}
	}
	return []AlertKind{kind}
}

// Cause says why a claimed step or undo failed to run.
type Cause string

const (
	// CauseTimeout: CompleteBy passed without a committed reply.
	CauseTimeout Cause = "timeout"
	// CauseDispatch: the request could not be sent to its agent's queue.
	CauseDispatch Cause = "dispatch"
)

// AlertSent confirms that the alert a record in state owed at attempt went
// out. A record that waits for a person (Error, CompensationFailed) leaves
// the Supervisor's index, and since a person may take any time its orders
// item is kept for good with it (KeepOrder; see retention.go); one that
// ended for good (Cancelled past a step without an undo) leaves the index
// and keeps its TTLs; one still in flight (its compensation runs) stays
// watched. A failed fence means another actor confirmed it first, or the
// record moved on (it then owes the alert still, and delivers it again).
// It reads neither Def nor Policy, and is not pinned to a version (no
// Fence.Workflow): the deliverer confirms the alerts of every version, and
// the state and Attempt fence already name the one record that owes this
// alert.
func (Machine) AlertSent(orderID string, attempt int, state ProcessState, now time.Time) Change {
	c := Change{OrderID: orderID,
		Fence: Fence{In: []ProcessState{state}, AlertPending: true, Attempt: ptr(attempt)}}
	c.Patch = Patch{Now: now, AlertPending: ptr(false)}
	switch {
	case state.NeedsOperator():
		c.Patch.InFlight, c.Patch.KeepOrder, c.Patch.Seal = ptr(false), true, true
	case !state.InFlight():
		c.Patch.InFlight = ptr(false)
	}
	return c
}
