package topic

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sasflow/sas/shared/trace"
)

// PublishBatch's limits: messages per request, and bytes of a request's
// messages together (bodies, subjects and attributes' names, types and
// values), which is also the most one message may hold, with Publish too:
// 256 KiB (262,144 bytes), the message size of a topic that leaves its
// MaximumMessageSize at the default, as the stack's topics do (a larger one
// would refuse e-mail subscriptions). See "Amazon SNS message batching"
// (https://docs.aws.amazon.com/sns/latest/dg/sns-batch-api-actions.html)
// and "Publishing large messages with Amazon SNS"
// (https://docs.aws.amazon.com/sns/latest/dg/large-message-payloads.html).
// SQS takes messages of up to 1 MiB (workflow.MaxMessageBytes); SNS does
// not, so nothing the queues carry is published as it is: an alert clips
// the texts it quotes and a status event carries no input or output.
const (
	MaxBatchEntries = 10
	MaxBatchBytes   = 256 << 10
)

// BatchClient is the part of *sns.Client a Batcher uses.
type BatchClient interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

var _ BatchClient = (*sns.Client)(nil)

// Batcher publishes to one topic with PublishBatch. SNS bills a request per
// 64 KiB of it, so ten small messages in one request cost what one Publish
// does.
type Batcher struct {
	Client BatchClient
	ARN    string
}

// EntryError is why PublishBatch did not publish one message of a request
// that itself succeeded: the answer's Code and Message, and SenderFault,
// true when the message itself is wrong and sending it again fails again.
type EntryError struct {
	Code, Message string
	SenderFault   bool
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("message refused: %s: %s (sender fault %t)", e.Code, e.Message, e.SenderFault)
}

// ErrUnanswered is why a message counts as not published when the answer
// lists it neither as successful nor as failed: its fate is unknown, and
// publishing it again costs at most a duplicate.
var ErrUnanswered = errors.New("PublishBatch answered neither success nor failure for the message")

// Publish sends msgs in order, in as few PublishBatch requests as the
// limits allow (a message over MaxBatchBytes goes alone, for SNS to refuse),
// one request at a time. It stops after the first request that did not
// publish all its messages, since the caller retries from the first one
// missing, and returns n, how many messages from the first are published,
// and err, why msgs[n] is not: the request's error or an *EntryError. n is
// len(msgs) exactly when err is nil. Messages after msgs[n] in its request
// may have been published too.
func (b Batcher) Publish(ctx context.Context, msgs []Message) (int, error) {
	entries := make([]types.PublishBatchRequestEntry, len(msgs))
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		entries[i] = types.PublishBatchRequestEntry{Message: aws.String(m.Body), MessageAttributes: attributes(m)}
		if m.Subject != "" {
			entries[i].Subject = aws.String(m.Subject)
		}
		sizes[i] = size(entries[i])
	}
	for start := 0; start < len(entries); {
		end := batchEnd(sizes, start)
		// One request has one trace header: the first message's. SNS
		// takes it for every message of the request.
		if n, err := b.send(ctx, entries[start:end], msgs[start].Trace); err != nil {
			return start + n, err
		}
		start = end
	}
	return len(msgs), nil
}

// size is what an entry counts toward MaxBatchBytes.
func size(e types.PublishBatchRequestEntry) int {
	n := len(aws.ToString(e.Message)) + len(aws.ToString(e.Subject))
	for name, v := range e.MessageAttributes {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

// batchEnd is where the request that starts at start ends: after
// MaxBatchEntries messages, or before the one that would take it over
// MaxBatchBytes. It holds at least one message.
func batchEnd(sizes []int, start int) int {
	end, total := start, 0
	for end < len(sizes) && end-start < MaxBatchEntries {
		if end > start && total+sizes[end] > MaxBatchBytes {
			break
		}
		total += sizes[end]
		end++
	}
	return end
}

// send publishes one request's entries, each with its index as its Id, and
// returns how many of them from the first are published, and why the next
// is not.
func (b Batcher) send(ctx context.Context, entries []types.PublishBatchRequestEntry, h trace.Header) (int, error) {
	for i := range entries {
		entries[i].Id = aws.String(strconv.Itoa(i))
	}
	out, err := b.Client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(b.ARN), PublishBatchRequestEntries: entries}, traced(ctx, h))
	if err != nil {
		return 0, err
	}
	return firstUnpublished(out, len(entries))
}

// firstUnpublished reads a PublishBatch answer for n entries: the index of
// the first entry not listed as successful, with its failure, or n. An entry
// listed as both counts as failed.
func firstUnpublished(out *sns.PublishBatchOutput, n int) (int, error) {
	published := make([]bool, n)
	for _, s := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < n {
			published[i] = true
		}
	}
	failed := make(map[int]*EntryError, len(out.Failed))
	for _, f := range out.Failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < n {
			published[i] = false
			failed[i] = &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
		}
	}
	for i := range n {
		if published[i] {
			continue
		}
		if e := failed[i]; e != nil {
			return i, e
		}
		return i, ErrUnanswered
	}
	return n, nil
}
