package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sasflow/sas/shared/clock"
)

// Moved is what a redrive did.
type Moved struct {
	// TaskHandle names SQS's message move task; empty for a copy.
	TaskHandle string
	// Count is how many messages a copy moved; a move task reports its
	// progress through Tasks.
	Count int
}

// Mover moves a pair's dead-lettered messages back to its source queue.
type Mover interface {
	Move(ctx context.Context, p Pair, maxPerSecond int) (Moved, error)
}

// MaxPerSecondLimit is the highest rate SQS's move tasks take.
const MaxPerSecondLimit = 500

// ErrUnsupported is an endpoint without SQS's message move tasks (local
// emulators): the caller may Copy instead.
var ErrUnsupported = errors.New("the endpoint does not support message move tasks")

// unsupported tells an API error that means "no such action".
func unsupported(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "InvalidAction", "UnsupportedOperation", "UnknownOperationException", "UnknownOperation", "NotImplemented":
		return true
	}
	return false
}

// MoveTask redrives with SQS's own message move task (StartMessageMoveTask),
// which AWS runs in the background and which needs the DLQ's
// RedriveAllowPolicy to name the source.
type MoveTask struct{ Client Client }

// Move starts the task; an endpoint without it yields ErrUnsupported.
func (t MoveTask) Move(ctx context.Context, p Pair, maxPerSecond int) (Moved, error) {
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(p.DLQ.ARN), DestinationArn: aws.String(p.Source.ARN)}
	if maxPerSecond > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(maxPerSecond))
	}
	out, err := t.Client.StartMessageMoveTask(ctx, in)
	if unsupported(err) {
		return Moved{}, fmt.Errorf("redrive %s: %w (%w)", p.DLQ.Name, ErrUnsupported, err)
	}
	if err != nil {
		return Moved{}, fmt.Errorf("redrive %s to %s: %w", p.DLQ.Name, p.Source.Name, err)
	}
	return Moved{TaskHandle: aws.ToString(out.TaskHandle)}, nil
}

// Task is one of a DLQ's message move tasks.
type Task struct {
	Handle, Status string
	Moved, ToMove  int64
	Started        time.Time
	Failure        string
}

// Tasks lists the DLQ's recent message move tasks, newest first;
// ErrUnsupported from an endpoint without them.
func Tasks(ctx context.Context, c Client, p Pair) ([]Task, error) {
	out, err := c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(p.DLQ.ARN), MaxResults: aws.Int32(10)})
	if unsupported(err) {
		return nil, fmt.Errorf("move tasks of %s: %w (%w)", p.DLQ.Name, ErrUnsupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("move tasks of %s: %w", p.DLQ.Name, err)
	}
	tasks := make([]Task, len(out.Results))
	for i, r := range out.Results {
		tasks[i] = Task{Handle: aws.ToString(r.TaskHandle), Status: aws.ToString(r.Status), Moved: r.ApproximateNumberOfMessagesMoved,
			ToMove: aws.ToInt64(r.ApproximateNumberOfMessagesToMove), Started: time.UnixMilli(r.StartedTimestamp).UTC(), Failure: aws.ToString(r.FailureReason)}
	}
	return tasks, nil
}

// Copy redrives by hand where there are no move tasks (the local stack):
// it receives from the DLQ, sends each message to the source with its body
// and message attributes, and deletes it from the DLQ only once sent, so
// a crash between the two duplicates a message (which the consumers
// tolerate: every handler is idempotent) but never loses one. A message
// the consumer sends straight back to the DLQ while the copy runs is not
// moved twice: the copy stops when it receives one it moved.
type Copy struct {
	Client Client
	// Sleep paces the copy to maxPerSecond; nil means time.Sleep under ctx.
	Sleep func(context.Context, time.Duration) error
}

// copyVisibility hides a message being copied: long enough for a send and a
// delete, short enough that one a crash left behind soon reappears.
const copyVisibility = 30

// Move copies until the DLQ answers a receive with nothing.
func (c Copy) Move(ctx context.Context, p Pair, maxPerSecond int) (Moved, error) {
	sleep := c.Sleep
	if sleep == nil {
		sleep = clock.Sleep
	}
	var moved Moved
	// IDs of what the copy sent: seen again on the DLQ, the consumer has
	// failed them anew.
	sent := map[string]bool{}
	for {
		batch := int32(10)
		if maxPerSecond > 0 {
			batch = int32(min(maxPerSecond, 10))
		}
		out, err := c.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.DLQ.URL), MaxNumberOfMessages: batch, VisibilityTimeout: copyVisibility,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader},
		})
		if err != nil {
			return moved, fmt.Errorf("redrive %s: receive after %d moved: %w", p.DLQ.Name, moved.Count, err)
		}
		var fresh []types.Message
		var again []types.ChangeMessageVisibilityBatchRequestEntry
		for _, m := range out.Messages {
			if sent[aws.ToString(m.MessageId)] {
				again = append(again, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(len(again))), ReceiptHandle: m.ReceiptHandle})
				continue
			}
			fresh = append(fresh, m)
		}
		if len(again) > 0 {
			if err := resetVisibility(ctx, c.Client, p.DLQ, again); err != nil {
				return moved, err
			}
		}
		if len(fresh) == 0 {
			return moved, nil
		}
		ids, err := c.send(ctx, p, fresh)
		for _, id := range ids {
			sent[id] = true
		}
		moved.Count += len(ids)
		if err != nil {
			return moved, err
		}
		if maxPerSecond > 0 {
			if err := sleep(ctx, time.Duration(len(fresh))*time.Second/time.Duration(maxPerSecond)); err != nil {
				return moved, err
			}
		}
	}
}

// send sends msgs to the source, then deletes from the DLQ those sent; it
// returns the IDs the source gave them.
func (c Copy) send(ctx context.Context, p Pair, msgs []types.Message) ([]string, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
		if th, ok := m.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)]; ok {
			entries[i].MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
				string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(th)},
			}
		}
	}
	out, err := c.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.Source.URL), Entries: entries})
	if err != nil {
		// Nothing known sent: the messages reappear on the DLQ.
		return nil, fmt.Errorf("redrive %s: send to %s: %w", p.DLQ.Name, p.Source.Name, err)
	}
	var ids []string
	var del []types.DeleteMessageBatchRequestEntry
	for _, ok := range out.Successful {
		i, _ := strconv.Atoi(aws.ToString(ok.Id))
		if i < 0 || i >= len(msgs) {
			continue
		}
		ids = append(ids, aws.ToString(ok.MessageId))
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: ok.Id, ReceiptHandle: msgs[i].ReceiptHandle})
	}
	var errs []error
	if len(out.Failed) > 0 {
		errs = append(errs, fmt.Errorf("redrive %s: %d messages not sent to %s (they stay on the DLQ): %s", p.DLQ.Name, len(out.Failed), p.Source.Name, aws.ToString(out.Failed[0].Message)))
	}
	if len(del) > 0 {
		dout, err := c.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.DLQ.URL), Entries: del})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("redrive %s: delete %d messages sent to %s (they will be sent again): %w", p.DLQ.Name, len(del), p.Source.Name, err))
		case len(dout.Failed) > 0:
			errs = append(errs, fmt.Errorf("redrive %s: %d messages sent to %s not deleted (they will be sent again): %s", p.DLQ.Name, len(dout.Failed), p.Source.Name, aws.ToString(dout.Failed[0].Message)))
		}
	}
	return ids, errors.Join(errs...)
}

// Auto tries a move task and falls back to a copy where the endpoint has
// none; Fallback tells which happened.
type Auto struct {
	Task MoveTask
	Copy Copy
	// Fallback hears that the copy is used, and why.
	Fallback func(error)
}

// Move redrives p.
func (a Auto) Move(ctx context.Context, p Pair, maxPerSecond int) (Moved, error) {
	m, err := a.Task.Move(ctx, p, maxPerSecond)
	if !errors.Is(err, ErrUnsupported) {
		return m, err
	}
	if a.Fallback != nil {
		a.Fallback(err)
	}
	return a.Copy.Move(ctx, p, maxPerSecond)
}
