package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRetention: the write that ends an order for good sets its record's
// ExpiresAt Retention later, in whole seconds; nothing that waits for an
// operator expires; an operator's move of such an order gives its orders
// item a new TTL and the record a new OpenUntil; a confirmed alert keeps the
// orders item for good; and every other write leaves the TTLs alone.
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
		return func(s State) Change {
			return m.StepRejected(s.OrderID, s.StepIndex, s.Attempt, "no", false, "sched", at(s))
		}
	}
	undoRejectOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			return m.UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "no", false, State{}, at(s))
		}
	}
	undoneOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			return m.UndoCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{}`), s, "sched", at(s))
		}
	}
	alertSent := func(s State) Change { return Machine{}.AlertSent(s.OrderID, s.Attempt, s.ProcessState, at(s)) }
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
	// late moves the record's last write past its OpenUntil, as an order
	// that waited that long would have it.
	late := func(s State) Change {
		c := Change{OrderID: s.OrderID, Patch: Patch{Now: s.CreatedAt.Add(3 * testPol.Retention)}}
		return c
	}
	expiredOf := func(m Machine) func(State) Change {
		return func(s State) Change {
			c, ok := m.Expired(s, latest(at(s), s.CompleteBy))
			if !ok {
				panic("not due")
			}
			return c
		}
	}
	const (
		kept = iota // the TTL or bound before the write stays
		set         // a new one
		removed
	)
	for _, tc := range []struct {
		name      string
		m         Machine
		before    []func(State) Change
		event     func(State) Change
		state     ProcessState
		expires   int // the record's ExpiresAt: Retention after the write when set
		openUntil int // Retention after the write when set
		order     int // the orders item's TTL: twice Retention after the write when set
	}{
		{"a claim", oneStep, nil, claimOf(oneStep), Processing, kept, kept, kept},
		{"the last reply ends Processed", oneStep, []func(State) Change{claimOf(oneStep)}, doneOf(oneStep), Processed, set, removed, kept},
		{"a rejection ends in Error, which never expires", oneStep, []func(State) Change{claimOf(oneStep)}, rejectOf(oneStep), Error, kept, kept, kept},
		{"a rejection that starts the compensation", undoable, []func(State) Change{claimOf(undoable)}, rejectOf(undoable), Compensating, kept, kept, kept},
		{"the last undo ends Compensated", undoable, []func(State) Change{claimOf(undoable), rejectOf(undoable)}, undoneOf(undoable), Compensated, set, removed, kept},
		{"a failed undo ends CompensationFailed, which never expires", undoable, []func(State) Change{claimOf(undoable), rejectOf(undoable)}, undoRejectOf(undoable), CompensationFailed, kept, kept, kept},
		{"a timeout at the threshold ends in Error", oneStep, []func(State) Change{claimOf(oneStep)},
			func(s State) Change {
				s.FailureCount = testPol.MaxFailures - 1
				c, _ := oneStep.Expired(s, s.CompleteBy)
				return c
			}, Error, kept, kept, kept},
		{"the alert of an Error confirmed keeps the orders item for good", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep)},
			alertSent, Error, kept, removed, removed},
		{"the alert of a CompensationFailed confirmed too", undoable, []func(State) Change{claimOf(undoable), rejectOf(undoable), undoRejectOf(undoable)},
			alertSent, CompensationFailed, kept, removed, removed},
		{"a resubmission of Error reopens it as a new order", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep), alertSent}, resubmitOf(oneStep), Pending, kept, set, set},
		{"a resubmission of CompensationFailed too", undoable,
			[]func(State) Change{claimOf(undoable), rejectOf(undoable), undoRejectOf(undoable), alertSent}, resubmitOf(undoable), CompensationPending, kept, set, set},
		{"a resubmission long after the creation", undoable,
			[]func(State) Change{claimOf(undoable), rejectOf(undoable), undoRejectOf(undoable), alertSent, late}, resubmitOf(undoable), CompensationPending, kept, set, set},
		{"the reopened order ends again", oneStep,
			[]func(State) Change{claimOf(oneStep), rejectOf(oneStep), alertSent, resubmitOf(oneStep), claimOf(oneStep)}, doneOf(oneStep), Processed, set, removed, kept},
		{"a cancel of Error with nothing to undo ends it", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep), alertSent}, cancelOf(oneStep), Cancelled, set, kept, set},
		{"a cancel of a step in flight with nothing to undo ends Cancelled", oneStep, nil, cancelOf(oneStep), Cancelled, set, removed, kept},
		{"a step still in flight past OpenUntil moves both bounds on", oneStep, []func(State) Change{claimOf(oneStep), late}, expiredOf(oneStep), Pending, kept, set, set},
		{"an alert still unsent past OpenUntil too", oneStep, []func(State) Change{claimOf(oneStep), rejectOf(oneStep), late}, expiredOf(oneStep), Error, kept, set, set},
		{"a cancel past OpenUntil gives the orders item the retention", oneStep, []func(State) Change{claimOf(oneStep), late}, cancelOf(oneStep), Cancelled, set, removed, set},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.m.Accept("o-1", json.RawMessage(`{}`), "sub", mt0)
			s.ProcessState, s.LockedBy, s.Attempt = Pending, "", 0 // as a Scheduler finds it
			s.Steps[0].State, s.Steps[0].Attempts, s.Steps[0].StartedAt = StepPending, 0, nil
			for _, e := range tc.before {
				s = apply(t, s, e(s))
			}
			c := tc.event(s)
			after := apply(t, s, c)
			now := c.Patch.Now
			if after.ProcessState != tc.state {
				t.Fatalf("state %s, want %s", after.ProcessState, tc.state)
			}
			check := func(what string, how int, before, got, want time.Time) {
				t.Helper()
				switch how {
				case kept:
					if !got.Equal(before) {
						t.Errorf("%s %v -> %v, want it kept", what, before, got)
					}
				case set:
					if !got.Equal(want) {
						t.Errorf("%s %v, want %v", what, got, want)
					}
				case removed:
					if !got.IsZero() {
						t.Errorf("%s %v, want none", what, got)
					}
				}
			}
			check("ExpiresAt", tc.expires, s.ExpiresAt, after.ExpiresAt, now.Add(testPol.Retention).Truncate(time.Second))
			check("OpenUntil", tc.openUntil, s.OpenUntil, after.OpenUntil, now.Add(testPol.Retention).Truncate(time.Second).Add(-tc.m.Def.LongestRun()))
			if tc.expires == set && (after.Expired(after.ExpiresAt.Add(-time.Second)) || !after.Expired(after.ExpiresAt)) {
				t.Errorf("Expired around %v is wrong", after.ExpiresAt)
			}
			switch tc.order {
			case kept:
				if c.MovesOrder() {
					t.Errorf("the orders item's TTL moves (%v, keep %v), want it kept", c.Patch.OrderExpiresAt, c.Patch.KeepOrder)
				}
			case set:
				if want := now.Add(2 * testPol.Retention).Truncate(time.Second); c.Patch.KeepOrder || !c.Patch.OrderExpiresAt.Equal(want) {
					t.Errorf("the orders item's TTL %v (keep %v), want %v", c.Patch.OrderExpiresAt, c.Patch.KeepOrder, want)
				}
			case removed:
				if !c.Patch.KeepOrder || !c.Patch.OrderExpiresAt.IsZero() {
					t.Errorf("the orders item's TTL %v (keep %v), want it kept for good", c.Patch.OrderExpiresAt, c.Patch.KeepOrder)
				}
			}
			// Whatever the path, the orders item outlives the record: it
			// expires no earlier than Retention after the record's bound,
			// or after its own ExpiresAt.
			if !after.OpenUntil.IsZero() && !after.ExpiresAt.IsZero() {
				t.Errorf("a record with both OpenUntil %v and ExpiresAt %v", after.OpenUntil, after.ExpiresAt)
			}
		})
	}
}

// TestNothingThatWaitsForAnOperatorExpires: an order whose undo failed
// can be resumed, and one in Error resubmitted or cancelled, however long
// after its creation, and an order stopped for good long after its
// creation gets an orders item that outlives its record.
func TestNothingThatWaitsForAnOperatorExpires(t *testing.T) {
	t.Parallel()
	m := Machine{Def: Definition{Name: "two", Steps: []Step{
		{Name: "a", Budget: 30 * time.Second, Compensable: true}, {Name: "b", Budget: 30 * time.Second, Compensable: true}}}, Policy: testPol}
	created := mt0.Add(250 * time.Millisecond)
	s := m.Accept("o-1", json.RawMessage(`{}`), "sub", created)
	if want := mt0.Add(testPol.Retention - m.Def.LongestRun()); !s.OpenUntil.Equal(want) {
		t.Fatalf("OpenUntil %v, want %v", s.OpenUntil, want)
	}
	if got, want := m.OrderExpiresAt(created), mt0.Add(2*testPol.Retention); !got.Equal(want) {
		t.Fatalf("OrderExpiresAt %v, want %v", got, want)
	}
	if got, want := m.KeyExpiresAt(created), mt0.Add(testPol.Retention); !got.Equal(want) {
		t.Fatalf("KeyExpiresAt %v, want %v", got, want)
	}
	// The undo of step a is retried 10 s before OpenUntil and fails for
	// good: the order is CompensationFailed, its alert is confirmed.
	s = apply(t, s, m.StepRejected(s.OrderID, 0, s.Attempt, "no", false, "sched", created.Add(time.Second)))
	s = apply(t, s, m.UndoRejected(s.OrderID, 0, s.Attempt, "undo: down", false, State{}, created.Add(2*time.Second)))
	s = apply(t, s, Machine{}.AlertSent(s.OrderID, s.Attempt, s.ProcessState, s.UpdatedAt.Add(time.Second)))
	if s.ProcessState != CompensationFailed || !s.ExpiresAt.IsZero() {
		t.Fatalf("%s, ExpiresAt %v: want CompensationFailed, never expiring", s.ProcessState, s.ExpiresAt)
	}
	// A week past the retention, an operator resumes it.
	resumedAt := created.Add(testPol.Retention + 7*24*time.Hour)
	c, err := m.Resubmit(s, resumedAt)
	if err != nil {
		t.Fatalf("resume a week past the retention: %v", err)
	}
	s = apply(t, s, c)
	s = apply(t, s, m.Claim(s.OrderID, 0, true, "sched", resumedAt.Add(time.Second)))
	c = m.UndoCompleted(s.OrderID, 0, s.Attempt, nil, s, "sched", resumedAt.Add(2*time.Second))
	s = apply(t, s, c)
	if s.ProcessState != Compensated {
		t.Fatalf("state %s, want Compensated", s.ProcessState)
	}
	// The orders item got, at the resumption, a TTL past the record's.
	orderTTL := m.OrderExpiresAt(resumedAt)
	if !orderTTL.After(s.ExpiresAt) {
		t.Errorf("the orders item expires at %v, before its record at %v", orderTTL, s.ExpiresAt)
	}

	// An order in Error can be cancelled into its compensation and
	// resubmitted any time too.
	e := m.Accept("o-2", json.RawMessage(`{}`), "sub", created)
	e.ProcessState, e.StepIndex, e.Step, e.Steps[0].State = Error, 1, "b", StepSucceeded
	long := created.Add(3 * testPol.Retention)
	if c, err := m.Cancel(e, long, long.Add(time.Minute)); err != nil || c.Patch.State != CompensationPending || !c.Patch.OrderExpiresAt.Equal(m.OrderExpiresAt(long)) {
		t.Errorf("cancel of Error into its compensation long after: %s, orders item %v, %v", c.Patch.State, c.Patch.OrderExpiresAt, err)
	}
	if c, err := m.Resubmit(e, long); err != nil || c.Patch.State != Pending {
		t.Errorf("resubmit of Error long after: %s, %v", c.Patch.State, err)
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestTheOrdersItemOutlivesAnOrderTheSchedulerAloneEnds: an order retried
// until just before its OpenUntil, then moved on by the Scheduler alone,
// every step and every undo taking its whole lease, still ends for good
// early enough to expire no later than its orders item; and a workflow
// that could run longer than the shortest retention is refused.
func TestTheOrdersItemOutlivesAnOrderTheSchedulerAloneEnds(t *testing.T) {
	t.Parallel()
	m := Machine{Def: Definition{Name: "two", Steps: []Step{
		{Name: "a", Budget: 30 * time.Second, Wait: 5 * time.Second, Compensable: true},
		{Name: "b", Budget: 14 * time.Minute, Compensable: true}}}, Policy: testPol}
	if got, want := m.Def.LongestRun(), 2*(35*time.Second+14*time.Minute); got != want {
		t.Fatalf("LongestRun %v, want %v", got, want)
	}
	created := mt0.Add(250 * time.Millisecond)
	s := m.Accept("o-1", json.RawMessage(`{}`), "sub", created)
	// The Supervisor retried step a until just before OpenUntil.
	s.ProcessState, s.LockedBy, s.CompleteBy = Pending, "", s.OpenUntil.Add(-time.Millisecond)
	s.Steps[0].State = StepPending
	last := func(st State) time.Time { return st.CompleteBy.Add(-time.Millisecond) }
	s = apply(t, s, m.Claim("o-1", 0, false, "sched", s.OpenUntil.Add(-time.Millisecond)))
	s = apply(t, s, m.StepCompleted("o-1", 0, s.Attempt, nil, "sched", last(s)))
	s = apply(t, s, m.StepRejected("o-1", 1, s.Attempt, "no", false, "sched", last(s)))
	s = apply(t, s, m.UndoCompleted("o-1", 1, s.Attempt, nil, State{}, "sched", last(s)))
	c := m.UndoCompleted("o-1", 0, s.Attempt, nil, State{}, "sched", last(s))
	s = apply(t, s, c)
	if c.MovesOrder() || s.ProcessState != Compensated {
		t.Fatalf("%s, the orders item moved: %v", s.ProcessState, c.MovesOrder())
	}
	if orders := m.OrderExpiresAt(created); s.ExpiresAt.After(orders) {
		t.Errorf("the record expires at %v, after its orders item at %v", s.ExpiresAt, orders)
	}

	long := Definition{Name: "long", Version: 1}
	for i := range 60 {
		long.Steps = append(long.Steps, Step{Name: fmt.Sprintf("s%d", i), Budget: 13 * time.Minute, Compensable: true})
	}
	if err := long.Validate(); err == nil || !strings.Contains(err.Error(), "shortest retention") {
		t.Errorf("a workflow that can run %v: %v", long.LongestRun(), err)
	}
}

// TestAWaitPastTheBoundMovesTheOrdersItem: an order that starts its
// longest wait just before its OpenUntil, under the shortest retention,
// still has its orders item when the wait ends, and the Supervisor's
// change that ends it moves the item's TTL and the record's bound on.
func TestAWaitPastTheBoundMovesTheOrdersItem(t *testing.T) {
	t.Parallel()
	m := waitingMachine()
	m.Policy.Retention = MinRetention
	m.Def.Steps[0].Retry.Wait = MaxRetryWait
	created := mt0
	s := m.Accept("o-1", json.RawMessage(`{}`), "sched", created)
	ordersTTL := m.OrderExpiresAt(created)
	// The step fails its threshold, the last failure a minute before the
	// record's bound.
	s.FailureCount = 1
	s.CompleteBy = s.OpenUntil.Add(-time.Minute)
	c, _ := m.Expired(s, s.CompleteBy)
	s = apply(t, s, c)
	if s.ProcessState != Waiting || !c.Patch.OrderExpiresAt.IsZero() {
		t.Fatalf("into the wait before the bound: %s, orders item moved to %v", s.ProcessState, c.Patch.OrderExpiresAt)
	}
	end := s.CompleteBy
	if !end.After(s.OpenUntil) || !end.Before(ordersTTL) {
		t.Fatalf("the wait ends at %v: want past the bound %v and before the orders item's TTL %v", end, s.OpenUntil, ordersTTL)
	}
	c, _ = m.Expired(s, end)
	if c.Patch.State != Pending || !c.Patch.OrderExpiresAt.Equal(m.OrderExpiresAt(end)) || !c.Patch.OpenUntil.After(end) {
		t.Fatalf("the wait's end past the bound: %s, orders item %v, bound %v", c.Patch.State, c.Patch.OrderExpiresAt, c.Patch.OpenUntil)
	}
}
