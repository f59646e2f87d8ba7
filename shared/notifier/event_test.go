package notifier_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/workflow"
)

var at = time.Date(2026, 11, 22, 9, 41, 5, 120_000_000, time.UTC)

// state is a record of order o-1 for client-a at the given state and seq.
func state(ps workflow.ProcessState, seq int) workflow.State {
	return workflow.State{
		OrderID: "o-1", Workflow: "order-v1", StepIndex: 1, Step: "charge-payment", ProcessState: ps,
		Attempt: 3, ClientID: "client-a", EventSeq: seq, CreatedAt: at.Add(-time.Minute), UpdatedAt: at,
	}
}

func event(status workflow.Status, ps workflow.ProcessState, seq int) notifier.Event {
	return notifier.Event{
		V: notifier.Version, Kind: "order.event", OrderID: "o-1", ClientID: "client-a", Seq: seq, Status: status, State: ps,
		Priority: workflow.PriorityNormal, Step: "charge-payment", StepIndex: 1, At: at,
	}
}

// leak is what SQS answers a role that lost its permission, with the
// queue's URL around it: a failed dispatch's cause.
const leak = "send to https://sqs.eu-west-1.amazonaws.com/444455556666/agent-charge-payment: api error AccessDenied: " +
	"User: arn:aws:sts::444455556666:assumed-role/scheduler/s is not authorized to perform: sqs:sendmessage"

func TestEventOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 1000)
	withReason := func(e notifier.Event, code workflow.ReasonCode, text string) notifier.Event {
		e.Reason, e.ReasonText = code, text
		return e
	}
	tests := []struct {
		name   string
		change func(*workflow.State)
		want   notifier.Event
	}{
		{"accepted", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.Pending, 1 }, event(workflow.StatusAccepted, workflow.Pending, 1)},
		{"claimed is still accepted", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.Processing, 1 }, event(workflow.StatusAccepted, workflow.Processing, 1)},
		{"next step", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.Processing, 2 }, event(workflow.StatusProcessing, workflow.Processing, 2)},
		{"processed", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.Processed, 3 }, event(workflow.StatusProcessed, workflow.Processed, 3)},
		{
			"error with its reason",
			func(s *workflow.State) {
				s.ProcessState, s.EventSeq, s.LastError = workflow.Error, 3, workflow.RejectionMessage("card-declined", leak, false)
			},
			withReason(event(workflow.StatusError, workflow.Error, 3), workflow.ReasonRejected, "step charge-payment was refused by its service (card-declined)"),
		},
		{
			"a failed dispatch without its cause",
			func(s *workflow.State) {
				s.ProcessState, s.EventSeq, s.LastError = workflow.CompensationPending, 4, workflow.DispatchFailurePrefix+"step charge-payment attempt 3 failed: "+leak
			},
			withReason(event(workflow.StatusCompensating, workflow.CompensationPending, 4), workflow.ReasonDispatchFailed, "step charge-payment could not be sent for processing"),
		},
		{"compensating unclaimed", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.CompensationPending, 4 }, event(workflow.StatusCompensating, workflow.CompensationPending, 4)},
		{"compensated", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.Compensated, 5 }, event(workflow.StatusCompensated, workflow.Compensated, 5)},
		{"compensation failed", func(s *workflow.State) { s.ProcessState, s.EventSeq = workflow.CompensationFailed, 5 }, event(workflow.StatusCompensationFailed, workflow.CompensationFailed, 5)},
		{
			"cancelled",
			func(s *workflow.State) { s.ProcessState, s.EventSeq, s.Cancelled = workflow.Cancelled, 2, true },
			func() notifier.Event {
				e := event(workflow.StatusCancelled, workflow.Cancelled, 2)
				e.Cancelled = true
				return e
			}(),
		},
		{
			"an error of a text no producer writes",
			func(s *workflow.State) { s.ProcessState, s.EventSeq, s.LastError = workflow.Error, 3, long },
			withReason(event(workflow.StatusError, workflow.Error, 3), workflow.ReasonFailed, "step charge-payment failed"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := state(workflow.Pending, 1)
			tc.change(&st)
			got := notifier.EventOf(st)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("EventOf =\n%+v\nwant\n%+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("EventOf made an invalid event: %v", err)
			}
			body, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []string{"444455556666", "arn:", "https://sqs", "AccessDenied", "é"} {
				if strings.Contains(string(body), l) {
					t.Errorf("the event quotes the cause (%q): %s", l, body)
				}
			}
		})
	}
}

// TestEventGolden: the event the notifier writes for a fixed record is
// shared/api's golden event.json byte for byte, the document clients decode.
func TestEventGolden(t *testing.T) {
	t.Parallel()
	st := workflow.State{
		OrderID: "9b2f0c1e-5d7a-4c3b-8e6f-0a1b2c3d4e5f", Workflow: "order-v1", StepIndex: 1, Step: "charge-payment",
		ProcessState: workflow.CompensationPending, Attempt: 4, LastError: workflow.RejectionMessage("card-declined", "the issuer declined the card", false),
		ClientID: "shop-web", Priority: workflow.PriorityHigh, EventSeq: 3, Cancelled: true, CreatedAt: at.Add(-10 * time.Minute), UpdatedAt: at,
		Steps: []workflow.StepRecord{{Name: "reserve-inventory", State: workflow.StepSucceeded}, {Name: "charge-payment", State: workflow.StepFailed}},
		Owner: "arn:aws:sts::111122223333:assumed-role/shop-checkout/session-1", // never in an event
	}
	st.Steps[1].Error = st.LastError
	got, err := json.Marshal(notifier.EventOf(st))
	if err != nil {
		t.Fatal(err)
	}
	golden.Equal(t, "../api/testdata/event.json", got)
}

// sameEvent compares events, At as an instant: JSON keeps the offset but
// not the time.Location behind it.
func sameEvent(a, b notifier.Event) bool {
	if !a.At.Equal(b.At) {
		return false
	}
	a.At, b.At = time.Time{}, time.Time{}
	return a == b
}
