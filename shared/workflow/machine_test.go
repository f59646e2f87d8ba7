package workflow

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	mt0     = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	testPol = Policy{MaxFailures: 3, ClaimTimeout: time.Minute, BackoffBase: 5 * time.Second, BackoffMax: time.Minute, AlertTimeout: 2 * time.Minute, Retention: 30 * 24 * time.Hour}
)

// machineOf runs the three-step definition (a and c can be undone, b not),
// with budgets long enough for the tests' one-second steps between events.
func machineOf() Machine {
	d := threeSteps()
	for i := range d.Steps {
		d.Steps[i].Budget = 30 * time.Second
	}
	return Machine{Def: d, Policy: testPol}
}

// apply carries out c on s the way a store must: refused when the fence
// does not admit s.
func apply(t *testing.T, s State, c Change) State {
	t.Helper()
	if !c.Fence.Admits(s) {
		t.Fatalf("fence %+v refuses %s at step %d attempt %d", c.Fence, s.ProcessState, s.StepIndex, s.Attempt)
	}
	after := c.Patch.Apply(s)
	// A store tells a change of state from the change alone (Moves); every
	// change the Machine makes must tell it right.
	if moves, err := c.Moves(); err != nil || moves != (after.ProcessState != s.ProcessState) {
		t.Fatalf("%s of a %s record: Moves = %v, %v, but it leaves it %s", c.Transition, s.ProcessState, moves, err, after.ProcessState)
	}
	return after
}

// record is an order's record after events, applied in turn from its
// acceptance.
func record(t *testing.T, events ...func(State) Change) State {
	t.Helper()
	s := NewState("o-1", machineOf().Def, json.RawMessage(`{}`), mt0, mt0.Add(time.Minute))
	for _, e := range events {
		s = apply(t, s, e(s))
	}
	return s
}

// Events, as the actors raise them, at a time after the record's last write.
func claim(s State) Change {
	return machineOf().Claim(s.OrderID, s.StepIndex, s.ProcessState == CompensationPending, "sched", s.UpdatedAt.Add(time.Second))
}
func done(s State) Change {
	return machineOf().StepCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{"ok":1}`), "sched", s.UpdatedAt.Add(time.Second))
}
func rejected(s State) Change {
	return machineOf().StepRejected(s.OrderID, s.StepIndex, s.Attempt, "rejected: no", false, "sched", s.UpdatedAt.Add(time.Second))
}
func uncertainlyRejected(s State) Change {
	return machineOf().StepRejected(s.OrderID, s.StepIndex, s.Attempt, "timeout: no answer (outcome uncertain)", true, "sched", s.UpdatedAt.Add(time.Second))
}
func undone(s State) Change {
	return machineOf().UndoCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{"undone":true}`), s, "sched", s.UpdatedAt.Add(time.Second))
}
func cancelled(s State) Change {
	return mustChange(machineOf().Cancel(s, s.UpdatedAt.Add(time.Second), s.UpdatedAt.Add(time.Minute)))
}
func expired(s State) Change {
	c, ok := machineOf().Expired(s, s.CompleteBy)
	if !ok {
		panic("not expired")
	}
	return c
}

// TestMachine: every event, from the records it applies to, gives the whole
// transition: target state, step history, EventSeq, LastError, log name,
// alert, index membership, and what the actor does next.
func TestMachine(t *testing.T) {
	t.Parallel()
	m := machineOf()
	type want struct {
		state        ProcessState
		step         int
		attempt      int
		failures     int
		seqDelta     int
		lastError    string // a substring; "" checks nothing
		inFlight     bool
		alertPending bool
		locked       bool
		transition   Transition
		dispatch     bool
		handback     *Handback
		alert        AlertKind
		notice       AlertKind
	}
	for _, tc := range []struct {
		name   string
		before []func(State) Change
		event  func(State) Change
		want   want
		steps  func(t *testing.T, s State)
	}{{
		name: "claim the first step", event: claim,
		want: want{state: Processing, attempt: 1, inFlight: true, locked: true, transition: TransitionClaimed, dispatch: true},
		steps: func(t *testing.T, s State) {
			if r := s.Steps[0]; r.State != StepProcessing || r.Attempts != 1 || r.StartedAt == nil {
				t.Errorf("step 0 %+v", r)
			}
		},
	}, {
		name: "a reply commits the step and claims the next", before: []func(State) Change{claim}, event: done,
		want: want{state: Processing, step: 1, attempt: 2, seqDelta: 1, inFlight: true, locked: true, transition: TransitionStepCompleted, dispatch: true},
		steps: func(t *testing.T, s State) {
			if r := s.Steps[0]; r.State != StepSucceeded || string(r.Output) != `{"ok":1}` || r.FinishedAt == nil {
				t.Errorf("step 0 %+v", r)
			}
			if s.Steps[1].State != StepProcessing || s.Steps[1].Attempts != 1 {
				t.Errorf("step 1 %+v", s.Steps[1])
			}
		},
	}, {
		name: "the last reply ends Processed, out of the index", before: []func(State) Change{claim, done, done}, event: done,
		want: want{state: Processed, step: 2, attempt: 3, seqDelta: 1, transition: TransitionProcessed},
	}, {
		name:   "a rejection at the first step undoes the step itself",
		before: []func(State) Change{claim}, event: rejected,
		want: want{state: Compensating, attempt: 2, seqDelta: 1, lastError: "rejected: no", inFlight: true, locked: true,
			transition: TransitionCompensating, dispatch: true},
		steps: func(t *testing.T, s State) {
			if r := s.Steps[0]; r.State != StepFailed || r.Error != "rejected: no" || r.Compensation != StepProcessing || r.CompensationAttempts != 1 {
				t.Errorf("step 0 %+v", r)
			}
		},
	}, {
		name:   "a rejection of a step without an undo undoes the ones before",
		before: []func(State) Change{claim, done}, event: rejected,
		want: want{state: Compensating, step: 0, attempt: 3, seqDelta: 1, inFlight: true, locked: true, transition: TransitionCompensating, dispatch: true},
	}, {
		name: "the last undo ends Compensated", before: []func(State) Change{claim, rejected}, event: undone,
		want: want{state: Compensated, attempt: 2, seqDelta: 1, transition: TransitionCompensated},
		steps: func(t *testing.T, s State) {
			if r := s.Steps[0]; r.Compensation != StepSucceeded || r.CompensatedAt == nil || string(r.CompensationOutput) != `{"undone":true}` {
				t.Errorf("step 0 %+v", r)
			}
		},
	}, {
		name: "an undo goes on to the one before, past a step without one", before: []func(State) Change{claim, done, done, cancelled, claim}, event: undone,
		want: want{state: Compensating, step: 0, attempt: 6, seqDelta: 1, lastError: "not undoable: step b was applied", inFlight: true, locked: true,
			alertPending: true, transition: TransitionUndone, dispatch: true},
	}, {
		name: "a rejection past a step without an undo stops in Error with nothing undone", before: []func(State) Change{claim, done, done}, event: rejected,
		want: want{state: Error, step: 2, attempt: 3, seqDelta: 1, lastError: "not undoable: step b was applied and has no undo; rejected: no",
			inFlight: true, alertPending: true, transition: TransitionFailed, alert: AlertNotUndoable},
		steps: func(t *testing.T, s State) {
			if s.Steps[0].Compensation != "" || s.Steps[2].State != StepFailed || s.Steps[2].Error != "rejected: no" {
				t.Errorf("steps %+v", s.Steps)
			}
		},
	}, {
		name: "an uncertain rejection of a step without an undo stops in Error", before: []func(State) Change{claim, done}, event: uncertainlyRejected,
		want: want{state: Error, step: 1, attempt: 2, seqDelta: 1, lastError: "not undoable: step b may have been applied and has no undo; timeout",
			inFlight: true, alertPending: true, transition: TransitionFailed, alert: AlertNotUndoable},
	}, {
		name: "the last timeout of a step without an undo stops in Error", before: []func(State) Change{claim, done, expired, claim, expired, claim}, event: expired,
		want: want{state: Error, step: 1, attempt: 4, failures: 3, seqDelta: 1, lastError: "not undoable: step b may have been applied",
			inFlight: true, alertPending: true, transition: TransitionGaveUp, alert: AlertNotUndoable},
	}, {
		name: "a cancel while a step without an undo runs undoes the ones before and tells it", before: []func(State) Change{claim, done}, event: cancelled,
		want: want{state: CompensationPending, step: 0, attempt: 3, seqDelta: 1, lastError: "not undoable: step b may have been applied and has no undo; cancelled at step b",
			inFlight: true, alertPending: true, transition: TransitionCancelled, handback: &Handback{Undo: true, Reason: "cancelled"}, alert: AlertNotUndoable},
	}, {
		name: "the last undo of a cancelled order ends Cancelled", before: []func(State) Change{claim, cancelled, claim}, event: undone,
		want: want{state: Cancelled, attempt: 3, seqDelta: 1, lastError: "cancelled at step a", transition: TransitionCompensated},
	}, {
		name: "an undo rejected waits for an operator", before: []func(State) Change{claim, rejected},
		event: func(s State) Change {
			return m.UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "compensation rejected", false, s, s.UpdatedAt.Add(time.Second))
		},
		want: want{state: CompensationFailed, attempt: 2, seqDelta: 1, lastError: "compensation rejected", inFlight: true, alertPending: true,
			transition: TransitionCompensationFailed, alert: AlertCompensationFailed},
	}, {
		name: "a timeout below the threshold is retried after the backoff", before: []func(State) Change{claim}, event: expired,
		want: want{state: Pending, attempt: 1, failures: 1, lastError: "did not complete by", inFlight: true, transition: TransitionRetried,
			handback: &Handback{StepIndex: 0, Delay: 5 * time.Second, Reason: "retry"}},
		steps: func(t *testing.T, s State) {
			if r := s.Steps[0]; r.State != StepPending || r.Failures != 1 {
				t.Errorf("step 0 %+v", r)
			}
		},
	}, {
		name: "the last timeout of a step gives up into its undo", before: []func(State) Change{claim, expired, claim, expired, claim},
		event: expired,
		want: want{state: CompensationPending, attempt: 3, seqDelta: 1, inFlight: true, transition: TransitionCompensating,
			handback: &Handback{StepIndex: 0, Undo: true, Reason: "give-up"}},
	}, {
		name: "the last timeout of an undo ends CompensationFailed", before: []func(State) Change{claim, rejected, expired, claim, expired, claim},
		event: expired,
		want: want{state: CompensationFailed, attempt: 4, failures: 3, seqDelta: 1, inFlight: true, alertPending: true,
			transition: TransitionCompensationFailed, alert: AlertCompensationFailed},
	}, {
		name: "an unclaimed step is requeued", event: expired,
		want: want{state: Pending, inFlight: true, transition: TransitionRequeued, handback: &Handback{Reason: "requeue"}},
	}, {
		name:   "refused dispatches give up with a dispatch alert while the undo runs",
		before: []func(State) Change{claim, dispatchFailed, claim, dispatchFailed, claim}, event: dispatchFailed,
		want: want{state: CompensationPending, attempt: 3, seqDelta: 1, lastError: "dispatch of step a attempt 3 failed: AccessDenied",
			inFlight: true, transition: TransitionCompensating, handback: &Handback{Undo: true, Reason: "give-up"}, notice: AlertDispatchFailed},
	}, {
		name: "a cancel while a step runs undoes it", before: []func(State) Change{claim},
		event: func(s State) Change {
			return mustChange(m.Cancel(s, s.UpdatedAt.Add(time.Second), s.UpdatedAt.Add(time.Minute)))
		},
		want: want{state: CompensationPending, attempt: 2, seqDelta: 1, lastError: "cancelled at step a", inFlight: true,
			transition: TransitionCancelled, handback: &Handback{Undo: true, Reason: "cancelled"}},
	}, {
		name: "a cancel before any claim ends Cancelled",
		event: func(s State) Change {
			return mustChange(m.Cancel(s, s.UpdatedAt.Add(time.Second), s.UpdatedAt.Add(time.Minute)))
		},
		want: want{state: Cancelled, attempt: 1, seqDelta: 1, transition: TransitionCancelled},
	}, {
		name: "an operator resubmits a failed undo", before: []func(State) Change{claim, rejected, undoRejected},
		event: func(s State) Change { return mustChange(m.Resubmit(s, s.UpdatedAt.Add(time.Second))) },
		want: want{state: CompensationPending, attempt: 3, seqDelta: 1, lastError: "compensation", inFlight: true,
			transition: TransitionResubmitted, handback: &Handback{Undo: true, Reason: "resubmitted"}},
	}, {
		name: "an alert confirmed takes the record out of the index", before: []func(State) Change{claim, rejected, undoRejected},
		event: func(s State) Change {
			return Machine{}.AlertSent(s.OrderID, s.Attempt, s.ProcessState, s.UpdatedAt.Add(time.Second))
		},
		want: want{state: CompensationFailed, attempt: 2, lastError: "compensation"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := record(t, tc.before...)
			c := tc.event(before)
			after := apply(t, before, c)
			w := tc.want
			if after.ProcessState != w.state || after.StepIndex != w.step || after.Attempt != w.attempt || after.FailureCount != w.failures ||
				after.EventSeq-before.EventSeq != w.seqDelta || after.InFlight != w.inFlight || after.AlertPending != w.alertPending ||
				(after.LockedBy != "") != w.locked || !strings.Contains(after.LastError, w.lastError) {
				t.Errorf("record %s step %d attempt %d failures %d seq +%d inFlight %v alert %v locked %q lastError %q",
					after.ProcessState, after.StepIndex, after.Attempt, after.FailureCount, after.EventSeq-before.EventSeq,
					after.InFlight, after.AlertPending, after.LockedBy, after.LastError)
			}
			if c.Transition != w.transition || c.Dispatch != w.dispatch || c.Alert != w.alert || c.Notice != w.notice {
				t.Errorf("change %s dispatch %v alert %q notice %q", c.Transition, c.Dispatch, c.Alert, c.Notice)
			}
			if (c.Handback == nil) != (w.handback == nil) || c.Handback != nil && *c.Handback != *w.handback {
				t.Errorf("handback %+v, want %+v", c.Handback, w.handback)
			}
			// Properties of every transition: the Supervisor watches what is
			// in flight or owes an alert, and nothing else; and a fence
			// never admits the record its own patch wrote, so a change
			// retried after it committed cannot apply twice.
			if after.InFlight != (after.ProcessState.InFlight() || after.AlertPending) {
				t.Errorf("InFlight %v for a %s record with AlertPending %v", after.InFlight, after.ProcessState, after.AlertPending)
			}
			if c.Fence.Admits(after) {
				t.Errorf("the fence admits the record its patch wrote: a retry would apply twice")
			}
			if StatusOf(after) != StatusOf(before) && after.EventSeq == before.EventSeq {
				t.Errorf("the status changed from %s to %s without an event", StatusOf(before), StatusOf(after))
			}
			if tc.steps != nil {
				tc.steps(t, after)
			}
		})
	}
}

func dispatchFailed(s State) Change {
	return machineOf().DispatchFailed(s, s.UpdatedAt.Add(time.Second), "AccessDenied")
}

func undoRejected(s State) Change {
	return machineOf().UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "compensation rejected", false, s, s.UpdatedAt.Add(time.Second))
}

func mustChange(c Change, err error) Change {
	if err != nil {
		panic(err)
	}
	return c
}

// TestFencesRefuseWhatTheDecisionDidNotSee: a late reply of an old attempt,
// a reply past CompleteBy, a claim of a held record and a Supervisor's view
// of a moved record are all refused.
func TestFencesRefuseWhatTheDecisionDidNotSee(t *testing.T) {
	t.Parallel()
	m := machineOf()
	running := record(t, claim)
	for _, tc := range []struct {
		name string
		c    Change
	}{
		{"a reply of an older attempt", m.StepCompleted("o-1", 0, running.Attempt-1, nil, "s", running.UpdatedAt)},
		{"a reply after CompleteBy", m.StepCompleted("o-1", 0, running.Attempt, nil, "s", running.CompleteBy)},
		{"a reply for another step", m.StepCompleted("o-1", 1, running.Attempt, nil, "s", running.UpdatedAt)},
		{"a claim of a claimed step", m.Claim("o-1", 0, false, "other", running.UpdatedAt)},
		{"an undo's reply while the step runs", m.UndoCompleted("o-1", 0, running.Attempt, nil, State{}, "s", running.UpdatedAt)},
		{"a recovery of an older deadline", func() Change {
			old := running
			old.CompleteBy = running.CompleteBy.Add(-time.Second)
			c, _ := m.Expired(old, running.CompleteBy)
			return c
		}()},
		{"an alert confirmation of a record that owes none", Machine{}.AlertSent("o-1", running.Attempt, running.ProcessState, running.UpdatedAt)},
	} {
		if tc.c.Fence.Admits(running) {
			t.Errorf("%s: admitted", tc.name)
		}
	}
	if _, ok := m.Expired(running, running.CompleteBy.Add(-time.Millisecond)); ok {
		t.Error("a record not yet due was recovered")
	}
	if _, err := m.Cancel(record(t, claim, done, done, done), mt0, mt0); !errors.Is(err, ErrNotCancellable) {
		t.Errorf("cancel of a processed order: %v", err)
	}
	if _, err := m.Resubmit(running, mt0); !errors.Is(err, ErrNotResubmittable) {
		t.Errorf("resubmit of a running order: %v", err)
	}
}

// TestRequeueWaitsLonger: each further requeue of an unclaimed record waits
// twice as long for its claim, up to 15 minutes.
func TestRequeueWaitsLonger(t *testing.T) {
	t.Parallel()
	m := machineOf()
	s := record(t)
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute} {
		c, ok := m.Expired(s, s.CompleteBy)
		if !ok || c.Transition != TransitionRequeued {
			t.Fatalf("requeue %d: %+v", i, c)
		}
		if got := c.Patch.CompleteBy.Sub(s.CompleteBy); got != want {
			t.Errorf("requeue %d waits %v, want %v", i, got, want)
		}
		s = apply(t, s, c)
	}
}

// TestAlertResentNamesWhatFailed: the Supervisor's re-sent alert of a record
// whose first was not confirmed says what the first said.
func TestAlertResentNamesWhatFailed(t *testing.T) {
	t.Parallel()
	m := Machine{Def: Definition{Name: "w", Steps: []Step{{Name: "b", Budget: time.Second}}}, Policy: testPol}
	for _, tc := range []struct {
		s    State
		want AlertKind
	}{
		{State{ProcessState: Error, AlertPending: true, FailureCount: 1, LastError: "rejected"}, AlertPermanentFailure},
		{State{ProcessState: Error, AlertPending: true, FailureCount: 3, LastError: "timed out"}, AlertRetriesExhausted},
		{State{ProcessState: Error, AlertPending: true, FailureCount: 3, LastError: DispatchFailurePrefix + "step b"}, AlertDispatchFailed},
		{State{ProcessState: CompensationFailed, AlertPending: true}, AlertCompensationFailed},
	} {
		c, ok := m.Expired(tc.s, mt0)
		if !ok || c.Alert != tc.want || c.Transition != "" || !c.Fence.AlertPending {
			t.Errorf("%s %q: change %+v, want alert %s", tc.s.ProcessState, tc.s.LastError, c, tc.want)
		}
	}
	if _, ok := m.Expired(State{ProcessState: Error}, mt0); ok {
		t.Error("an Error record whose alert was sent was recovered")
	}
}

// TestMoves: a change tells whether it moves its record to another state,
// and a patch that sets a state under a fence that cannot tell is refused.
func TestMoves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		in    []ProcessState
		to    ProcessState
		moves bool
		bad   bool
	}{
		{name: "no state set", in: []ProcessState{Error, CompensationFailed}},
		{name: "no state set, no fence"},
		{name: "into another state", in: []ProcessState{Processing}, to: Error, moves: true},
		{name: "out of either of two", in: []ProcessState{Error, CompensationFailed}, to: Pending, moves: true},
		{name: "the state it is in", in: []ProcessState{Processing}, to: Processing},
		{name: "a state it may be in already", in: []ProcessState{Error, CompensationFailed}, to: Error, bad: true},
		{name: "a state without a fence", to: Error, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Change{OrderID: "o-1", Fence: Fence{In: tc.in}, Patch: Patch{State: tc.to}}
			moves, err := c.Moves()
			if moves != tc.moves || errors.Is(err, ErrBadPatch) != tc.bad || (err != nil) != tc.bad {
				t.Fatalf("Moves = %v, %v; want %v, refused %v", moves, err, tc.moves, tc.bad)
			}
		})
	}
}

// TestListedStates: operators list the states they act on or review, and
// no state in flight but Waiting (which they may act on) nor Processed.
func TestListedStates(t *testing.T) {
	t.Parallel()
	want := []ProcessState{Error, Waiting, Compensated, CompensationFailed, Cancelled}
	if got := ListedStates(); !slices.Equal(got, want) {
		t.Fatalf("ListedStates = %v, want %v", got, want)
	}
	for _, s := range ProcessStates() {
		if s.Listed() && (s.InFlight() && s != Waiting || s == Processed) {
			t.Errorf("%s is listed", s)
		}
	}
}

// TestAcceptClaimsTheFirstStep: a new order's record is what a Scheduler's
// claim of its first step leaves of a Pending one, so every later write
// (the reply's commit, the Supervisor's timeout, a cancel) sees a claim.
func TestAcceptClaimsTheFirstStep(t *testing.T) {
	t.Parallel()
	m := Machine{Def: Reference(), Policy: DefaultPolicy()}
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	input := json.RawMessage(`{"orderId":"o-1"}`)
	got := m.Accept("o-1", input, "submission/r-1", now)

	pending := NewState("o-1", m.Def, input, now, now.Add(m.Policy.ClaimTimeout))
	claim := m.Claim("o-1", 0, false, "submission/r-1", now)
	if !claim.Fence.Admits(pending) {
		t.Fatal("a Pending new record does not admit the claim")
	}
	want := claim.Patch.Apply(pending)
	// And the bound of its orders item's TTL: Retention after its
	// creation, less the longest its workflow runs by the Scheduler alone.
	want.OpenUntil = now.Add(m.Policy.Retention - m.Def.LongestRun())
	if got.ProcessState != Processing || got.Attempt != 1 || got.LockedBy != "submission/r-1" ||
		!got.CompleteBy.Equal(now.Add(m.Def.Steps[0].Lease())) || !got.InFlight || got.EventSeq != 1 {
		t.Fatalf("accepted record %+v", got)
	}
	if gj, wj := mustJSON(t, got), mustJSON(t, want); gj != wj {
		t.Fatalf("accepted record\n%s\nwant the claimed Pending record\n%s", gj, wj)
	}
	if s := StatusOf(got); s != StatusAccepted {
		t.Fatalf("client status %s, want accepted", s)
	}
	if c := m.StepCompleted("o-1", 0, got.Attempt, nil, "scheduler/r-2", now); !c.Fence.Admits(got) {
		t.Fatal("the first step's reply is not admitted")
	}
	if c := m.Claim("o-1", 0, false, "scheduler/r-3", now); c.Fence.Admits(got) {
		t.Fatal("a Scheduler could claim the first step again")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A cancel past the point of no return names the step whose effect stays;
// an undo that then times out and is retried must not overwrite it, or
// the order ends Cancelled without saying what it left applied (found by
// the simulation: internal/simulation).
func TestCancelKeepsItsResidueThroughAFailedUndo(t *testing.T) {
	t.Parallel()
	s := record(t, claim, done, cancelled)
	if !strings.HasPrefix(s.LastError, NotUndoablePrefix) {
		t.Fatalf("after the cancel LastError = %q, want it to name step b", s.LastError)
	}
	s = record(t, claim, done, cancelled, claim, expired)
	if s.ProcessState != CompensationPending || !strings.HasPrefix(s.LastError, NotUndoablePrefix) || !strings.Contains(s.LastError, "step b ") {
		t.Fatalf("after the undo timed out: %s, LastError %q, want CompensationPending naming step b", s.ProcessState, s.LastError)
	}
	if s.Steps[0].CompensationError == "" {
		t.Error("the undo's timeout is in no step's history")
	}
	s = record(t, claim, done, cancelled, claim, expired, claim, undone)
	if s.ProcessState != Cancelled || !strings.Contains(s.LastError, "step b ") {
		t.Fatalf("at the end: %s, LastError %q, want Cancelled naming step b", s.ProcessState, s.LastError)
	}
	// An undo refused for good, or timed out for good, waits for an
	// operator: the order still names step b, through the operator's
	// retry to its end.
	for _, stop := range [][]func(State) Change{
		{claim, done, cancelled, claim, undoRejected},
		{claim, done, cancelled, claim, expired, claim, expired, claim, expired},
	} {
		s = record(t, stop...)
		if s.ProcessState != CompensationFailed || !strings.Contains(s.LastError, "step b ") || s.Steps[0].CompensationError == "" {
			t.Fatalf("after the undo failed for good: %s, LastError %q, undo error %q", s.ProcessState, s.LastError, s.Steps[0].CompensationError)
		}
		s = apply(t, s, mustChange(machineOf().Resubmit(s, s.UpdatedAt.Add(time.Second))))
		s = apply(t, s, claim(s))
		if s = apply(t, s, undone(s)); s.ProcessState != Cancelled || !strings.Contains(s.LastError, "step b ") {
			t.Fatalf("after the retried undo: %s, LastError %q, want Cancelled naming step b", s.ProcessState, s.LastError)
		}
	}
}
