package dlq

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// fakeSQS is a DLQ and its source in memory, for what the engines cannot
// be made to do (fail a delete, run a move task). Methods it does not
// implement panic through the nil Client.
type fakeSQS struct {
	Client
	dlq       []types.Message
	hidden    map[string]types.Message // receipt handle → message
	source    []types.SendMessageBatchRequestEntry
	failSend  bool
	failDel   bool
	moveErr   error
	moveInput *sqs.StartMessageMoveTaskInput
	// bounce sends every message sent to the source straight back to the
	// DLQ under the ID the send gave it, as a consumer failing at once
	// would.
	bounce bool
	calls  []string
	nextID int
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.calls = append(f.calls, "receive")
	n := min(int(in.MaxNumberOfMessages), len(f.dlq))
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range f.dlq[:n] {
		f.nextID++
		m.ReceiptHandle = aws.String("rh-" + strconv.Itoa(f.nextID))
		f.hidden[*m.ReceiptHandle] = m
		out.Messages = append(out.Messages, m)
	}
	f.dlq = f.dlq[n:]
	return out, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.calls = append(f.calls, "send")
	if f.failSend {
		return nil, errors.New("send refused")
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		f.nextID++
		id := "sent-" + strconv.Itoa(f.nextID)
		f.source = append(f.source, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id)})
		if f.bounce {
			f.dlq = append(f.dlq, types.Message{MessageId: aws.String(id), Body: e.MessageBody})
		}
	}
	return out, nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.calls = append(f.calls, "delete")
	if f.failDel {
		return nil, errors.New("delete refused")
	}
	for _, e := range in.Entries {
		delete(f.hidden, *e.ReceiptHandle)
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.calls = append(f.calls, "visible")
	for _, e := range in.Entries {
		f.dlq = append(f.dlq, f.hidden[*e.ReceiptHandle])
		delete(f.hidden, *e.ReceiptHandle)
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (f *fakeSQS) StartMessageMoveTask(_ context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	f.calls = append(f.calls, "move-task")
	f.moveInput = in
	if f.moveErr != nil {
		return nil, f.moveErr
	}
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String("task-1")}, nil
}

func newFake(n int) *fakeSQS {
	f := &fakeSQS{hidden: map[string]types.Message{}}
	for i := range n {
		f.dlq = append(f.dlq, types.Message{MessageId: aws.String("m-" + strconv.Itoa(i)), Body: aws.String("body-" + strconv.Itoa(i)),
			MessageAttributes: map[string]types.MessageAttributeValue{"orderId": {DataType: aws.String("String"), StringValue: aws.String("o-" + strconv.Itoa(i))}}})
	}
	return f
}

var pair = Pair{ID: "ResponseQueue", Source: Queue{Name: "src", URL: "http://q/src", ARN: "arn:aws:sqs:eu-west-1:1:src"},
	DLQ: Queue{Name: "dlq", URL: "http://q/dlq", ARN: "arn:aws:sqs:eu-west-1:1:dlq"}}

func TestCopyMovesEveryMessageSendingBeforeDeleting(t *testing.T) {
	t.Parallel()
	f := newFake(12)
	var slept []time.Duration
	moved, err := Copy{Client: f, Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}.Move(context.Background(), pair, 5)
	if err != nil || moved.Count != 12 {
		t.Fatalf("Move = %+v, %v", moved, err)
	}
	if len(f.dlq) != 0 || len(f.hidden) != 0 || len(f.source) != 12 {
		t.Fatalf("dlq %d, hidden %d, source %d", len(f.dlq), len(f.hidden), len(f.source))
	}
	for i, e := range f.source {
		if *e.MessageBody != "body-"+strconv.Itoa(i) || *e.MessageAttributes["orderId"].StringValue != "o-"+strconv.Itoa(i) {
			t.Errorf("sent %d: %s %+v", i, *e.MessageBody, e.MessageAttributes)
		}
	}
	// Batches of at most 5 at 5 a second: a second a batch.
	want := []string{"receive", "send", "delete", "receive", "send", "delete", "receive", "send", "delete", "receive"}
	if !slices.Equal(f.calls, want) || !slices.Equal(slept, []time.Duration{time.Second, time.Second, 400 * time.Millisecond}) {
		t.Fatalf("calls %v, slept %v", f.calls, slept)
	}
}

func TestCopyDuplicatesRatherThanLoses(t *testing.T) {
	t.Parallel()
	// The send fails: nothing is deleted, the message reappears on the DLQ.
	f := newFake(1)
	f.failSend = true
	if _, err := (Copy{Client: f}).Move(context.Background(), pair, 0); err == nil || len(f.hidden) != 1 || len(f.source) != 0 {
		t.Fatalf("failed send: %v; hidden %d, sent %d", err, len(f.hidden), len(f.source))
	}
	// The delete fails: the message is on the source and still on the DLQ.
	f = newFake(1)
	f.failDel = true
	moved, err := Copy{Client: f}.Move(context.Background(), pair, 0)
	if err == nil || moved.Count != 1 || len(f.hidden) != 1 || len(f.source) != 1 {
		t.Fatalf("failed delete: %+v, %v; hidden %d, sent %d", moved, err, len(f.hidden), len(f.source))
	}
}

func TestCopyStopsAtMessagesItMoved(t *testing.T) {
	t.Parallel()
	// A consumer that fails everything at once must not make the copy spin.
	f := newFake(3)
	f.bounce = true
	moved, err := Copy{Client: f}.Move(context.Background(), pair, 0)
	if err != nil || moved.Count != 3 || len(f.dlq) != 3 || len(f.hidden) != 0 {
		t.Fatalf("Move = %+v, %v; dlq %d, hidden %d", moved, err, len(f.dlq), len(f.hidden))
	}
}

func TestMoveTaskAndFallback(t *testing.T) {
	t.Parallel()
	invalid := &smithy.GenericAPIError{Code: "InvalidAction", Message: "Unknown action: StartMessageMoveTask"}
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}
	for _, tc := range []struct {
		name     string
		moveErr  error
		fellBack bool
		wantErr  bool
		count    int
		task     string
	}{
		{"AWS", nil, false, false, 0, "task-1"},
		{"no move tasks", invalid, true, false, 2, ""},
		{"denied", denied, false, true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(2)
			f.moveErr = tc.moveErr
			fellBack := false
			moved, err := Auto{Task: MoveTask{Client: f}, Copy: Copy{Client: f}, Fallback: func(err error) {
				fellBack = errors.Is(err, ErrUnsupported)
			}}.Move(context.Background(), pair, 7)
			if (err != nil) != tc.wantErr || fellBack != tc.fellBack || moved.Count != tc.count || moved.TaskHandle != tc.task {
				t.Fatalf("Move = %+v, %v; fell back %v", moved, err, fellBack)
			}
			if in := f.moveInput; *in.SourceArn != pair.DLQ.ARN || *in.DestinationArn != pair.Source.ARN || *in.MaxNumberOfMessagesPerSecond != 7 {
				t.Fatalf("StartMessageMoveTask %+v", in)
			}
		})
	}
	f := newFake(1)
	f.moveErr = invalid
	if _, err := (MoveTask{Client: f}).Move(context.Background(), pair, 0); !errors.Is(err, ErrUnsupported) || f.moveInput.MaxNumberOfMessagesPerSecond != nil {
		t.Fatalf("MoveTask alone = %v, %+v", err, f.moveInput)
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	pairs := []Pair{pair, {ID: "SchedulerQueue", Source: Queue{Name: "s"}, DLQ: Queue{Name: "s-dlq"}}}
	for _, name := range []string{"ResponseQueue", "src", "http://q/dlq", "arn:aws:sqs:eu-west-1:1:dlq"} {
		if p, err := Select(pairs, name); err != nil || p.ID != "ResponseQueue" {
			t.Errorf("Select(%q) = %+v, %v", name, p, err)
		}
	}
	if _, err := Select(pairs, "nope"); !errors.Is(err, ErrNoQueue) || err.Error() != `unknown queue: no queue "nope"; one of ResponseQueue, SchedulerQueue` {
		t.Errorf("Select(nope) = %v", err)
	}
}

func TestScope(t *testing.T) {
	t.Parallel()
	dev := StageScope("dev")
	for name, want := range map[string]string{
		"SchedulerAgentSupervisor-dev-ResponseQueue":      "ResponseQueue",
		"SchedulerAgentSupervisor-dev-2-ResponseQueue":    "",
		"SchedulerAgentSupervisor-dev-ResponseQueueDLQ-x": "",
	} {
		if id, _ := dev.id(name); id != want {
			t.Errorf("stage dev: id(%q) = %q, want %q", name, id, want)
		}
	}
	if id, ok := PrefixScope("sys-").id("sys-agent-charge-payment"); !ok || id != "agent-charge-payment" {
		t.Errorf("prefix: %q %v", id, ok)
	}
}
