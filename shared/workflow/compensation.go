package workflow

import "strings"

// The compensation plan is pure: steps run in order, so when an order stops
// at step k every step before k has succeeded, and what must be undone
// follows from the definition alone. Compensations run last step first.

// FirstCompensation returns the first step to undo when the order stops at
// step k, or -1 when nothing needs undoing. uncertain says whether step k's
// own effect may have been applied: it timed out (an Agent may have applied
// it and died, or may still be calling), or the order was cancelled while it
// ran. A compensation of an effect that was never applied is a no-op for the
// remote, which also refuses the effect from then on, so undoing an uncertain
// step is always safe.
func (d Definition) FirstCompensation(k int, uncertain bool) int {
	if k < 0 || k >= len(d.Steps) {
		return -1
	}
	if uncertain && d.Steps[k].Compensable {
		return k
	}
	return d.NextCompensation(k)
}

// NextCompensation returns the step to undo after step i, or -1 when none
// is left.
func (d Definition) NextCompensation(i int) int {
	for j := min(i, len(d.Steps)) - 1; j >= 0; j-- {
		if d.Steps[j].Compensable {
			return j
		}
	}
	return -1
}

// Uncertain reports whether the effect of the record's current step may have
// been applied when the order stops there: whenever the step was ever
// claimed. A claimed step's request may have been sent (even a send that
// reported failure may have been delivered), SQS delivers at least once, and
// a copy of the request can reach the remote after a rejection: a real
// idempotent service does not always remember a rejection under its key. So
// no outcome of a dispatched step is proof that nothing was applied, and the
// step is undone with the others; its undo also makes the remote refuse the
// key from then on, so a late copy can no longer apply it. Why the order
// stops does not change this. A record without its step history (an index's
// projection) counts as uncertain.
func Uncertain(s State) bool {
	i := s.StepIndex
	if i < 0 || i >= len(s.Steps) {
		return true
	}
	return s.Steps[i].Attempts > 0
}

// StopReason says why a workflow stops going forward.
type StopReason string

const (
	// StopPermanent: an Agent reported a permanent fault.
	StopPermanent StopReason = "permanent"
	// StopTimeouts: the step timed out MaxFailures times.
	StopTimeouts StopReason = "timeouts"
	// StopCancel: a client or operator cancelled the order.
	StopCancel StopReason = "cancel"
	// StopDispatch: the step's request could not be sent MaxFailures times.
	StopDispatch StopReason = "dispatch"
)

// Stop is how a record leaves the forward path: where its compensation
// starts, or the terminal state it takes when it starts none.
type Stop struct {
	// UndoFrom is the first step to compensate, -1 for none.
	UndoFrom int
	// Terminal is Error or Cancelled when UndoFrom is -1.
	Terminal ProcessState
	// Residue names the steps whose effect may have been applied and that
	// have no undo, in workflow order.
	Residue []string
}

// StopAt decides how an order stops at step k for reason. mayApply says
// whether step k's own effect may have been applied: whether it was ever
// claimed (Uncertain), or for a rejection, whether the agent's fault
// proves nothing (Fault.Uncertain); a step without an undo must remember a
// rejection under its key (the remote contract), so a clean one applied
// nothing.
//
// An order that can be undone whole is: its compensation starts at the
// last step that may have been applied and has an undo (a rejected step
// that has one is undone too, since a copy of its request may still reach
// the remote), or, with nothing to undo, it is in Error (or Cancelled for
// a cancel). One that cannot, because a step that may have been applied
// has no undo (the Residue), stops in Error with nothing undone: it is
// past its point of no return, and an operator decides whether to retry
// the step (the remote replays a result it applied under the key, and the
// order can finish) or to cancel the order. A cancel is that decision: it
// undoes what can be undone and ends Cancelled, naming the residue.
func (d Definition) StopAt(k int, mayApply bool, reason StopReason) Stop {
	st := Stop{Residue: d.Residue(k, mayApply)}
	if len(st.Residue) > 0 && reason != StopCancel {
		st.UndoFrom, st.Terminal = -1, Error
		return st
	}
	st.UndoFrom = d.FirstCompensation(k, mayApply || reason == StopPermanent)
	if st.UndoFrom < 0 {
		st.Terminal = Error
		if reason == StopCancel {
			st.Terminal = Cancelled
		}
	}
	return st
}

// Residue lists the steps of an order stopped at step k whose effect may
// have been applied and that have no undo: every step before k without one
// (it succeeded), and k itself when mayApply and it has none.
func (d Definition) Residue(k int, mayApply bool) []string {
	var out []string
	for j, s := range d.Steps {
		if j > k || j == k && !mayApply {
			break
		}
		if !s.Compensable {
			out = append(out, s.Name)
		}
	}
	return out
}

// NotUndoablePrefix starts the LastError of an order that stopped with a
// step that may have been applied and has no undo (Definition.StopAt).
const NotUndoablePrefix = "not undoable: "

// notUndoable is the LastError of an order stopped at step k for reason
// with the residue: which steps were applied or may have been, and have no
// undo, then why it stopped.
func (d Definition) notUndoable(k int, residue []string, reason string) string {
	parts := make([]string, len(residue))
	for i, name := range residue {
		how := "was applied"
		if k < len(d.Steps) && d.Steps[k].Name == name {
			how = "may have been applied"
		}
		parts[i] = "step " + name + " " + how
	}
	has := " and has no undo; "
	if len(parts) > 1 {
		has = " and have no undo; "
	}
	return Clip(NotUndoablePrefix+strings.Join(parts, ", ")+has+reason, MaxErrorBytes)
}
