package sqsbridge

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const (
	testURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
	testARN = "arn:aws:sqs:eu-west-1:123456789012:jobs"
)

// fakeClient answers with the functions a test sets.
type fakeClient struct {
	receive func(*sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error)
	del     func(*sqs.DeleteMessageBatchInput) (*sqs.DeleteMessageBatchOutput, error)
	back    func(*sqs.ChangeMessageVisibilityBatchInput) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

func (f fakeClient) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return f.receive(in)
}

func (f fakeClient) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return f.del(in)
}

func (f fakeClient) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return f.back(in)
}

func messages(ids ...string) []types.Message {
	msgs := make([]types.Message, len(ids))
	for i, id := range ids {
		msgs[i] = types.Message{
			MessageId:     aws.String(id),
			ReceiptHandle: aws.String("rh-" + id),
			Body:          aws.String("body-" + id),
			MD5OfBody:     aws.String("md5-" + id),
			Attributes:    map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
		}
	}
	return msgs
}

// TestPollOnce: PollOnce receives a batch, hands it to the handler, and
// deletes what the handler did not fail; an empty queue or a failed receive
// never reaches the handler.
func TestPollOnce(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		empty       bool    // the queue answers with no messages
		receiveErr  error   // the receive fails
		handler     Handler // nil: never called
		deleteErr   error
		deleteFails []string // entry IDs the fake reports failed
		wantDeleted []string
		wantErr     []string // substrings of the error
		wantBatch   bool     // error wraps ErrBatchFailed
		wantIs      error    // error wraps it too, if set
	}{
		{name: "empty", empty: true},
		{name: "receive error", receiveErr: boom, wantErr: []string{"boom", testURL}, wantIs: boom},
		{
			name: "all succeed",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, nil
			},
			wantDeleted: []string{"rh-a", "rh-b", "rh-c"},
		},
		{
			name: "item failures kept",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "b"}, {ItemIdentifier: "b"}}}, nil
			},
			wantDeleted: []string{"rh-a", "rh-c"},
		},
		{
			name: "all items failed",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "a"}, {ItemIdentifier: "b"}, {ItemIdentifier: "c"}}}, nil
			},
		},
		{
			name: "handler error",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, boom
			},
			wantErr:   []string{"boom", testURL},
			wantBatch: true,
			wantIs:    boom,
		},
		{
			name: "unknown item ID",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "a"}, {ItemIdentifier: "zzz"}}}, nil
			},
			wantErr:   []string{`"zzz"`},
			wantBatch: true,
		},
		{
			name: "empty item ID",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{}}}, nil
			},
			wantErr:   []string{`""`},
			wantBatch: true,
		},
		{
			name:      "handler panics",
			handler:   func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { panic("kaboom") },
			wantErr:   []string{"panicked", "kaboom"},
			wantBatch: true,
		},
		{
			name: "delete request fails",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, nil
			},
			deleteErr:   boom,
			wantDeleted: []string{"rh-a", "rh-b", "rh-c"},
			wantErr:     []string{"delete 3", "boom"},
			wantIs:      boom,
		},
		{
			name: "delete entry fails",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, nil
			},
			deleteFails: []string{"1"},
			wantDeleted: []string{"rh-a", "rh-b", "rh-c"},
			wantErr:     []string{"1 failed", "b (ReceiptHandleIsInvalid"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var deleted []string
			handler, want := tc.handler, 3
			if handler == nil {
				handler = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
					t.Error("handler called")
					return events.SQSEventResponse{}, nil
				}
				want = 0
			}
			b := &Bridge{
				Client: fakeClient{
					receive: func(*sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
						if tc.empty || tc.receiveErr != nil {
							return &sqs.ReceiveMessageOutput{}, tc.receiveErr
						}
						return &sqs.ReceiveMessageOutput{Messages: messages("a", "b", "c")}, nil
					},
					del: func(in *sqs.DeleteMessageBatchInput) (*sqs.DeleteMessageBatchOutput, error) {
						if aws.ToString(in.QueueUrl) != testURL {
							t.Errorf("delete from %q", aws.ToString(in.QueueUrl))
						}
						out := &sqs.DeleteMessageBatchOutput{}
						for _, e := range in.Entries {
							deleted = append(deleted, aws.ToString(e.ReceiptHandle))
							if slices.Contains(tc.deleteFails, aws.ToString(e.Id)) {
								out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("gone")})
							}
						}
						return out, tc.deleteErr
					},
				},
				QueueURL: testURL,
				QueueARN: testARN,
				Handler:  handler,
			}
			n, err := b.PollOnce(context.Background())
			if n != want {
				t.Errorf("received = %d, want %d", n, want)
			}
			if !slices.Equal(deleted, tc.wantDeleted) {
				t.Errorf("deleted %v, want %v", deleted, tc.wantDeleted)
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("err = nil")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if got := errors.Is(err, ErrBatchFailed); got != tc.wantBatch {
				t.Errorf("errors.Is(err, ErrBatchFailed) = %v, want %v", got, tc.wantBatch)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not wrap %v", err, tc.wantIs)
			}
		})
	}
}

func TestPollOnceEvent(t *testing.T) {
	sv := aws.String("v")
	msg := types.Message{
		MessageId:              aws.String("m1"),
		ReceiptHandle:          aws.String("rh1"),
		Body:                   aws.String(`{"x":1}`),
		MD5OfBody:              aws.String("abc"),
		MD5OfMessageAttributes: aws.String("def"),
		Attributes:             map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1700000000000", "SenderId": "AID"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"s": {DataType: aws.String("String"), StringValue: sv},
			"b": {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2}},
		},
	}
	tests := []struct {
		name       string
		region     string
		wantRegion string
		wait       time.Duration
		wantWait   int32
	}{
		{"region from ARN", "", "eu-west-1", 1500 * time.Millisecond, 2},
		{"region given", "us-west-2", "us-west-2", 20 * time.Second, 20},
		{"short poll", "", "eu-west-1", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in *sqs.ReceiveMessageInput
			var got events.SQSEvent
			b := &Bridge{
				Client: fakeClient{
					receive: func(i *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
						in = i
						return &sqs.ReceiveMessageOutput{Messages: []types.Message{msg}}, nil
					},
					del: func(*sqs.DeleteMessageBatchInput) (*sqs.DeleteMessageBatchOutput, error) {
						return &sqs.DeleteMessageBatchOutput{}, nil
					},
				},
				QueueURL:  testURL,
				QueueARN:  testARN,
				BatchSize: 4,
				WaitTime:  tc.wait,
				Region:    tc.region,
				Handler: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					got = ev
					return events.SQSEventResponse{}, nil
				},
			}
			if _, err := b.PollOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if in.MaxNumberOfMessages != 4 || in.WaitTimeSeconds != tc.wantWait || aws.ToString(in.QueueUrl) != testURL ||
				!slices.Equal(in.MessageSystemAttributeNames, []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}) ||
				!slices.Equal(in.MessageAttributeNames, []string{"All"}) {
				t.Errorf("ReceiveMessage input = %+v", in)
			}
			if len(got.Records) != 1 {
				t.Fatalf("records = %d", len(got.Records))
			}
			r := got.Records[0]
			if r.MessageId != "m1" || r.ReceiptHandle != "rh1" || r.Body != `{"x":1}` || r.Md5OfBody != "abc" ||
				r.Md5OfMessageAttributes != "def" || r.EventSource != "aws:sqs" || r.EventSourceARN != testARN || r.AWSRegion != tc.wantRegion {
				t.Errorf("record = %+v", r)
			}
			if r.Attributes["ApproximateReceiveCount"] != "3" || r.Attributes["SentTimestamp"] != "1700000000000" || r.Attributes["SenderId"] != "AID" {
				t.Errorf("attributes = %v", r.Attributes)
			}
			s := r.MessageAttributes["s"]
			if s.DataType != "String" || aws.ToString(s.StringValue) != "v" || s.StringListValues == nil || s.BinaryListValues == nil {
				t.Errorf("string attribute = %+v", s)
			}
			if bin := r.MessageAttributes["b"]; bin.DataType != "Binary" || !slices.Equal(bin.BinaryValue, []byte{1, 2}) {
				t.Errorf("binary attribute = %+v", bin)
			}
		})
	}
}

func TestRunReportsErrorsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	var reported []error
	b := &Bridge{
		Client: fakeClient{receive: func(*sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
			calls++
			if calls == 1 {
				return &sqs.ReceiveMessageOutput{Messages: messages("a")}, nil
			}
			cancel() // second poll: the run is over
			return &sqs.ReceiveMessageOutput{}, nil
		}},
		QueueURL: testURL, QueueARN: testARN,
		Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("boom")
		},
		OnError: func(err error) { reported = append(reported, err) },
	}
	if err := b.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if calls != 2 || len(reported) != 1 || !errors.Is(reported[0], ErrBatchFailed) {
		t.Errorf("calls = %d, reported = %v", calls, reported)
	}
}

// stopClient is a Client that records the contexts and calls it gets.
type stopClient struct {
	onReceive  func() // runs while the receive is in flight
	received   int
	live       []bool // per call: its context was not done
	deleted    []string
	givenBack  []string
	backFailed []string // entry IDs the give-back reports failed
}

func (c *stopClient) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.received++
	o := sqs.Options{RetryMaxAttempts: 3}
	for _, f := range optFns {
		f(&o)
	}
	if o.RetryMaxAttempts != 1 {
		return nil, errors.New("the receive may be retried")
	}
	if c.onReceive != nil {
		c.onReceive()
	}
	c.live = append(c.live, ctx.Err() == nil)
	return &sqs.ReceiveMessageOutput{Messages: messages("a", "b", "c")}, nil
}

func (c *stopClient) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.live = append(c.live, ctx.Err() == nil)
	for _, e := range in.Entries {
		c.deleted = append(c.deleted, aws.ToString(e.ReceiptHandle))
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (c *stopClient) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	c.live = append(c.live, ctx.Err() == nil)
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if e.VisibilityTimeout != 0 {
			return nil, errors.New("visibility not 0")
		}
		c.givenBack = append(c.givenBack, aws.ToString(e.ReceiptHandle))
		if slices.Contains(c.backFailed, aws.ToString(e.Id)) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("gone")})
		}
	}
	return out, nil
}

// TestAStoppingPollerFinishesItsBatch: a poller that stops (its context
// ends) lets the receive it made, the delete and the give-back run to
// their end on a context of their own; a batch received after it stopped
// goes back to the queue at once instead of to the handler; a poller
// already stopped receives nothing.
func TestAStoppingPollerFinishesItsBatch(t *testing.T) {
	tests := []struct {
		name          string
		stopBefore    bool // the poller stopped before PollOnce
		stopReceiving bool // it stops while the receive is in flight
		stopHandling  bool // it stops while the handler runs
		backFailed    []string
		wantN         int
		wantHandled   bool
		wantDeleted   []string
		wantGivenBack []string
		wantErr       string
	}{
		{name: "running", wantN: 3, wantHandled: true, wantDeleted: []string{"rh-a", "rh-b", "rh-c"}},
		{name: "stopped before", stopBefore: true, wantErr: "context canceled"},
		{name: "stopped while receiving", stopReceiving: true, wantGivenBack: []string{"rh-a", "rh-b", "rh-c"}},
		{
			name: "give-back refused", stopReceiving: true, backFailed: []string{"2"},
			wantGivenBack: []string{"rh-a", "rh-b", "rh-c"}, wantErr: "1 failed, so they come back after the visibility timeout: c (ReceiptHandleIsInvalid",
		},
		{name: "stopped while handling", stopHandling: true, wantN: 3, wantHandled: true, wantDeleted: []string{"rh-a", "rh-b", "rh-c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			if tc.stopBefore {
				stop()
			}
			c := &stopClient{backFailed: tc.backFailed}
			if tc.stopReceiving {
				c.onReceive = stop
			}
			handled := false
			b := &Bridge{Client: c, QueueURL: testURL, QueueARN: testARN, WaitTime: time.Second,
				Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
					handled = true
					if tc.stopHandling {
						stop()
					}
					return events.SQSEventResponse{}, nil
				}}
			n, err := b.PollOnce(ctx)
			if n != tc.wantN || handled != tc.wantHandled {
				t.Errorf("PollOnce = %d, handled %v; want %d, %v", n, handled, tc.wantN, tc.wantHandled)
			}
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			wantReceives := 1
			if tc.stopBefore {
				wantReceives = 0
			}
			if c.received != wantReceives {
				t.Errorf("received %d times, want %d", c.received, wantReceives)
			}
			if !slices.Equal(c.deleted, tc.wantDeleted) || !slices.Equal(c.givenBack, tc.wantGivenBack) {
				t.Errorf("deleted %v, given back %v; want %v, %v", c.deleted, c.givenBack, tc.wantDeleted, tc.wantGivenBack)
			}
			if slices.Contains(c.live, false) {
				t.Errorf("calls on a done context: %v", c.live)
			}
		})
	}
}

// TestRunReportsABatchItCouldNotGiveBack: a poller that stops while its
// receive is in flight and cannot give the batch back says so, though it
// is stopping.
func TestRunReportsABatchItCouldNotGiveBack(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var reported []error
	b := &Bridge{
		Client:   &stopClient{onReceive: stop, backFailed: []string{"0"}},
		QueueURL: testURL, QueueARN: testARN, WaitTime: time.Second,
		Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			t.Error("handler called")
			return events.SQSEventResponse{}, nil
		},
		OnError: func(err error) { reported = append(reported, err) },
	}
	if err := b.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "a (ReceiptHandleIsInvalid") {
		t.Errorf("reported %v, want the batch not given back", reported)
	}
}
