package workflow

import (
	"fmt"
	"time"
)

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
		c.Alert = p.alertOf(seen)
	default:
		return Change{}, false
	}
	pin(&c, seen.Workflow)
	// Stranded orders stop where they are: nothing moves them on but an
	// operator, whose change bounds them anew.
	p.retain(&c, seen, 0)
	return c, true
}
