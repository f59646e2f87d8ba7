// Package workflow holds the domain of the system: orders, the workflow that
// runs them as ordered steps, the state record the Scheduler keeps for each
// order, and the pure decisions (what comes after a step, how the Supervisor
// recovers an expired record) that the handlers act on.
//
// Where things are:
//
//   - state.go: the process states, the state record (State) and what a
//     client is told of it (StatusOf); order.go: the business record.
//   - definition.go, catalog.go: a workflow's steps, and the versions a
//     deployment runs; limits.go: the payload bounds.
//   - machine.go: the Machine, which decides every transition, and the
//     Scheduler's events; recovery.go: the Supervisor's and the alert's;
//     operator.go: cancel and resubmit. compensation.go is the undo plan
//     they share (StopAt); retention.go the TTLs every change carries.
//   - change.go: what a decision returns (Change: Fence and Patch) and what
//     a Patch means (Apply). The store turns it into one conditional write
//     (shared/statestore: fenceOf and patchOf).
//   - reason.go: the error texts a record keeps and the Reason a client is
//     told instead; transition.go: the transitions' names in the logs.
package workflow
