package supervisor

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// redeliveries records what a Handler asked to bring back, and when.
type redeliveries map[string]time.Duration

func (r redeliveries) After(_ context.Context, rec events.SQSMessage, wait time.Duration) error {
	r[rec.MessageId] = wait
	return nil
}

func deadlineOf(st workflow.State) string {
	return message.Encode(message.NewDeadline(st.OrderID, st.StepIndex, st.Attempt, st.CompleteBy))
}

// TestDeadlinesRecoverLikeTheSweep: a Deadline of the phase a record is
// still in, once its CompleteBy passed, is recovered as the sweep would;
// one of a phase the record left, a duplicate, or one for a missing order
// is dropped after one read; one that came early comes back when due;
// poison goes back to the queue, and so to its dead-letter queue.
func TestDeadlinesRecoverLikeTheSweep(t *testing.T) {
	t.Parallel()
	past, soon := testNow.Add(-time.Second), testNow.Add(3*time.Second)
	stuck := processing(orderA, 0, past)
	moved := processing(orderB, 0, past)
	movedOn := moved // the Deadline of the phase before the one stored
	movedOn.Attempt--
	early := processing(orderC, 0, soon)
	f := newFixture(t, testConfig(), testNow, []workflow.State{stuck, moved, early})
	again := redeliveries{}
	f.h.redeliver = again

	msg := func(id, body string) events.SQSMessage { return events.SQSMessage{MessageId: id, Body: body} }
	resp, err := f.h.HandleDeadlines(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("m-stuck", deadlineOf(stuck)),
		msg("m-dup", deadlineOf(stuck)), // the same Deadline twice: the record has moved on by then
		msg("m-moved", deadlineOf(movedOn)),
		msg("m-early", deadlineOf(early)),
		msg("m-missing", deadlineOf(processing(orderD, 0, past))),
		msg("m-poison", `{"v":1,"kind":"deadline","orderId":"`+orderE+`"}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if want := []string{"m-early", "m-poison"}; !reflect.DeepEqual(failed, want) {
		t.Fatalf("batch item failures %v, want %v", failed, want)
	}
	if want := (redeliveries{"m-early": 3 * time.Second}); !reflect.DeepEqual(again, want) {
		t.Fatalf("redeliveries %v, want %v (poison waits out its visibility)", again, want)
	}
	f.Calls.Check(t,
		"PeekHead "+orderA, "GetState "+orderA, "Apply "+orderA+" retried", "Send scheduler "+orderA,
		"PeekHead "+orderA,
		"PeekHead "+orderB,
		"PeekHead "+orderC,
		"PeekHead "+orderD,
	)
	if st := f.Store.Record(t, orderA); st.ProcessState != workflow.Pending || st.FailureCount != 1 {
		t.Fatalf("recovered record %+v", st)
	}
}

// TestADeadlineRecoversOnlyWhatTheWholeReadFindsInItsPhase: the head, read
// eventually consistent, may still show a phase the record has left; the
// recovery reads the whole record and leaves one that moved on.
func TestADeadlineRecoversOnlyWhatTheWholeReadFindsInItsPhase(t *testing.T) {
	t.Parallel()
	stuck := processing(orderA, 0, testNow.Add(-time.Second))
	f := newFixture(t, testConfig(), testNow, []workflow.State{stuck})
	moved := stuck
	moved.Attempt++ // another Supervisor recovered it after the head was read
	f.Store.Fault = func(method string, _ workflow.Change) error {
		if method == "GetState" {
			f.Store.Put(moved)
		}
		return nil
	}
	resp, err := f.h.HandleDeadlines(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: deadlineOf(stuck)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v, %v", resp.BatchItemFailures, err)
	}
	f.Calls.Check(t, "PeekHead "+orderA, "GetState "+orderA)
}

// TestDeadlineRecoveryThatFailsComesBackSoon: a store that refuses the
// recovery asks for the Deadline again within seconds, not after the
// queue's visibility timeout.
func TestDeadlineRecoveryThatFailsComesBackSoon(t *testing.T) {
	t.Parallel()
	stuck := processing(orderA, 0, testNow.Add(-time.Second))
	f := newFixture(t, testConfig(), testNow, []workflow.State{stuck})
	again := redeliveries{}
	f.h.redeliver = again
	f.Store.Fault = func(method string, c workflow.Change) error {
		if method == "Apply" {
			return errStore
		}
		return nil
	}
	rec := events.SQSMessage{MessageId: "m-1", Body: deadlineOf(stuck), Attributes: map[string]string{"ApproximateReceiveCount": "2"}}
	resp, _ := f.h.HandleDeadlines(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
	if len(resp.BatchItemFailures) != 1 || again["m-1"] != 2*time.Second {
		t.Fatalf("failures %+v, redeliveries %v; want m-1 back in 2s", resp.BatchItemFailures, again)
	}
}
