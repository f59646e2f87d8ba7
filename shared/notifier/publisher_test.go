package notifier_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/topic"
	"github.com/sasflow/sas/shared/workflow"
)

// batchClient is an SNS client made of a function that answers each
// PublishBatch request.
type batchClient func(ctx context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error)

func (f batchClient) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	return f(ctx, in)
}

// allPublished is the answer of a request whose every entry was published.
func allPublished(in *sns.PublishBatchInput) *sns.PublishBatchOutput {
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		out.Successful = append(out.Successful, types.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.Id))})
	}
	return out
}

const topicARN = "arn:aws:sns:us-east-1:000000000000:order-events"

// entryAttributes are an entry's message attributes as name: type, value.
func entryAttributes(e types.PublishBatchRequestEntry) map[string][2]string {
	attrs := map[string][2]string{}
	for k, v := range e.MessageAttributes {
		attrs[k] = [2]string{aws.ToString(v.DataType), aws.ToString(v.StringValue)}
	}
	return attrs
}

// wantAttributes are the message attributes of ev.
func wantAttributes(ev notifier.Event) map[string][2]string {
	return map[string][2]string{
		"clientId": {"String", ev.ClientID},
		"orderId":  {"String", ev.OrderID},
		"state":    {"String", string(ev.State)},
		"status":   {"String", string(ev.Status)},
		"seq":      {"Number", strconv.Itoa(ev.Seq)},
	}
}

func TestPublishBatchSendsEachEventWithItsAttributes(t *testing.T) {
	t.Parallel()
	evs := []notifier.Event{
		event(workflow.StatusAccepted, workflow.Pending, 1),
		event(workflow.StatusCompensating, workflow.Compensating, 4),
		event(workflow.StatusCompensated, workflow.Compensated, 5),
	}
	evs[1].Reason, evs[1].ReasonText = workflow.ReasonRejected, "step charge-payment was refused by its service (<declined>&\"blocked\")"
	var got []*sns.PublishBatchInput
	p := notifier.NewPublisher(batchClient(func(_ context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		got = append(got, in)
		return allPublished(in), nil
	}), topicARN)
	if n, err := p.PublishBatch(context.Background(), evs); n != len(evs) || err != nil {
		t.Fatalf("PublishBatch = %d, %v; want %d, nil", n, err, len(evs))
	}
	if len(got) != 1 || aws.ToString(got[0].TopicArn) != topicARN {
		t.Fatalf("%d PublishBatch calls (first to %v), want 1 to %s", len(got), got, topicARN)
	}
	entries := got[0].PublishBatchRequestEntries
	if len(entries) != len(evs) {
		t.Fatalf("%d entries, want %d", len(entries), len(evs))
	}
	for i, e := range entries {
		if aws.ToString(e.Id) != strconv.Itoa(i) || e.Subject != nil {
			t.Errorf("entry %d: Id %q, Subject %v; want %q and none", i, aws.ToString(e.Id), e.Subject, strconv.Itoa(i))
		}
		if body, err := notifier.DecodeEvent(aws.ToString(e.Message)); err != nil || body != evs[i] {
			t.Errorf("entry %d: body decodes to %+v, %v; want %+v", i, body, err, evs[i])
		}
		if attrs, want := entryAttributes(e), wantAttributes(evs[i]); !reflect.DeepEqual(attrs, want) {
			t.Errorf("entry %d: attributes = %v, want %v", i, attrs, want)
		}
	}
}

func TestPublishBatchErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	refused := &sns.PublishBatchOutput{
		Successful: []types.PublishBatchResultEntry{{Id: aws.String("0")}, {Id: aws.String("2")}},
		Failed:     []types.BatchResultErrorEntry{{Id: aws.String("1"), Code: aws.String("InternalError"), Message: aws.String("try again")}},
	}
	tests := []struct {
		name        string
		change      func(*notifier.Event) // applied to the second of three events
		out         *sns.PublishBatchOutput
		clientErr   error
		wantEntries []int // entries per call
		wantN       int
		wantErr     string
	}{
		// SNS rejects an empty attribute, so such an event never reaches it;
		// the event before it still goes out.
		{"no client", func(e *notifier.Event) { e.ClientID = "" }, nil, nil, []int{1}, 1, "clientId: empty"},
		{"no order", func(e *notifier.Event) { e.OrderID = "" }, nil, nil, []int{1}, 1, "orderId: empty"},
		{"unknown state", func(e *notifier.Event) { e.State = "" }, nil, nil, []int{1}, 1, "unknown state"},
		{"SNS fails", func(*notifier.Event) {}, nil, boom, []int{3}, 0, "publish event 1 of order o-1 to " + topicARN + ": throttled"},
		{"SNS refuses the second", func(*notifier.Event) {}, refused, nil, []int{3}, 1,
			"publish event 2 of order o-1 to " + topicARN + ": message refused: InternalError: try again"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls []int
			p := notifier.NewPublisher(batchClient(func(_ context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				calls = append(calls, len(in.PublishBatchRequestEntries))
				if tc.out != nil {
					return tc.out, nil
				}
				return allPublished(in), tc.clientErr
			}), topicARN)
			evs := []notifier.Event{
				event(workflow.StatusAccepted, workflow.Pending, 1),
				event(workflow.StatusProcessing, workflow.Processing, 2),
				event(workflow.StatusProcessed, workflow.Processed, 3),
			}
			tc.change(&evs[1])
			n, err := p.PublishBatch(context.Background(), evs)
			if n != tc.wantN || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("PublishBatch = %d, %v; want %d and an error containing %q", n, err, tc.wantN, tc.wantErr)
			}
			if tc.clientErr != nil && !errors.Is(err, tc.clientErr) {
				t.Errorf("error %v does not wrap %v", err, tc.clientErr)
			}
			var entryErr *topic.EntryError
			if tc.out != nil && !errors.As(err, &entryErr) {
				t.Errorf("error %v is no *topic.EntryError", err)
			}
			if !reflect.DeepEqual(calls, tc.wantEntries) {
				t.Errorf("entries per call %v, want %v", calls, tc.wantEntries)
			}
		})
	}
}

// Events that SNS's 256 KiB per request bound (topic.MaxBatchBytes) splits
// before its ten entries: each carries a 40 KiB step name (no workflow's is that long),
// so six fit in a request.
func TestPublishBatchSplitsAtTheSizeBound(t *testing.T) {
	t.Parallel()
	evs := make([]notifier.Event, 10)
	for i := range evs {
		evs[i] = event(workflow.StatusProcessing, workflow.Processing, i+2)
		evs[i].Step = strings.Repeat("x", 40<<10)
	}
	calls := publishAll(t, evs)
	if len(calls) != 2 || len(calls[0]) != 6 || len(calls[1]) != 4 {
		t.Fatalf("calls of %v entries, want 6 then 4", entryCounts(calls))
	}
	var seqs []int
	for i, entries := range calls {
		if size := requestSize(entries); size > topic.MaxBatchBytes {
			t.Errorf("call %d holds %d bytes, over SNS's %d", i, size, topic.MaxBatchBytes)
		}
		for _, e := range entries {
			ev, err := notifier.DecodeEvent(aws.ToString(e.Message))
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, ev.Seq)
		}
	}
	// The first request is full: the next event would take it over.
	if size := requestSize(append(calls[0][:6:6], calls[1][0])); size <= topic.MaxBatchBytes {
		t.Errorf("first call plus the next event is %d bytes: it would have fit", size)
	}
	if want := []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("seqs in call order %v, want %v", seqs, want)
	}
}

// TestEventsCarryNoPayload: a record can hold an input, outputs and undo
// outputs that together fill a DynamoDB item, each of which traveled in SQS
// messages of up to 1 MiB; its status event carries none of them, nor its
// LastError, so ten such events fit one PublishBatch request far under
// SNS's 256 KiB.
func TestEventsCarryNoPayload(t *testing.T) {
	t.Parallel()
	const marker = "PAYLOAD"
	payload := func(n int) []byte { return []byte(`"` + marker + strings.Repeat("x", n-len(marker)-2) + `"`) }
	evs := make([]notifier.Event, topic.MaxBatchEntries)
	for i := range evs {
		st := workflow.State{
			OrderID: strings.Repeat("o", 64), Workflow: "order-v1", StepIndex: 1, Step: "charge-payment", ProcessState: workflow.Error,
			Attempt: 3, ClientID: strings.Repeat("c", 64), EventSeq: 2 + i, UpdatedAt: at,
			Input:     payload(workflow.MaxInputBytes),
			LastError: workflow.RejectionMessage("card-declined", marker+strings.Repeat("e", workflow.MaxMessageBytes), false),
		}
		for k, name := range []string{"reserve-inventory", "charge-payment"} {
			st.Steps = append(st.Steps, workflow.StepRecord{Name: name, State: workflow.StepFailed,
				Output: payload(workflow.MaxMessageBytes / (k + 1)), CompensationOutput: payload(workflow.MaxMessageBytes / (k + 2))})
		}
		evs[i] = notifier.EventOf(st)
	}
	calls := publishAll(t, evs)
	if len(calls) != 1 {
		t.Fatalf("%d requests, want one", len(calls))
	}
	if size := requestSize(calls[0]); size > 8<<10 {
		t.Errorf("ten events take %d bytes, over 8 KiB (SNS allows %d)", size, topic.MaxBatchBytes)
	}
	for _, e := range calls[0] {
		if strings.Contains(aws.ToString(e.Message), marker) {
			t.Errorf("an event carries the payload: %.200s", aws.ToString(e.Message))
		}
	}
}

// requestSize counts what SNS counts toward a request's 256 KiB
// (topic.MaxBatchBytes): bodies and
// attributes' names, types and values.
func requestSize(entries []types.PublishBatchRequestEntry) int {
	n := 0
	for _, e := range entries {
		n += len(aws.ToString(e.Message))
		for k, v := range e.MessageAttributes {
			n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
		}
	}
	return n
}

func entryCounts(calls [][]types.PublishBatchRequestEntry) []int {
	n := make([]int, len(calls))
	for i, c := range calls {
		n[i] = len(c)
	}
	return n
}

// publishAll publishes evs through a client that takes every entry, and
// returns the requests' entries.
func publishAll(t *testing.T, evs []notifier.Event) [][]types.PublishBatchRequestEntry {
	t.Helper()
	var calls [][]types.PublishBatchRequestEntry
	p := notifier.NewPublisher(batchClient(func(_ context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		calls = append(calls, in.PublishBatchRequestEntries)
		return allPublished(in), nil
	}), topicARN)
	if n, err := p.PublishBatch(context.Background(), evs); n != len(evs) || err != nil {
		t.Fatalf("PublishBatch = %d, %v", n, err)
	}
	return calls
}
