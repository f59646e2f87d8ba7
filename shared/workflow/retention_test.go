package workflow

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestRetention: the write that ends an order sets its record's ExpiresAt
// Retention later, in whole seconds; a write that reopens it removes it;
// one between two terminal states keeps it; and every other write leaves
// it alone.
func TestRetention(t *testing.T) {
	t.Parallel()
	// oneStep has no undo: a rejection ends it in Error.
	oneStep := Machine{Def: Definition{Name: "one", Steps: []Step{{Name: "a", Budget: 30 * time.Second}}}, Policy: testPol}
	undoable := Machine{Def: Definition{Name: "undo", Steps: []Step{{Name: "a", Budget: 30 * time.Second, Compensable: true}}}, Policy: testPol}
	at := func(s State) time.Time { return s.UpdatedAt.Add(1500 * time.Millisecond) }
	claimOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			return m.Claim(s.OrderID, s.StepIndex, s.ProcessState == CompensationPending, "sched", at(s))
		}
	}
	doneOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			return m.StepCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{}`), "sched", at(s))
		}
	}
	rejectOf := func(m Machine) func(State) Change {
		return func(s State) Change { return m.StepRejected(s.OrderID, s.StepIndex, s.Attempt, "no", "sched", at(s)) }
	}
	undoRejectOf := func(m Machine) func(State) Change {
		return func(s State) Change { return m.UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "no", at(s)) }
	}
	undoneOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			return m.UndoCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{}`), "sched", at(s))
		}
	}
	resubmitOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			c, err := m.Resubmit(s, at(s))
			if err != nil {
				panic(err)
			}
			return c
		}
	}
	cancelOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			c, err := m.Cancel(s, at(s), at(s).Add(time.Minute))
			if err != nil {
				panic(err)
			}
			return c
		}
	}
	const (
		unchanged = iota // the write keeps the ExpiresAt before it
		set              // Retention after the write, in whole seconds
		removed
	)
	for _, tc := range []struct {
		name   string
		m      Machine
		before []func(State) Change
		event  func(State) Change
		want   int
		state  ProcessState
	}{
		{"a claim", oneStep, nil, claimOf(oneStep), unchanged, Processing},
		{"the last reply ends Processed", oneStep, []func(State) Change{claimOf(oneStep)}, doneOf(oneStep), set, Processed},
		{"a rejection ends in Error", oneStep, []func(State) Change{claimOf(oneStep)}, rejectOf(oneStep), set, Error},
		{"a rejection that starts the compensation", undoable, []func(State) Change{claimOf(undoable)}, rejectOf(undoable), unchanged, Compensating},
		{"the last undo ends Compensated", undoable, []func(State) Change{claimOf(undoable), rejectOf(undoable)}, undoneOf(undoable), set, Compensated},
		{"a failed undo ends CompensationFailed", undoable, []func(State) Change{claimOf(undoable), rejectOf(undoable)}, undoRejectOf(undoable), set, CompensationFailed},
		{"a timeout at the threshold ends in Error", oneStep, []func(State) Change{claimOf(oneStep)},
			func(s State) Change {
				s.FailureCount = testPol.MaxFailures - 1
				c, _ := oneStep.Expired(s, s.CompleteBy)
				return c
			}, set, Error},
		{"the alert of an Error confirmed", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep)},
			func(s State) Change { return AlertSent(s.OrderID, s.Attempt, at(s)) }, unchanged, Error},
		{"a resubmission of Error reopens it", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep)}, resubmitOf(oneStep), removed, Pending},
		{"a resubmission of CompensationFailed reopens it", undoable,
			[]func(State) Change{claimOf(undoable), rejectOf(undoable), undoRejectOf(undoable)}, resubmitOf(undoable), removed, CompensationPending},
		{"the reopened order ends again", oneStep,
			[]func(State) Change{claimOf(oneStep), rejectOf(oneStep), resubmitOf(oneStep), claimOf(oneStep)}, doneOf(oneStep), set, Processed},
		{"a cancel of Error with nothing to undo keeps it", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep)}, cancelOf(oneStep), unchanged, Cancelled},
		{"a cancel of a step in flight with nothing to undo ends Cancelled", oneStep, nil, cancelOf(oneStep), set, Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.m.Accept("o-1", json.RawMessage(`{}`), "sub", mt0)
			s.ProcessState, s.LockedBy, s.Attempt = Pending, "", 0 // as a Scheduler finds it
			s.Steps[0].State, s.Steps[0].Attempts, s.Steps[0].StartedAt = StepPending, 0, nil
			for _, e := range tc.before {
				s = apply(t, s, e(s))
			}
			before := s.ExpiresAt
			c := tc.event(s)
			after := apply(t, s, c)
			if after.ProcessState != tc.state {
				t.Fatalf("state %s, want %s", after.ProcessState, tc.state)
			}
			switch tc.want {
			case unchanged:
				if !after.ExpiresAt.Equal(before) || c.Patch.Unexpire || !c.Patch.ExpiresAt.IsZero() {
					t.Errorf("ExpiresAt %v -> %v (patch %v, unexpire %v), want it kept", before, after.ExpiresAt, c.Patch.ExpiresAt, c.Patch.Unexpire)
				}
			case set:
				want := c.Patch.Now.Add(testPol.Retention).Truncate(time.Second)
				if !after.ExpiresAt.Equal(want) || after.ExpiresAt.Nanosecond() != 0 {
					t.Errorf("ExpiresAt %v, want %v", after.ExpiresAt, want)
				}
				if after.Expired(want.Add(-time.Second)) || !after.Expired(want) {
					t.Errorf("Expired around %v is wrong", want)
				}
			case removed:
				if before.IsZero() || !after.ExpiresAt.IsZero() || !c.Patch.Unexpire {
					t.Errorf("ExpiresAt %v -> %v, want it removed", before, after.ExpiresAt)
				}
			}
			// Only a state no operator reopens drops the bound on
			// reopening; every other keeps the one set at creation.
			sealed := tc.state.Terminal() && !tc.state.NeedsOperator()
			if c.Patch.Seal != sealed || after.OpenUntil.IsZero() != sealed || (!sealed && !after.OpenUntil.Equal(s.OpenUntil)) {
				t.Errorf("into %s: seal %v, OpenUntil %v -> %v, want sealed %v", tc.state, c.Patch.Seal, s.OpenUntil, after.OpenUntil, sealed)
			}
		})
	}
}

// TestReopenBound: an order is created with OpenUntil Retention later and
// its orders item expires Retention after that; a change that would reopen
// it is refused from OpenUntil on, and one that does not reopen it is not.
func TestReopenBound(t *testing.T) {
	t.Parallel()
	m := Machine{Def: Definition{Name: "one", Steps: []Step{{Name: "a", Budget: 30 * time.Second}}}, Policy: testPol}
	created := mt0.Add(250 * time.Millisecond)
	s := m.Accept("o-1", json.RawMessage(`{}`), "sub", created)
	if want := mt0.Add(testPol.Retention); !s.OpenUntil.Equal(want) {
		t.Fatalf("OpenUntil %v, want %v", s.OpenUntil, want)
	}
	if got, want := m.OrderExpiresAt(created), mt0.Add(2*testPol.Retention); !got.Equal(want) {
		t.Fatalf("OrderExpiresAt %v, want %v", got, want)
	}
	s = apply(t, s, m.StepRejected(s.OrderID, 0, s.Attempt, "no", "sched", created.Add(time.Second)))
	if s.ProcessState != Error {
		t.Fatalf("state %s", s.ProcessState)
	}
	last := s.OpenUntil.Add(-time.Millisecond)
	if _, err := m.Resubmit(s, last); err != nil {
		t.Errorf("resubmit just before OpenUntil: %v", err)
	}
	if _, err := m.Resubmit(s, s.OpenUntil); !errors.Is(err, ErrPastRetention) || !errors.Is(err, ErrConflict) {
		t.Errorf("resubmit at OpenUntil: %v, want ErrPastRetention", err)
	}
	// Closing the Error needs no reopening: allowed whenever it is read.
	if c, err := m.Cancel(s, s.OpenUntil.Add(time.Hour), s.OpenUntil.Add(2*time.Hour)); err != nil || c.Patch.State != Cancelled {
		t.Errorf("cancel of Error past OpenUntil: %v, %v", c.Patch.State, err)
	}
	// A record from before retention has no bound.
	old := s
	old.OpenUntil = time.Time{}
	if _, err := m.Resubmit(old, s.OpenUntil.Add(time.Hour)); err != nil {
		t.Errorf("resubmit of a record without OpenUntil: %v", err)
	}

	// A cancel of Error that starts a compensation reopens the order.
	undo := Machine{Def: Definition{Name: "two", Steps: []Step{{Name: "a", Budget: 30 * time.Second, Compensable: true}, {Name: "b", Budget: 30 * time.Second}}}, Policy: testPol}
	e := undo.Accept("o-2", json.RawMessage(`{}`), "sub", created)
	e.ProcessState, e.StepIndex, e.Step, e.Steps[0].State = Error, 1, "b", StepSucceeded
	e.ExpiresAt = mt0.Add(time.Hour)
	if c, err := undo.Cancel(e, last, last.Add(time.Minute)); err != nil || c.Patch.State != CompensationPending || !c.Patch.Unexpire {
		t.Errorf("cancel of Error into its compensation before OpenUntil: %s, unexpire %v, %v", c.Patch.State, c.Patch.Unexpire, err)
	}
	if _, err := undo.Cancel(e, e.OpenUntil, e.OpenUntil.Add(time.Minute)); !errors.Is(err, ErrPastRetention) {
		t.Errorf("cancel of Error into its compensation at OpenUntil: %v, want ErrPastRetention", err)
	}
}
