package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// processing seeds an order and takes it to Processing at step 1 (step 0
// succeeded), returning the record as written.
func processing(t *testing.T, s *statestore.Store, id string) workflow.State {
	t.Helper()
	seed(t, s, id)
	st, err := claim(s, id, 0, "sched-a", t0)
	if err != nil {
		t.Fatal(err)
	}
	st, err = s.Advance(context.Background(), statestore.Advance{OrderID: id, StepIndex: 0, Attempt: st.Attempt, Now: t0.Add(time.Second),
		Output: []byte(`{"reservation":"r-1"}`),
		Next:   &statestore.NextClaim{Step: "charge-payment", Owner: "sched-a", CompleteBy: t0.Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestCompensationRunsBackwardsToCompensated(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	st := processing(t, s, "c-1")
	if st.EventSeq != 2 {
		t.Fatalf("EventSeq after moving to step 1 = %d, want 2 (accepted, processing)", st.EventSeq)
	}
	now := t0.Add(2 * time.Second)
	// A permanent fault at step 1 starts undoing step 0, claimed at once.
	st, err := s.Fail(ctx, statestore.Failure{OrderID: "c-1", StepIndex: 1, Attempt: st.Attempt, Now: now, Error: "declined",
		Undo: &statestore.UndoClaim{StepIndex: 0, Step: "reserve-inventory", Owner: "sched-b", CompleteBy: now.Add(30 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if st.ProcessState != workflow.Compensating || st.StepIndex != 0 || st.Step != "reserve-inventory" || st.LockedBy != "sched-b" ||
		st.Attempt != 3 || st.EventSeq != 3 || st.AlertPending || st.LastError != "declined" {
		t.Fatalf("after Fail with undo: %+v", st)
	}
	if st.Steps[1].State != workflow.StepFailed || st.Steps[0].State != workflow.StepSucceeded ||
		st.Steps[0].Compensation != workflow.StepProcessing || st.Steps[0].CompensationAttempts != 1 {
		t.Fatalf("steps after Fail with undo: %+v", st.Steps)
	}
	// A late reply of the failed step's attempt is stale now.
	if _, err := s.Advance(ctx, statestore.Advance{OrderID: "c-1", StepIndex: 1, Attempt: 2, Now: now}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("late forward reply: %v, want ErrStale", err)
	}
	// A reply for another attempt of the compensation is stale.
	if _, err := s.Undone(ctx, statestore.Undone{OrderID: "c-1", StepIndex: 0, Attempt: st.Attempt - 1, Now: now}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("stale undo: %v, want ErrStale", err)
	}
	done, err := s.Undone(ctx, statestore.Undone{OrderID: "c-1", StepIndex: 0, Attempt: st.Attempt, Now: now.Add(time.Second), Output: []byte(`{"undone":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if done.ProcessState != workflow.Compensated || done.LockedBy != "" || done.EventSeq != 4 ||
		done.Steps[0].Compensation != workflow.StepSucceeded || string(done.Steps[0].CompensationOutput) != `{"undone":true}` || done.Steps[0].CompensatedAt == nil {
		t.Fatalf("after Undone: %+v", done)
	}
	// Compensated leaves the in-flight index: the Supervisor never sees it.
	if exp, err := s.Expired(ctx, now.Add(time.Hour), 100); err != nil || len(exp) != 0 {
		t.Fatalf("Expired = %v, %v; want none", exp, err)
	}
	// A duplicate of the same reply is stale, not a second commit.
	if _, err := s.Undone(ctx, statestore.Undone{OrderID: "c-1", StepIndex: 0, Attempt: st.Attempt, Now: now.Add(2 * time.Second)}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("duplicate undo: %v, want ErrStale", err)
	}
}

func TestCompensationTimeoutsAndOperatorResubmit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	p := workflow.Policy{MaxFailures: 2, ClaimTimeout: time.Minute, BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: time.Minute}
	d := workflow.Default()
	st := processing(t, s, "c-2")
	// Step 1 times out twice: given up on, its own (uncertain) effect is
	// undone first.
	now := st.CompleteBy
	st, err := s.Recover(ctx, st, p.Recover(d, st, now), now)
	if err != nil || st.ProcessState != workflow.Pending {
		t.Fatalf("first timeout: %+v, %v", st, err)
	}
	st, err = claim(s, "c-2", 1, "sched-a", now)
	if err != nil {
		t.Fatal(err)
	}
	now = st.CompleteBy
	r := p.Recover(d, st, now)
	if r.Kind != workflow.GiveUp || r.UndoFrom != 1 {
		t.Fatalf("second timeout decision = %+v", r)
	}
	if st, err = s.Recover(ctx, st, r, now); err != nil {
		t.Fatal(err)
	}
	if st.ProcessState != workflow.CompensationPending || st.StepIndex != 1 || st.FailureCount != 0 || st.Steps[1].Failures != 2 ||
		st.Steps[1].Compensation != workflow.StepPending || st.EventSeq != 3 {
		t.Fatalf("after giving up: %+v", st)
	}
	// The compensation is claimed, then times out MaxFailures times.
	for i := range p.MaxFailures {
		c, err := s.Claim(ctx, statestore.Claim{OrderID: "c-2", StepIndex: 1, Compensate: true, Owner: "sched-c", Now: now, CompleteBy: now.Add(time.Second)})
		if err != nil {
			t.Fatalf("claim of compensation %d: %v", i, err)
		}
		if c.ProcessState != workflow.Compensating || c.EventSeq != 3 {
			t.Fatalf("claimed compensation: %+v", c)
		}
		// A forward claim of the same step must not take a compensation.
		if _, err := claim(s, "c-2", 1, "sched-x", now); !errors.Is(err, workflow.ErrClaimLost) {
			t.Fatalf("forward claim of a compensating record: %v", err)
		}
		now = c.CompleteBy
		if st, err = s.Recover(ctx, c, p.Recover(d, c, now), now); err != nil {
			t.Fatal(err)
		}
	}
	if st.ProcessState != workflow.CompensationFailed || !st.AlertPending || st.Steps[1].Compensation != workflow.StepFailed ||
		st.Steps[1].CompensationFailures != 2 || st.EventSeq != 4 {
		t.Fatalf("after the compensation gave up: %+v", st)
	}
	if err := s.AlertSent(ctx, "c-2", st.Attempt, now); err != nil {
		t.Fatal(err)
	}
	st, _ = s.GetState(ctx, "c-2")
	// Two operators resubmit what they both read: exactly one wins.
	res, err := p.Resubmit(st, now)
	if err != nil || res.State != workflow.CompensationPending {
		t.Fatalf("Resubmit decision = %+v, %v", res, err)
	}
	won, err := s.Resubmit(ctx, st, res, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resubmit(ctx, st, res, now); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("second resubmit: %v, want ErrStale", err)
	}
	if won.ProcessState != workflow.CompensationPending || won.FailureCount != 0 || won.AlertPending || won.Resubmits != 1 ||
		won.Steps[1].Compensation != workflow.StepPending || won.EventSeq != 5 {
		t.Fatalf("resubmitted: %+v", won)
	}
	// Back in the in-flight index, so a lost schedule message is re-sent.
	if exp, err := s.Expired(ctx, res.ClaimBy, 100); err != nil || len(exp) != 1 {
		t.Fatalf("Expired after resubmit = %v, %v", exp, err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	d := workflow.Default()
	now := t0.Add(5 * time.Second)

	// Cancelled before any claim: nothing to undo.
	fresh := seed(t, s, "x-1")
	fresh, _ = s.GetState(ctx, "x-1")
	stop := d.StopAt(fresh, workflow.StopCancel)
	got, err := s.Cancel(ctx, fresh, stop, now, now.Add(time.Minute))
	if err != nil || got.ProcessState != workflow.Cancelled || !got.Cancelled || got.Steps[0].State != workflow.StepCancelled || got.EventSeq != 2 {
		t.Fatalf("cancel of a fresh order: %+v, %v", got, err)
	}
	// A stale claim of the cancelled order loses.
	if _, err := claim(s, "x-1", 0, "sched-a", now); !errors.Is(err, workflow.ErrClaimLost) {
		t.Fatalf("claim after cancel: %v", err)
	}
	// Not cancellable twice.
	if _, err := s.Cancel(ctx, got, stop, now, now); !errors.Is(err, workflow.ErrNotCancellable) {
		t.Fatalf("second cancel: %v", err)
	}

	// Cancelled while step 1 runs: its Agent's reply is fenced off and
	// both steps are undone, the running one first.
	st := processing(t, s, "x-2")
	seen, _ := s.GetState(ctx, "x-2")
	stop = d.StopAt(seen, workflow.StopCancel)
	if stop.UndoFrom != 1 {
		t.Fatalf("StopAt = %+v, want undo from 1", stop)
	}
	got, err = s.Cancel(ctx, seen, stop, now, now.Add(time.Minute))
	if err != nil || got.ProcessState != workflow.CompensationPending || got.StepIndex != 1 || got.Attempt != st.Attempt+1 || got.LockedBy != "" {
		t.Fatalf("cancel while processing: %+v, %v", got, err)
	}
	if _, err := s.Advance(ctx, statestore.Advance{OrderID: "x-2", StepIndex: 1, Attempt: st.Attempt, Now: now}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("reply of the cancelled attempt: %v, want ErrStale", err)
	}
	// A cancel racing a change it did not see loses.
	if _, err := s.Cancel(ctx, seen, stop, now, now); !errors.Is(err, workflow.ErrStale) && !errors.Is(err, workflow.ErrNotCancellable) {
		t.Fatalf("cancel on a stale read: %v", err)
	}

	// An order in Error whose alert went out (so it left the in-flight
	// index) is closed by a cancel: what may have been applied is undone,
	// and the compensation is watched by the Supervisor again.
	st = processing(t, s, "x-3")
	if _, err := s.Fail(ctx, statestore.Failure{OrderID: "x-3", StepIndex: 1, Attempt: st.Attempt, Now: now, Error: "rejected", AlertBy: now}); err != nil {
		t.Fatal(err)
	}
	errored, err := s.GetState(ctx, "x-3")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AlertSent(ctx, "x-3", errored.Attempt, now); err != nil {
		t.Fatal(err)
	}
	errored, _ = s.GetState(ctx, "x-3")
	stop = d.StopAt(errored, workflow.StopCancel)
	got, err = s.Cancel(ctx, errored, stop, now, now.Add(time.Minute))
	if err != nil || got.ProcessState != workflow.CompensationPending || got.StepIndex != 1 || !got.Cancelled || got.AlertPending ||
		got.Steps[1].State != workflow.StepFailed || got.LastError != "rejected" {
		t.Fatalf("cancel of an order in Error: %+v, %v", got, err)
	}
	due, err := s.Expired(ctx, now.Add(2*time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range due {
		found = found || r.OrderID == "x-3"
	}
	if !found {
		t.Fatal("the compensation of a cancelled Error order is not in the in-flight index")
	}
}

func TestListByStatePages(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	d := workflow.Default()
	// Five orders cancelled one second apart, one left Pending.
	for i := range 5 {
		id := fmt.Sprintf("l-%d", i)
		seed(t, s, id)
		st, _ := s.GetState(ctx, id)
		if _, err := s.Cancel(ctx, st, d.StopAt(st, workflow.StopCancel), t0.Add(time.Duration(i)*time.Second), t0); err != nil {
			t.Fatal(err)
		}
	}
	seed(t, s, "l-pending")
	var ids []string
	cursor := ""
	pages := 0
	for {
		p, err := s.ListByState(ctx, workflow.Cancelled, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, st := range p.States {
			if st.ProcessState != workflow.Cancelled || st.Input != nil {
				t.Fatalf("listed %+v", st)
			}
			ids = append(ids, st.OrderID)
		}
		if p.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = p.Next
	}
	want := "[l-4 l-3 l-2 l-1 l-0]"
	if fmt.Sprint(ids) != want {
		t.Fatalf("listed %v, want newest first %s", ids, want)
	}
	if pages < 3 {
		t.Fatalf("%d pages of 2 for 5 orders", pages)
	}
	// A cursor of one listing is refused by another; garbage is refused.
	first, _ := s.ListByState(ctx, workflow.Cancelled, 1, "")
	for _, bad := range []struct {
		state  workflow.ProcessState
		cursor string
	}{{workflow.Pending, first.Next}, {workflow.Cancelled, "%%%"}, {workflow.Cancelled, "e30"}} {
		if _, err := s.ListByState(ctx, bad.state, 1, bad.cursor); !errors.Is(err, statestore.ErrBadCursor) {
			t.Errorf("ListByState(%s, %q) error = %v, want ErrBadCursor", bad.state, bad.cursor, err)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add("eyJzIjoiRXJyb3IiLCJvIjoiYS0xIiwiYyI6MTJ9")
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := statestore.DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, statestore.ErrBadCursor) {
				t.Fatalf("error %v does not wrap ErrBadCursor", err)
			}
			return
		}
		if _, ok := workflow.ParseProcessState(c.State); !ok || c.OrderID == "" || c.ChangedAt < 0 {
			t.Fatalf("accepted an invalid cursor %+v", c)
		}
	})
}
