package statestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

// claimUndo claims the compensation of step i: the record is Compensating,
// locked by owner until completeBy, under a new Attempt.
func claimUndo(e *expr, i int, owner string, now, completeBy time.Time) {
	sp := stepPath(i)
	e.Set("ProcessState", str(string(workflow.Compensating))).
		Set("LockedBy", str(owner)).
		Set(CompleteByAttr, millis(completeBy)).
		Add("Attempt", 1).
		touch(now).
		Set(sp+".Compensation", str(string(workflow.StepProcessing))).
		Add(sp+".CompensationAttempts", 1)
}

// Undone commits a successful compensation.
type Undone struct {
	OrderID   string
	StepIndex int
	Attempt   int
	Now       time.Time
	Output    json.RawMessage
	// Next, when set, claims the compensation of the next step to undo in
	// the same write; nil when none is left and the order is Compensated.
	Next *UndoClaim
}

// Undone records a step's compensation and either claims the next one or
// marks the order Compensated. It returns workflow.ErrStale when the reply is
// not for the record's current claim.
func (s *Store) Undone(ctx context.Context, u Undone) (workflow.State, error) {
	e := newExpr()
	fenceIn(e, workflow.Compensating, u.StepIndex, u.Attempt, u.Now)
	sp := stepPath(u.StepIndex)
	e.Set(sp+".Compensation", str(string(workflow.StepSucceeded))).
		Set(sp+".CompensatedAt", stamp(u.Now)).
		touch(u.Now).
		notify()
	if len(u.Output) > 0 {
		e.Set(sp+".CompensationOutput", str(string(u.Output)))
	}
	if u.Next != nil {
		startUndo(e, u.Next.StepIndex, u.Next.Step)
		claimUndo(e, u.Next.StepIndex, u.Next.Owner, u.Now, u.Next.CompleteBy)
	} else {
		e.Set("ProcessState", str(string(workflow.Compensated))).
			Remove("LockedBy").
			Remove(InFlightShardAttr)
	}
	st, err := s.update(ctx, u.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("undone %s step %d attempt %d: %w", u.OrderID, u.StepIndex, u.Attempt, err)
	}
	return st, nil
}

// FailCompensation commits a compensation's permanent failure: the order is
// CompensationFailed with its alert pending, until an operator acts. It
// returns workflow.ErrStale when the reply is not for the current claim.
func (s *Store) FailCompensation(ctx context.Context, f Failure) (workflow.State, error) {
	e := newExpr()
	fenceIn(e, workflow.Compensating, f.StepIndex, f.Attempt, f.Now)
	sp := stepPath(f.StepIndex)
	e.Set("ProcessState", str(string(workflow.CompensationFailed))).
		Set("AlertPending", boolean(true)).
		Set("LastError", str(f.Error)).
		Set(CompleteByAttr, millis(f.AlertBy)).
		Set(sp+".Compensation", str(string(workflow.StepFailed))).
		Set(sp+".CompensationError", str(f.Error)).
		Remove("LockedBy").
		touch(f.Now).
		notify()
	st, err := s.update(ctx, f.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("fail compensation %s step %d attempt %d: %w", f.OrderID, f.StepIndex, f.Attempt, err)
	}
	return st, nil
}
