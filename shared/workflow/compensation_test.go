package workflow

import (
	"reflect"
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
	d := threeSteps() // a and c have an undo, b has none
	for _, tc := range []struct {
		name     string
		k        int
		mayApply bool
		reason   StopReason
		want     Stop
	}{
		// A claimed step is never proof of nothing applied: a copy of its
		// request may still reach the remote after a rejection.
		{"permanent fault at step 0 undoes the step itself", 0, false, StopPermanent, Stop{UndoFrom: 0}},
		{"timeouts at the first step undo it", 0, true, StopTimeouts, Stop{UndoFrom: 0}},
		{"a clean rejection of a step without an undo applied nothing", 1, false, StopPermanent, Stop{UndoFrom: 0}},
		{"failed dispatches: the request may have been delivered", 0, true, StopDispatch, Stop{UndoFrom: 0}},
		{"cancel before any claim", 0, false, StopCancel, Stop{UndoFrom: -1, Terminal: Cancelled}},
		{"cancel while the first step runs", 0, true, StopCancel, Stop{UndoFrom: 0}},
		// A step without an undo that may have been applied: the order
		// cannot be undone whole, so nothing is undone and it waits in
		// Error for an operator.
		{"an uncertain rejection of a step without an undo", 1, true, StopPermanent, Stop{UndoFrom: -1, Terminal: Error, Residue: []string{"b"}}},
		{"timeouts of a step without an undo", 1, true, StopTimeouts, Stop{UndoFrom: -1, Terminal: Error, Residue: []string{"b"}}},
		{"failed dispatches of a step without an undo", 1, true, StopDispatch, Stop{UndoFrom: -1, Terminal: Error, Residue: []string{"b"}}},
		{"a rejection after a step without an undo succeeded", 2, false, StopPermanent, Stop{UndoFrom: -1, Terminal: Error, Residue: []string{"b"}}},
		{"timeouts after a step without an undo succeeded", 2, true, StopTimeouts, Stop{UndoFrom: -1, Terminal: Error, Residue: []string{"b"}}},
		// A cancel is the operator's decision: what can be undone is.
		{"cancel while a step without an undo runs", 1, true, StopCancel, Stop{UndoFrom: 0, Residue: []string{"b"}}},
		{"cancel after a step without an undo succeeded", 2, true, StopCancel, Stop{UndoFrom: 2, Residue: []string{"b"}}},
		{"cancel before a step without an undo was claimed", 1, false, StopCancel, Stop{UndoFrom: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := d.StopAt(tc.k, tc.mayApply, tc.reason); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("StopAt = %+v, want %+v", got, tc.want)
			}
		})
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
