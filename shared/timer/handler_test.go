package timer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

const queueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-deadlines"

var now = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// sendFunc is a Sender from a function.
type sendFunc func(ctx context.Context, url string, msgs []queue.Outgoing) error

func (f sendFunc) SendBatch(ctx context.Context, url string, msgs []queue.Outgoing) error {
	return f(ctx, url, msgs)
}

// phase is an order's record in a phase: state, attempt, and a CompleteBy
// that far from now.
func phase(id string, ps workflow.ProcessState, attempt int, in time.Duration) *workflow.State {
	st := workflow.NewState(id, workflow.Reference(), []byte(`{}`), now.Add(-time.Minute), now.Add(in))
	st.ProcessState, st.Attempt = ps, attempt
	st.InFlight = ps.InFlight()
	return &st
}

func done(id string) *workflow.State {
	st := phase(id, workflow.Processed, 2, 0)
	st.InFlight, st.CompleteBy = false, time.Time{}
	return st
}

// rec builds a stream record; a nil state leaves its image out.
func rec(t *testing.T, seqNo string, old, new *workflow.State) events.DynamoDBEventRecord {
	t.Helper()
	r := events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{SequenceNumber: seqNo}}
	if old == nil {
		r.EventName = "INSERT"
	}
	for _, side := range []struct {
		st  *workflow.State
		img *map[string]events.DynamoDBAttributeValue
	}{{old, &r.Change.OldImage}, {new, &r.Change.NewImage}} {
		if side.st != nil {
			img, err := statestore.EncodeImage(*side.st)
			if err != nil {
				t.Fatal(err)
			}
			*side.img = img
		}
	}
	return r
}

func newHandler(t *testing.T, send timer.Sender, buf *logtest.Buffer) *timer.Handler {
	t.Helper()
	deps := actor.Deps{Clock: clock.NewFake(now)}
	if buf != nil {
		deps.Log = slog.New(slog.NewJSONHandler(buf, nil))
	}
	h, err := timer.New(timer.Config{DeadlineQueueURL: queueURL}, send, nil, deps)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestArmsADeadlinePerNewPhase: a write that claims, hands back or
// requeues (a new Attempt or CompleteBy of a watched record) arms one
// Deadline, delayed until that CompleteBy; every other write arms none.
func TestArmsADeadlinePerNewPhase(t *testing.T) {
	t.Parallel()
	const a, b = "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
	claimed := phase(a, workflow.Processing, 1, 30*time.Second)
	sameButSeq := phase(a, workflow.Processing, 1, 30*time.Second)
	sameButSeq.EventSeq = 2
	next := phase(a, workflow.Processing, 2, 30*time.Second)
	next.StepIndex, next.Step = 1, "charge-payment"
	requeued := phase(b, workflow.Pending, 1, 4*time.Minute)
	late := phase(b, workflow.Processing, 2, -3*time.Second)
	tooLong := phase(b, workflow.Processing, 3, 16*time.Minute)
	poison := rec(t, "900", nil, claimed)
	poison.Change.NewImage = map[string]events.DynamoDBAttributeValue{"OrderID": events.NewStringAttribute(a), "EventSeq": events.NewStringAttribute("two")}
	removed := rec(t, "1000", claimed, nil)
	removed.EventName = "REMOVE"

	records := []events.DynamoDBEventRecord{
		rec(t, "100", nil, claimed),                                  // a new order, first step claimed
		rec(t, "200", claimed, sameButSeq),                           // same phase: nothing
		rec(t, "300", sameButSeq, next),                              // committed, next step claimed
		rec(t, "400", next, done(a)),                                 // processed: leaves the watch
		rec(t, "500", phase(b, workflow.Processing, 1, 0), requeued), // handed back
		rec(t, "600", requeued, late),                                // a phase already past: no delay
		rec(t, "700", late, tooLong),                                 // past SQS's longest delay: the sweep's
		poison, removed,
	}
	var got []string
	var buf logtest.Buffer
	h := newHandler(t, sendFunc(func(_ context.Context, url string, msgs []queue.Outgoing) error {
		if url != queueURL {
			t.Errorf("sent to %s", url)
		}
		for _, m := range msgs {
			d, err := message.DecodeDeadline(m.Body)
			if err != nil {
				t.Fatalf("%v: %s", err, m.Body)
			}
			got = append(got, fmt.Sprintf("%s step %d attempt %d in %v", d.OrderID[:4], d.StepIndex, d.Attempt, m.Delay))
			if !d.CompleteBy.Equal(now.Add(m.Delay)) && m.Delay != 0 {
				t.Errorf("%s: delay %v does not end at CompleteBy %v", m.Body, m.Delay, d.CompleteBy)
			}
		}
		return nil
	}), &buf)
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	want := []string{
		"0b7f step 0 attempt 1 in 30s",
		"0b7f step 1 attempt 2 in 30s",
		"3f2c step 0 attempt 1 in 4m0s",
		"3f2c step 0 attempt 2 in 0s",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("armed\n%v\nwant\n%v", got, want)
	}
	var poisoned bool
	for _, l := range buf.Records(t) {
		poisoned = poisoned || (l["level"] == "ERROR" && l["sequenceNumber"] == "900")
	}
	if !poisoned {
		t.Fatalf("the unreadable record was not logged as an error: %s", buf.String())
	}
}

// TestRetriesFromTheFirstRecordNotArmed: when SQS refuses some Deadlines,
// the stream retries from the record of the first of them.
func TestRetriesFromTheFirstRecordNotArmed(t *testing.T) {
	t.Parallel()
	ids := []string{"0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90", "7c9e6679-7425-40de-944b-e07fc1f90ae7"}
	var records []events.DynamoDBEventRecord
	for i, id := range ids {
		records = append(records, rec(t, fmt.Sprint(100*(i+1)), nil, phase(id, workflow.Processing, 1, time.Minute)))
	}
	records = append([]events.DynamoDBEventRecord{rec(t, "50", phase(ids[0], workflow.Processing, 1, 0), done(ids[0]))}, records...)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"entries 1 and 2 refused", &queue.BatchError{Failures: []queue.BatchFailure{{Index: 2, Code: "x"}, {Index: 1, Code: "y"}}}, "200"},
		{"the request failed", boom, "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, sendFunc(func(context.Context, string, []queue.Outgoing) error { return tc.err }), nil)
			resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records})
			if want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: tc.want}}; err != nil || !reflect.DeepEqual(resp.BatchItemFailures, want) {
				t.Fatalf("Handle = %+v, %v; want failure %+v", resp, err, want)
			}
		})
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, err := timer.New(timer.Config{DeadlineQueueURL: "not a url"}, nil, nil, actor.Deps{})
	if err == nil || !strings.Contains(err.Error(), "DeadlineQueueURL") || !strings.Contains(err.Error(), "Sender") {
		t.Fatalf("New = %v, want both the URL and the missing Sender named", err)
	}
}

// TestEachDeadlineGoesInItsOrdersTrace: a batch mixes orders; each
// Deadline carries the trace its record keeps, and one without is sent
// without (queue.Sender then takes none from the context).
func TestEachDeadlineGoesInItsOrdersTrace(t *testing.T) {
	t.Parallel()
	const a, b = "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
	traced := phase(a, workflow.Processing, 1, 30*time.Second)
	traced.Trace = "Root=1-67a1e8c2-0123456789abcdef01234567;Sampled=1"
	untraced := phase(b, workflow.Processing, 1, 30*time.Second)
	var got []trace.Header
	h := newHandler(t, sendFunc(func(_ context.Context, _ string, msgs []queue.Outgoing) error {
		for _, m := range msgs {
			got = append(got, m.Trace)
		}
		return nil
	}), nil)
	records := []events.DynamoDBEventRecord{rec(t, "100", nil, traced), rec(t, "200", nil, untraced)}
	if _, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records}); err != nil {
		t.Fatal(err)
	}
	want := []trace.Header{{Root: "1-67a1e8c2-0123456789abcdef01234567", Sampled: "1"}, {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("traces %+v, want %+v", got, want)
	}
}

// TestWaitingIsArmedOnlyWithinAMessageDelay: a step that waits gets a
// Deadline at the end of its wait when that is within SQS's longest
// delay, so a short wait ends on time; a longer wait gets none and costs
// nothing while it lasts: the Supervisor's sweep finds it due.
func TestWaitingIsArmedOnlyWithinAMessageDelay(t *testing.T) {
	t.Parallel()
	const a, b = "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
	short := phase(a, workflow.Waiting, 3, 20*time.Second)
	long := phase(b, workflow.Waiting, 3, 30*time.Minute)
	short.WaitRound, long.WaitRound = 1, 1
	var got []string
	h := newHandler(t, sendFunc(func(_ context.Context, _ string, msgs []queue.Outgoing) error {
		for _, m := range msgs {
			d, err := message.DecodeDeadline(m.Body)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s attempt %d in %v", d.OrderID[:4], d.Attempt, m.Delay))
		}
		return nil
	}), nil)
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		rec(t, "100", phase(a, workflow.Processing, 3, 0), short),
		rec(t, "200", phase(b, workflow.Processing, 3, 0), long),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	if want := []string{"0b7f attempt 3 in 20s"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("armed %v, want %v", got, want)
	}
}
