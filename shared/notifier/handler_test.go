package notifier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// publishFunc is a Sender made of a function.
type publishFunc func(ctx context.Context, evs []notifier.Event) (int, error)

func (f publishFunc) PublishBatch(ctx context.Context, evs []notifier.Event) (int, error) {
	return f(ctx, evs)
}

// publishNone is a Sender that publishes every event, nowhere.
func publishNone(_ context.Context, evs []notifier.Event) (int, error) { return len(evs), nil }

var _ notifier.Sender = publishFunc(nil)

// sent names a published event: order, seq and status.
type sent struct {
	Order  string
	Seq    int
	Status workflow.Status
}

func (s sent) String() string { return fmt.Sprintf("%s#%d(%s)", s.Order, s.Seq, s.Status) }

// recorder is a Sender that records what it publishes and stops at the
// first event fail refuses.
type recorder struct {
	mu        sync.Mutex
	fail      func(notifier.Event) error
	calls     int
	attempted []sent
	published []sent
	events    []notifier.Event
}

func (r *recorder) PublishBatch(_ context.Context, evs []notifier.Event) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	for i, ev := range evs {
		s := sent{ev.OrderID, ev.Seq, ev.Status}
		r.attempted = append(r.attempted, s)
		if r.fail != nil {
			if err := r.fail(ev); err != nil {
				return i, err
			}
		}
		r.published = append(r.published, s)
		r.events = append(r.events, ev)
	}
	return len(evs), nil
}

// rec builds a stream record; a nil state leaves its image out.
func rec(t testing.TB, name, seqNo string, old, new *workflow.State) events.DynamoDBEventRecord {
	t.Helper()
	r := events.DynamoDBEventRecord{
		EventName: name, EventSource: "aws:dynamodb", AWSRegion: "us-east-1",
		Change: events.DynamoDBStreamRecord{SequenceNumber: seqNo, StreamViewType: "NEW_AND_OLD_IMAGES"},
	}
	for _, side := range []struct {
		st  *workflow.State
		img *map[string]events.DynamoDBAttributeValue
	}{{old, &r.Change.OldImage}, {new, &r.Change.NewImage}} {
		if side.st == nil {
			continue
		}
		img, err := statestore.EncodeImage(*side.st)
		if err != nil {
			t.Fatal(err)
		}
		*side.img = img
	}
	return r
}

// st is a record of an order for client-a.
func st(order string, ps workflow.ProcessState, seq int) *workflow.State {
	s := state(ps, seq)
	s.OrderID = order
	return &s
}

func withClient(s *workflow.State, client string) *workflow.State { s.ClientID = client; return s }

// poisonImage is an image no state record decodes from.
func poisonImage() map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		"OrderID":  events.NewStringAttribute("o-1"),
		"EventSeq": events.NewStringAttribute("two"),
	}
}

func newHandler(t testing.TB, pub notifier.Sender, log *slog.Logger) *notifier.Handler {
	t.Helper()
	h, err := notifier.New(notifier.Config{OrderEventsTopicARN: topicARN}, pub, actor.Deps{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNotifyPublishesEachStatusChangeOnce(t *testing.T) {
	t.Parallel()
	const (
		pending, processing = workflow.Pending, workflow.Processing
	)
	poisonNew := rec(t, "MODIFY", "s1", st("o-1", processing, 1), nil)
	poisonNew.Change.NewImage = poisonImage()
	poisonOld := rec(t, "MODIFY", "s1", nil, st("o-1", processing, 3))
	poisonOld.Change.OldImage = poisonImage()
	keysOnly := rec(t, "MODIFY", "s1", nil, nil)
	keysOnly.Change.Keys = map[string]events.DynamoDBAttributeValue{"OrderID": events.NewStringAttribute("o-1")}
	removeWithNew := rec(t, "REMOVE", "s1", st("o-1", processing, 5), st("o-1", processing, 6))
	// An old image that does not decode, but whose EventSeq reads: the
	// write is known to have left the status alone, so no duplicate.
	oddOldSameSeq := rec(t, "MODIFY", "s1", st("o-1", processing, 3), st("o-1", processing, 3))
	oddOldSameSeq.Change.OldImage["Attempt"] = events.NewStringAttribute("x")

	tests := []struct {
		name    string
		records []events.DynamoDBEventRecord
		want    []sent
	}{
		{"seq increase", []events.DynamoDBEventRecord{rec(t, "MODIFY", "s1", st("o-1", processing, 1), st("o-1", processing, 2))},
			[]sent{{"o-1", 2, workflow.StatusProcessing}}},
		{"same seq (a claim)", []events.DynamoDBEventRecord{rec(t, "MODIFY", "s1", st("o-1", pending, 1), st("o-1", processing, 1))}, nil},
		{"lower seq", []events.DynamoDBEventRecord{rec(t, "MODIFY", "s1", st("o-1", processing, 3), st("o-1", processing, 2))}, nil},
		{"no client", []events.DynamoDBEventRecord{rec(t, "MODIFY", "s1", withClient(st("o-1", processing, 1), ""), withClient(st("o-1", processing, 2), ""))}, nil},
		{"client only in the old image", []events.DynamoDBEventRecord{rec(t, "MODIFY", "s1", st("o-1", processing, 1), withClient(st("o-1", processing, 2), ""))}, nil},
		{"REMOVE", []events.DynamoDBEventRecord{rec(t, "REMOVE", "s1", st("o-1", workflow.Processed, 3), nil)}, nil},
		{"REMOVE even with a higher new image", []events.DynamoDBEventRecord{removeWithNew}, nil},
		{"INSERT", []events.DynamoDBEventRecord{rec(t, "INSERT", "s1", nil, st("o-1", pending, 1))},
			[]sent{{"o-1", 1, workflow.StatusAccepted}}},
		{"INSERT without client", []events.DynamoDBEventRecord{rec(t, "INSERT", "s1", nil, withClient(st("o-1", pending, 1), ""))}, nil},
		{"terminal status", []events.DynamoDBEventRecord{rec(t, "MODIFY", "s1", st("o-1", workflow.Compensating, 4), st("o-1", workflow.Compensated, 5))},
			[]sent{{"o-1", 5, workflow.StatusCompensated}}},
		{"poison new image skipped, the rest published", []events.DynamoDBEventRecord{
			poisonNew,
			rec(t, "MODIFY", "s2", st("o-2", processing, 1), st("o-2", processing, 2)),
		}, []sent{{"o-2", 2, workflow.StatusProcessing}}},
		{"keys-only record skipped", []events.DynamoDBEventRecord{keysOnly}, nil},
		{"unreadable old image publishes", []events.DynamoDBEventRecord{poisonOld}, []sent{{"o-1", 3, workflow.StatusProcessing}}},
		{"unreadable old image with its seq read drops a write that kept it", []events.DynamoDBEventRecord{oddOldSameSeq}, nil},
		{"record that makes no valid event skipped", []events.DynamoDBEventRecord{
			rec(t, "MODIFY", "s1", st("o-1", processing, 1), st("o-1", "Lost", 2)),
			rec(t, "MODIFY", "s2", st("o-2", processing, 1), st("o-2", processing, 2)),
		}, []sent{{"o-2", 2, workflow.StatusProcessing}}},
		{"several orders in stream order", []events.DynamoDBEventRecord{
			rec(t, "INSERT", "s1", nil, st("o-1", pending, 1)),
			rec(t, "INSERT", "s2", nil, st("o-2", pending, 1)),
			rec(t, "MODIFY", "s3", st("o-1", pending, 1), st("o-1", processing, 1)),
			rec(t, "MODIFY", "s4", st("o-1", processing, 1), st("o-1", processing, 2)),
			rec(t, "MODIFY", "s5", st("o-2", pending, 1), st("o-2", workflow.Cancelled, 2)),
			rec(t, "MODIFY", "s6", st("o-1", processing, 2), st("o-1", workflow.Processed, 3)),
		}, []sent{
			{"o-1", 1, workflow.StatusAccepted}, {"o-2", 1, workflow.StatusAccepted}, {"o-1", 2, workflow.StatusProcessing},
			{"o-2", 2, workflow.StatusCancelled}, {"o-1", 3, workflow.StatusProcessed},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{}
			resp, err := newHandler(t, r, nil).Handle(context.Background(), events.DynamoDBEvent{Records: tc.records})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
			}
			if !reflect.DeepEqual(r.published, tc.want) {
				t.Errorf("published %v, want %v", r.published, tc.want)
			}
		})
	}
}

func TestNotifyStopsAtTheFirstFailureAndResumesFromIt(t *testing.T) {
	t.Parallel()
	batch := func(t *testing.T) []events.DynamoDBEventRecord {
		return []events.DynamoDBEventRecord{
			rec(t, "INSERT", "100", nil, st("o-1", workflow.Pending, 1)),
			rec(t, "INSERT", "200", nil, st("o-2", workflow.Pending, 1)),
			rec(t, "MODIFY", "300", st("o-1", workflow.Pending, 1), st("o-1", workflow.Processing, 2)),
			rec(t, "MODIFY", "400", st("o-2", workflow.Pending, 1), st("o-2", workflow.Processing, 2)),
		}
	}
	all := []sent{
		{"o-1", 1, workflow.StatusAccepted}, {"o-2", 1, workflow.StatusAccepted},
		{"o-1", 2, workflow.StatusProcessing}, {"o-2", 2, workflow.StatusProcessing},
	}
	for _, failAt := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("failing record %d", failAt), func(t *testing.T) {
			t.Parallel()
			records := batch(t)
			down := true
			r := &recorder{fail: func(ev notifier.Event) error {
				if down && ev.OrderID == all[failAt].Order && ev.Seq == all[failAt].Seq {
					return errors.New("SNS unavailable")
				}
				return nil
			}}
			h := newHandler(t, r, nil)
			resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records})
			if err != nil {
				t.Fatalf("Handle returned an error, which would retry the whole batch: %v", err)
			}
			want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: records[failAt].Change.SequenceNumber}}
			if !reflect.DeepEqual(resp.BatchItemFailures, want) {
				t.Fatalf("BatchItemFailures = %+v, want %+v", resp.BatchItemFailures, want)
			}
			if !reflect.DeepEqual(r.attempted, all[:failAt+1]) || r.calls != 1 {
				t.Errorf("attempted %v in %d calls, want %v in one: nothing after the failure", r.attempted, r.calls, all[:failAt+1])
			}

			// Lambda retries from the reported record.
			down = false
			resp, err = h.Handle(context.Background(), events.DynamoDBEvent{Records: records[failAt:]})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("retry: Handle = %+v, %v; want no failures", resp, err)
			}
			if !reflect.DeepEqual(r.published, all) {
				t.Errorf("published over both invocations %v, want each event once, in order: %v", r.published, all)
			}
		})
	}
}

func TestNotifyRetriesAPanickingPublish(t *testing.T) {
	t.Parallel()
	records := []events.DynamoDBEventRecord{
		rec(t, "INSERT", "100", nil, st("o-1", workflow.Pending, 1)),
		rec(t, "INSERT", "200", nil, st("o-2", workflow.Pending, 1)),
	}
	calls := 0
	h := newHandler(t, publishFunc(func(context.Context, []notifier.Event) (int, error) {
		calls++
		panic("bug")
	}), nil)
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records})
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: "100"}}
	if err != nil || !reflect.DeepEqual(resp.BatchItemFailures, want) || calls != 1 {
		t.Fatalf("Handle = %+v, %v after %d calls; want failure %+v after 1", resp, err, calls, want)
	}
}

// A Sender that reports more published than it was given, or fewer without
// saying why, is not believed past what it vouches for.
func TestNotifyDistrustsAMisbehavingSender(t *testing.T) {
	t.Parallel()
	records := []events.DynamoDBEventRecord{
		rec(t, "INSERT", "100", nil, st("o-1", workflow.Pending, 1)),
		rec(t, "INSERT", "200", nil, st("o-2", workflow.Pending, 1)),
		rec(t, "INSERT", "300", nil, st("o-3", workflow.Pending, 1)),
	}
	for _, tc := range []struct {
		n    int
		want string
	}{{-1, "100"}, {4, "100"}, {1, "200"}, {0, "100"}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, publishFunc(func(context.Context, []notifier.Event) (int, error) { return tc.n, nil }), nil)
			resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records})
			if want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: tc.want}}; err != nil || !reflect.DeepEqual(resp.BatchItemFailures, want) {
				t.Fatalf("Handle = %+v, %v; want failure %+v", resp, err, want)
			}
		})
	}
}

func TestNotifyLogs(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	h := newHandler(t, publishFunc(func(_ context.Context, evs []notifier.Event) (int, error) {
		for i, ev := range evs {
			if ev.OrderID == "o-3" {
				return i, errors.New("SNS unavailable")
			}
		}
		return len(evs), nil
	}), slog.New(slog.NewJSONHandler(&buf, nil)))
	poison := rec(t, "MODIFY", "200", nil, nil)
	poison.Change.NewImage = poisonImage()
	records := []events.DynamoDBEventRecord{
		rec(t, "MODIFY", "100", st("o-1", workflow.Processing, 1), st("o-1", workflow.Processing, 2)),
		poison,
		rec(t, "INSERT", "300", nil, st("o-3", workflow.Pending, 1)),
		rec(t, "INSERT", "400", nil, st("o-4", workflow.Pending, 1)),
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-7"})
	if _, err := h.Handle(ctx, events.DynamoDBEvent{Records: records}); err != nil {
		t.Fatal(err)
	}
	// The records are read before their events are published, together:
	// the skipped record is logged first. redelivered counts the records the
	// retry brings again, the failed one included.
	logs := buf.Records(t)
	want := []map[string]any{
		{"level": "ERROR", "msg": "poison stream record skipped: new image unreadable", "requestId": "req-7", "sequenceNumber": "200"},
		{"level": "INFO", "msg": "events published", "requestId": "req-7", "events": 1.0, "records": 4.0, "topic": topicARN},
		// The one line per record reported as a batch item failure, which
		// the stack's BatchItemFailures metric counts.
		{"level": "WARN", "msg": actor.BatchItemFailed, "reason": "event not published; the stream retries from this record", "requestId": "req-7",
			"error": "SNS unavailable", "sequenceNumber": "300", "orderId": "o-3", "seq": 1.0, "status": "accepted", "redelivered": 2.0},
	}
	if len(logs) != len(want) {
		t.Fatalf("%d log records, want %d:\n%s", len(logs), len(want), buf.String())
	}
	for i, w := range want {
		for k, v := range w {
			if logs[i][k] != v {
				t.Errorf("log %d: %s = %v, want %v\n%s", i, k, logs[i][k], v, buf.String())
			}
		}
	}
	if e, _ := logs[0]["error"].(string); e == "" {
		t.Errorf("poison log has no error: %v", logs[0])
	}
	if e, _ := logs[2]["error"].(string); !strings.Contains(e, "SNS unavailable") {
		t.Errorf("failure log has error %q, want the sender's", e)
	}
}

// TestNotifyLogsEachEventAtDebug: an operator who turns the level down to
// debug sees one line per published event, naming its order and status.
func TestNotifyLogsEachEventAtDebug(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	h := newHandler(t, publishFunc(publishNone), slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	records := []events.DynamoDBEventRecord{
		rec(t, "INSERT", "100", nil, st("o-1", workflow.Pending, 1)),
		rec(t, "MODIFY", "200", st("o-2", workflow.Processing, 1), st("o-2", workflow.Processing, 2)),
	}
	if _, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: records}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range buf.Records(t) {
		got = append(got, fmt.Sprintf("%v %v %v %v", l["level"], l["msg"], l["orderId"], l["status"]))
	}
	want := []string{
		"DEBUG notified o-1 accepted",
		"DEBUG notified o-2 processing",
		"INFO events published <nil> <nil>",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("logs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNotifySampleStreamEvent runs the sample stream event of events/, a record as
// the store writes it when an order moves to its second step.
func TestNotifySampleStreamEvent(t *testing.T) {
	t.Parallel()
	ev := eventsample.Load[events.DynamoDBEvent](t, "notifier-stream.json")
	r := &recorder{}
	var inTrace []trace.Header
	pub := publishFunc(func(ctx context.Context, evs []notifier.Event) (int, error) {
		h, _ := trace.FromContext(ctx)
		inTrace = append(inTrace, h)
		return r.PublishBatch(ctx, evs)
	})
	var logs logtest.Buffer
	resp, err := newHandler(t, pub, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	// The record keeps its order's trace: the publish goes in it, and the
	// lines about the order carry its traceId.
	const root = "1-6b02b8b1-4d2e6f8a0b1c3d5e7f9a1b2c"
	if len(inTrace) != 1 || inTrace[0] != (trace.Header{Root: root, Sampled: "1"}) {
		t.Errorf("published in traces %+v, want the record's", inTrace)
	}
	for _, l := range logs.Records(t) {
		if l["orderId"] != nil && l[trace.LogKey] != root {
			t.Errorf("line %q: traceId %v, want %s", l["msg"], l[trace.LogKey], root)
		}
	}
	want := []notifier.Event{{
		V: notifier.Version, Kind: "order.event", OrderID: "0d9c3f5e-7b1a-4c2d-9e8f-6a5b4c3d2e1f", ClientID: "client-a", Seq: 2,
		Status: workflow.StatusProcessing, Priority: workflow.PriorityNormal, State: workflow.Processing, Step: "charge-payment", StepIndex: 1,
		At: time.Date(2026, 11, 22, 9, 41, 6, 630_000_000, time.UTC),
	}}
	if !reflect.DeepEqual(r.events, want) {
		t.Errorf("published %+v\nwant %+v", r.events, want)
	}
}

// BenchmarkHandle measures the Notifier's own cost per stream record: two
// image decodes, the comparison, the event and its JSON, through the real
// Publisher to an SNS client that answers at once (the SNS round trips
// dominate in AWS and are not measured here). It reports the SNS requests
// per record too: a tenth, where one Publish per event was one.
func BenchmarkHandle(b *testing.B) {
	var batch events.DynamoDBEvent
	for i := range 100 {
		order := fmt.Sprintf("o-%03d", i)
		batch.Records = append(batch.Records, rec(b, "MODIFY", fmt.Sprint(i+1),
			st(order, workflow.Pending, 1), st(order, workflow.Processing, 2)))
	}
	requests := 0
	client := batchClient(func(_ context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		requests++
		return allPublished(in), nil
	})
	h := newHandler(b, notifier.NewPublisher(client, topicARN), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := h.Handle(ctx, batch); err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("Handle = %+v, %v", resp, err)
		}
	}
	records := float64(b.N * len(batch.Records))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
	b.ReportMetric(float64(requests)/records, "requests/record")
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	pub := publishFunc(publishNone)
	tests := []struct {
		name string
		cfg  notifier.Config
		pub  notifier.Sender
		want []string // every problem, reported at once
	}{
		{"no topic", notifier.Config{}, pub, []string{"OrderEventsTopicARN is required"}},
		{"a queue's ARN", notifier.Config{OrderEventsTopicARN: "arn:aws:sqs:us-east-1:000000000000:q"}, pub, []string{"is not an SNS topic ARN"}},
		{"no sender", notifier.Config{OrderEventsTopicARN: topicARN}, nil, []string{"needs a Sender"}},
		{"both", notifier.Config{}, nil, []string{"OrderEventsTopicARN is required", "needs a Sender"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := notifier.New(tt.cfg, tt.pub, actor.Deps{})
			if err == nil || h != nil {
				t.Fatalf("New = %v, %v; want an error", h, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// Validate and LoadConfig apply the same rules; LoadConfig names the
// variable, once, where Validate names the field.
func TestConfigRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		arn  string
		want string // the problem, %s standing for the name; "" for a valid ARN
	}{
		{topicARN, ""},
		{"arn:aws-cn:sns:cn-north-1:123456789012:events", ""},
		{"", "%s is required"},
		{"order-events", `%s="order-events" is not an SNS topic ARN`},
		{"https://sns.example.com/order-events", `%s="https://sns.example.com/order-events" is not an SNS topic ARN`},
		{"arn:aws:sqs:us-east-1:000000000000:order-events", `%s="arn:aws:sqs:us-east-1:000000000000:order-events" is not an SNS topic ARN`},
		{"arn:aws:sns:us-east-1:000000000000:", `%s="arn:aws:sns:us-east-1:000000000000:" is not an SNS topic ARN`},
		{"arn:aws:sns:us-east-1:000000000000:a:b", `%s="arn:aws:sns:us-east-1:000000000000:a:b" is not an SNS topic ARN`},
	}
	for _, tt := range tests {
		t.Run(tt.arn, func(t *testing.T) {
			t.Parallel()
			vErr := notifier.Config{OrderEventsTopicARN: tt.arn}.Validate()
			cfg, lErr := notifier.LoadConfig(func(k string) string { return map[string]string{"ORDER_EVENTS_TOPIC_ARN": tt.arn}[k] })
			if tt.want == "" {
				if vErr != nil || lErr != nil || cfg.OrderEventsTopicARN != tt.arn {
					t.Fatalf("Validate = %v; LoadConfig = %+v, %v; want the topic %s", vErr, cfg, lErr, tt.arn)
				}
				return
			}
			if want := fmt.Sprintf(tt.want, "OrderEventsTopicARN"); vErr == nil || !strings.Contains(vErr.Error(), want) {
				t.Errorf("Validate = %v, want an error containing %q", vErr, want)
			}
			want := fmt.Sprintf(tt.want, "ORDER_EVENTS_TOPIC_ARN")
			if lErr == nil || !strings.Contains(lErr.Error(), want) || strings.Count(lErr.Error(), "ORDER_EVENTS_TOPIC_ARN") != 1 {
				t.Errorf("LoadConfig = %+v, %v; want one error containing %q", cfg, lErr, want)
			}
		})
	}
}

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "notifier", notifier.Variables, topology.Describe(topology.Notifier).Env)
}
