package notifier_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/workflow"
)

// stream builds a stream batch with n status changes of client-a's orders,
// among records that need no event (a claim that leaves the seq alone, an
// order without a client), so that event k is not record k. It returns the
// records, the events in stream order and, for each event, its record's
// index.
func stream(t testing.TB, n int) (records []events.DynamoDBEventRecord, want []notifier.Event, recordOf []int) {
	t.Helper()
	add := func(r events.DynamoDBEventRecord) {
		r.Change.SequenceNumber = strconv.Itoa(100 + len(records))
		records = append(records, r)
	}
	for k := range n {
		order := fmt.Sprintf("o-%02d", k)
		old, cur := st(order, workflow.Pending, 1), st(order, workflow.Processing, 2)
		if k%2 == 0 {
			old, cur = nil, st(order, workflow.Pending, 1)
		}
		recordOf = append(recordOf, len(records))
		want = append(want, notifier.EventOf(*cur))
		if old == nil {
			add(rec(t, "INSERT", "", nil, cur))
		} else {
			add(rec(t, "MODIFY", "", old, cur))
		}
		if k%3 == 1 {
			add(rec(t, "MODIFY", "", st(order, workflow.Processing, 2), st(order, workflow.Processing, 2)))
		}
		if k%4 == 2 {
			add(rec(t, "INSERT", "", nil, withClient(st("o-anon", workflow.Pending, 1), "")))
		}
	}
	return records, want, recordOf
}

// fakeSNS answers PublishBatch requests with answer (nil: every entry is
// published) and records each request and the events SNS took.
type fakeSNS struct {
	answer func(call int, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error)

	mu        sync.Mutex
	calls     []*sns.PublishBatchInput
	published map[[2]any]int // times each (order, seq) was published
}

func (f *fakeSNS) client() batchClient {
	return func(_ context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, in)
		out, err := allPublished(in), error(nil)
		if f.answer != nil {
			out, err = f.answer(len(f.calls), in)
		}
		if err != nil {
			return nil, err
		}
		f.record(in, out)
		return out, nil
	}
}

// record counts the entries out lists as successful.
func (f *fakeSNS) record(in *sns.PublishBatchInput, out *sns.PublishBatchOutput) {
	if f.published == nil {
		f.published = map[[2]any]int{}
	}
	for _, s := range out.Successful {
		for _, e := range in.PublishBatchRequestEntries {
			if aws.ToString(e.Id) == aws.ToString(s.Id) {
				ev, _ := notifier.DecodeEvent(aws.ToString(e.Message))
				f.published[[2]any{ev.OrderID, ev.Seq}]++
			}
		}
	}
}

// failing answers a request with every entry published but those in ids.
func failing(in *sns.PublishBatchInput, ids ...string) *sns.PublishBatchOutput {
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		id := aws.ToString(e.Id)
		if slices.Contains(ids, id) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again")})
		} else {
			out.Successful = append(out.Successful, types.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + id)})
		}
	}
	return out
}

func TestNotifyPublishesInBatchesOfTen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		events    int
		wantCalls []int // entries per PublishBatch request
	}{
		{1, []int{1}}, {10, []int{10}}, {11, []int{10, 1}}, {25, []int{10, 10, 5}},
	} {
		t.Run(fmt.Sprintf("%d events", tc.events), func(t *testing.T) {
			t.Parallel()
			records, want, _ := stream(t, tc.events)
			f := &fakeSNS{}
			resp, err := newHandler(t, notifier.NewPublisher(f.client(), topicARN), nil).Handle(context.Background(), events.DynamoDBEvent{Records: records})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
			}
			var got []notifier.Event
			var sizes []int
			for _, in := range f.calls {
				sizes = append(sizes, len(in.PublishBatchRequestEntries))
				if aws.ToString(in.TopicArn) != topicARN {
					t.Errorf("TopicArn %q, want %q", aws.ToString(in.TopicArn), topicARN)
				}
				got = append(got, entryEvents(t, in)...)
			}
			if !reflect.DeepEqual(sizes, tc.wantCalls) {
				t.Errorf("entries per request %v, want %v", sizes, tc.wantCalls)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("events in request order\n%+v\nwant in stream order\n%+v", got, want)
			}
		})
	}
}

// entryEvents decodes a request's entries, checking that their Ids are
// unique within it and their attributes match their bodies.
func entryEvents(t *testing.T, in *sns.PublishBatchInput) []notifier.Event {
	t.Helper()
	ids := map[string]bool{}
	var evs []notifier.Event
	for _, e := range in.PublishBatchRequestEntries {
		id := aws.ToString(e.Id)
		if id == "" || ids[id] {
			t.Errorf("entry Id %q empty or repeated in its request", id)
		}
		ids[id] = true
		ev, err := notifier.DecodeEvent(aws.ToString(e.Message))
		if err != nil {
			t.Fatalf("entry %s: %v", id, err)
		}
		if got, want := entryAttributes(e), wantAttributes(ev); !reflect.DeepEqual(got, want) {
			t.Errorf("entry %s: attributes %v, want %v", id, got, want)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestNotifyReportsTheFirstEventNotPublished: 25 events go out in requests of
// 10, 10 and 5. Whatever the second request answers, the record reported is
// that of the first event not published, no request follows, and the retry
// from it publishes the rest: the events before it once, the ones after it
// that SNS took a second time.
func TestNotifyReportsTheFirstEventNotPublished(t *testing.T) {
	t.Parallel()
	unavailable := errors.New("SNS unavailable")
	tests := []struct {
		name      string
		second    func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error)
		wantEvent int // the first event not published
		wantTwice int // events after it in its request that SNS took
	}{
		{"an entry in the middle fails", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) { return failing(in, "4"), nil }, 14, 5},
		{"the first entry fails", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) { return failing(in, "0"), nil }, 10, 9},
		{"the last entry fails", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) { return failing(in, "9"), nil }, 19, 0},
		{"two entries fail, listed out of order", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
			out := failing(in, "7", "3")
			out.Failed[0], out.Failed[1] = out.Failed[1], out.Failed[0]
			return out, nil
		}, 13, 5},
		{"an entry unanswered", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
			out := allPublished(in)
			out.Successful = append(out.Successful[:6], out.Successful[7:]...)
			return out, nil
		}, 16, 3},
		{"the whole request fails", func(*sns.PublishBatchInput) (*sns.PublishBatchOutput, error) { return nil, unavailable }, 10, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			records, want, recordOf := stream(t, 25)
			down := true
			f := &fakeSNS{answer: func(call int, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				if down && call == 2 {
					return tc.second(in)
				}
				return allPublished(in), nil
			}}
			h := newHandler(t, notifier.NewPublisher(f.client(), topicARN), nil)
			resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records})
			failed := records[recordOf[tc.wantEvent]].Change.SequenceNumber
			if err != nil || !reflect.DeepEqual(resp.BatchItemFailures, []events.DynamoDBBatchItemFailure{{ItemIdentifier: failed}}) {
				t.Fatalf("Handle = %+v, %v; want the failure of record %s (event %d)", resp, err, failed, tc.wantEvent)
			}
			if len(f.calls) != 2 {
				t.Fatalf("%d requests, want 2: none after the one that failed", len(f.calls))
			}

			down = false
			resp, err = h.Handle(context.Background(), events.DynamoDBEvent{Records: records[recordOf[tc.wantEvent]:]})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("retry: Handle = %+v, %v; want no failures", resp, err)
			}
			checkPublished(t, f.published, want, tc.wantEvent, tc.wantTwice)
		})
	}
}

// checkPublished asserts that every event was published, those up to first
// exactly once, and twice more than once in all.
func checkPublished(t *testing.T, published map[[2]any]int, want []notifier.Event, first, twice int) {
	t.Helper()
	total := 0
	for k, ev := range want {
		n := published[[2]any{ev.OrderID, ev.Seq}]
		total += n
		if n == 0 || n > 2 || (k <= first && n != 1) {
			t.Errorf("event %d (%s#%d) published %d times over both invocations", k, ev.OrderID, ev.Seq, n)
		}
	}
	if len(published) != len(want) || total != len(want)+twice {
		t.Errorf("%d distinct events published %d times, want %d published %d times", len(published), total, len(want), len(want)+twice)
	}
}
