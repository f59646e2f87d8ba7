package workflow

import (
	"strings"
	"testing"
	"time"
)

func threeSteps() Definition {
	return Definition{Name: "t", Steps: []Step{
		{Name: "a", Budget: time.Second, Compensable: true},
		{Name: "b", Budget: time.Second},
		{Name: "c", Budget: time.Second, Compensable: true},
	}}
}

func TestCompensationPlan(t *testing.T) {
	t.Parallel()
	d := threeSteps()
	for _, tc := range []struct {
		name      string
		k         int
		uncertain bool
		want      []int
	}{
		{"failure at the first step undoes nothing", 0, false, nil},
		{"an uncertain first step undoes itself", 0, true, []int{0}},
		{"a step without compensation is skipped", 2, false, []int{0}},
		{"an uncertain last step first, then back to the start", 2, true, []int{2, 0}},
		{"an uncertain step that cannot be undone is left", 1, true, []int{0}},
		{"out of range undoes nothing", 5, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []int
			for i := d.FirstCompensation(tc.k, tc.uncertain); i >= 0; i = d.NextCompensation(i) {
				got = append(got, i)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("plan = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("plan = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestStopAt(t *testing.T) {
	t.Parallel()
	d := threeSteps()
	at := func(k, attempts, failures int) State {
		s := State{StepIndex: k, Steps: make([]StepRecord, 3)}
		s.Steps[k].Attempts, s.Steps[k].Failures = attempts, failures
		return s
	}
	for _, tc := range []struct {
		name   string
		s      State
		reason StopReason
		want   Stop
	}{
		// A claimed step is never proof of nothing applied: a copy of its
		// request may still reach the remote after a rejection.
		{"permanent fault at step 0 undoes the step itself", at(0, 1, 0), StopPermanent, Stop{UndoFrom: 0}},
		{"permanent fault after a timeout of the same step", at(0, 2, 1), StopPermanent, Stop{UndoFrom: 0}},
		{"timeouts make the step uncertain", at(2, 3, 2), StopTimeouts, Stop{UndoFrom: 2}},
		{"permanent fault at the last step undoes it first", at(2, 1, 0), StopPermanent, Stop{UndoFrom: 2}},
		{"a step that cannot be undone is left, the ones before are not", at(1, 1, 0), StopPermanent, Stop{UndoFrom: 0}},
		{"failed dispatches: the request may have been delivered", at(0, 3, 3), StopDispatch, Stop{UndoFrom: 0}},
		{"cancel before any claim", at(0, 0, 0), StopCancel, Stop{UndoFrom: -1, Terminal: Cancelled}},
		{"cancel while the first step runs", at(0, 1, 0), StopCancel, Stop{UndoFrom: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := d.StopAt(tc.s, tc.reason); got != tc.want {
				t.Errorf("StopAt = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRecoverCompensation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	p := Policy{MaxFailures: 2, ClaimTimeout: time.Minute, BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 2 * time.Minute}
	d := threeSteps()
	past := now.Add(-time.Second)
	for _, tc := range []struct {
		name string
		in   State
		want Recovery
	}{
		{"a forward step given up on starts the compensation", State{ProcessState: Processing, StepIndex: 2, FailureCount: 1, CompleteBy: past},
			Recovery{Kind: GiveUp, FailureCount: 2, CompleteBy: now.Add(time.Minute), UndoFrom: 2, UndoStep: "c", Cause: CauseTimeout}},
		{"a timed-out compensation is retried", State{ProcessState: Compensating, StepIndex: 2, CompleteBy: past},
			Recovery{Kind: Retry, FailureCount: 1, Delay: time.Second, CompleteBy: now.Add(61 * time.Second), UndoFrom: -1, Cause: CauseTimeout}},
		{"a compensation given up on fails with an alert", State{ProcessState: Compensating, StepIndex: 0, FailureCount: 1, CompleteBy: past},
			Recovery{Kind: GiveUp, FailureCount: 2, CompleteBy: now.Add(2 * time.Minute), UndoFrom: -1, Cause: CauseTimeout}},
		{"an unclaimed compensation is requeued", State{ProcessState: CompensationPending, CompleteBy: past},
			Recovery{Kind: Requeue, CompleteBy: now.Add(time.Minute), UndoFrom: -1}},
		{"an unsent compensation alert is re-sent", State{ProcessState: CompensationFailed, AlertPending: true, CompleteBy: past},
			Recovery{Kind: ResendAlert, CompleteBy: now.Add(2 * time.Minute), UndoFrom: -1}},
		{"compensated is left alone", State{ProcessState: Compensated, CompleteBy: past}, Recovery{Kind: Skip, UndoFrom: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := tc.want
			if want.Cause != "" {
				want.Reason = TimeoutMessage(tc.in)
			}
			if got := p.Recover(d, tc.in, now); got != want {
				t.Errorf("Recover = %+v, want %+v", got, want)
			}
		})
	}
}

// TestDispatchFailed: a claim whose request could not be sent counts a
// failure like a timeout, whatever its CompleteBy, and names the cause.
func TestDispatchFailed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	p := Policy{MaxFailures: 3, ClaimTimeout: time.Minute, BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 2 * time.Minute}
	d := threeSteps()
	claimed := func(state ProcessState, k, failures int) State {
		s := State{ProcessState: state, StepIndex: k, Step: d.Steps[k].Name, Attempt: 4, FailureCount: failures,
			CompleteBy: now.Add(time.Hour), Steps: make([]StepRecord, 3)}
		s.Steps[k].Attempts = failures + 1
		return s
	}
	for _, tc := range []struct {
		name string
		in   State
		want Recovery
	}{
		{"a first failed dispatch is retried after the backoff", claimed(Processing, 0, 0),
			Recovery{Kind: Retry, FailureCount: 1, Delay: time.Second, CompleteBy: now.Add(61 * time.Second), UndoFrom: -1}},
		{"at the threshold the step gives up into its own undo", claimed(Processing, 2, 2),
			Recovery{Kind: GiveUp, FailureCount: 3, CompleteBy: now.Add(time.Minute), UndoFrom: 2, UndoStep: "c"}},
		{"a step without an undo gives up into the ones before", claimed(Processing, 1, 2),
			Recovery{Kind: GiveUp, FailureCount: 3, CompleteBy: now.Add(time.Minute), UndoFrom: 0, UndoStep: "a"}},
		{"an undo that cannot be sent gives up into CompensationFailed", claimed(Compensating, 0, 2),
			Recovery{Kind: GiveUp, FailureCount: 3, CompleteBy: now.Add(2 * time.Minute), UndoFrom: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := p.DispatchFailed(d, tc.in, now, "AccessDenied")
			if !strings.Contains(got.Reason, "AccessDenied") || !strings.Contains(got.Reason, "dispatch of") {
				t.Errorf("Reason %q does not name the cause", got.Reason)
			}
			want := tc.want
			want.Cause, want.Reason = CauseDispatch, got.Reason
			if got != want {
				t.Errorf("DispatchFailed = %+v, want %+v", got, want)
			}
		})
	}
	long := p.DispatchFailed(d, claimed(Processing, 0, 0), now, strings.Repeat("x", 10*MaxErrorBytes))
	if len(long.Reason) > MaxErrorBytes {
		t.Errorf("a long cause makes a Reason of %d bytes, over %d", len(long.Reason), MaxErrorBytes)
	}
}

func TestStatusOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    State
		want Status
	}{
		{State{ProcessState: Pending, EventSeq: 1}, StatusAccepted},
		{State{ProcessState: Processing, EventSeq: 1}, StatusAccepted},
		{State{ProcessState: Processing, EventSeq: 2}, StatusProcessing},
		{State{ProcessState: Pending, EventSeq: 7}, StatusProcessing},
		{State{ProcessState: CompensationPending}, StatusCompensating},
		{State{ProcessState: Compensating}, StatusCompensating},
		{State{ProcessState: CompensationFailed}, StatusCompensationFailed},
		{State{ProcessState: Cancelled}, StatusCancelled},
	} {
		if got := StatusOf(tc.s); got != tc.want {
			t.Errorf("StatusOf(%s, seq %d) = %s, want %s", tc.s.ProcessState, tc.s.EventSeq, got, tc.want)
		}
	}
	for _, s := range ProcessStates() {
		if got, ok := ParseProcessState(string(s)); !ok || got != s {
			t.Errorf("ParseProcessState(%q) = %q, %v", s, got, ok)
		}
		if s.InFlight() == s.Terminal() {
			t.Errorf("%s: in flight %v and terminal %v must differ", s, s.InFlight(), s.Terminal())
		}
	}
}
