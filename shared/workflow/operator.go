package workflow

import (
	"fmt"
	"strings"
	"time"
)

// The operators' decisions: cancel an order, resubmit a stopped one.

// ErrNotCancellable and ErrNotResubmittable are returned for a request the
// record's state does not allow.
var (
	ErrNotCancellable   = fmt.Errorf("order cannot be cancelled in its state: %w", ErrConflict)
	ErrNotResubmittable = fmt.Errorf("order can only be resubmitted from Error, Waiting or CompensationFailed: %w", ErrConflict)
)

// CanCancel reports whether a cancel request applies to a record: an order
// still going forward (Waiting included), or one in Error, which may hold
// applied effects (a step that cannot be undone, or a record stopped by an
// older release) that a cancel undoes.
func CanCancel(s State) bool {
	switch s.ProcessState {
	case Pending, Processing, Waiting, Error:
		return true
	}
	return false
}

// Cancel stops an order still going forward, or closes one in Error,
// undoing whatever may have been applied and can be (Definition.StopAt with
// StopCancel): its compensation waits for a claim until claimBy, or it is
// Cancelled outright; a compensation a cancel started ends Cancelled too
// (UndoCompleted). A step that may have been applied and has no undo is
// named in LastError and owed to the operators as a not-undoable alert,
// through the record's outbox like every alert (AlertPending): the
// canceller delivers it at once, and the Supervisor again while it is
// unconfirmed, so a publish SNS refused is not lost. A record Cancelled
// outright while it owes that alert stays in the Supervisor's index until
// the alert is confirmed, with claimBy as its deadline. It takes a new
// Attempt, so the reply of an agent still working on the step is refused
// as stale. An order in Error keeps its failed step's history and
// LastError, which named such a step already; its own alert is no longer
// owed, the cancel's is.
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
		switch {
		case len(stop.Residue) == 0:
		case strings.HasPrefix(seen.LastError, NotUndoablePrefix):
			// Written again, so the alert the cancel owes names what
			// stays applied whatever the record says now.
			p.LastError = ptr(seen.LastError)
		default:
			// Stopped for another reason (its version not deployed).
			p.LastError = ptr(m.Def.notUndoable(seen.StepIndex, stop.Residue, seen.LastError))
		}
	} else {
		msg := CancelledPrefix + seen.Step
		stopStep(p, seen.StepIndex, StepCancelled, msg)
		if len(stop.Residue) > 0 {
			p.LastError = ptr(m.Def.notUndoable(seen.StepIndex, stop.Residue, msg))
		}
	}
	owes := len(stop.Residue) > 0
	if owes {
		p.AlertPending = ptr(true)
		c.Alert, c.MaxFailures = AlertNotUndoable, m.MaxFailuresOf(seen.StepIndex)
	}
	if stop.UndoFrom < 0 {
		p.State, p.InFlight = stop.Terminal, ptr(owes)
		if owes {
			p.CompleteBy = claimBy
		}
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
// for Error, from its failed undo for CompensationFailed, or at once from
// the step a Waiting order waits to retry, with a fresh FailureCount and
// WaitRound (its step gets its whole retry policy again). The fence is the
// state and Attempt seen, so of two operators resubmitting at once exactly
// one wins, and a wait the Supervisor ended first refuses it.
//
// Which key the restart runs under follows from the last outcome of the
// step (or undo): a certain rejection (StepRecord.Refused) starts the
// next round of its key (StepKey, UndoKey), since its service remembers the
// rejection under the old key and would only replay it, while it applied
// nothing under it; any other outcome (a timeout, a failed dispatch, an
// uncertain rejection) keeps the key, under which an effect that may have
// been applied is replayed, never applied twice.
func (m Machine) Resubmit(seen State, now time.Time) (c Change, err error) {
	defer m.decided(&c, seen)
	c = Change{OrderID: seen.OrderID, Transition: TransitionResubmitted,
		Fence: Fence{In: []ProcessState{seen.ProcessState}, Attempt: ptr(seen.Attempt)}}
	p := &c.Patch
	sp := p.step(seen.StepIndex)
	var last StepRecord
	if k := seen.StepIndex; k >= 0 && k < len(seen.Steps) {
		last = seen.Steps[k]
	}
	switch seen.ProcessState {
	case Error, Waiting:
		p.State, sp.State = Pending, StepPending
		if last.Refused {
			sp.Rekey, sp.Refused = true, ptr(false)
		}
	case CompensationFailed:
		p.State, sp.Compensation = CompensationPending, StepPending
		if last.UndoRefused {
			sp.UndoRekey, sp.UndoRefused = true, ptr(false)
		}
	default:
		return Change{}, fmt.Errorf("order %s is %s: %w", seen.OrderID, seen.ProcessState, ErrNotResubmittable)
	}
	// A new Attempt, as a cancel takes: a decision made on the record
	// before this one (a second operator's, a slow Supervisor's) fails its
	// fence even once the record is back in the state it saw.
	p.Now, p.Notify, p.Resubmit, p.NextAttempt = now, true, true, true
	p.FailureCount, p.WaitRound, p.AlertPending, p.InFlight = ptr(0), ptr(0), ptr(false), ptr(true)
	p.CompleteBy = now.Add(m.Policy.ClaimTimeout)
	c.Handback = &Handback{StepIndex: seen.StepIndex, Undo: p.State == CompensationPending, Reason: "resubmitted"}
	return c, nil
}
