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
)

// Message is one dead-lettered message as a peek saw it.
type Message struct {
	ID string `json:"messageId"`
	// SentAt is when it was first sent to the source queue.
	SentAt time.Time `json:"sentAt,omitzero"`
	// ReceiveCount is SQS's ApproximateReceiveCount: the receives on the
	// source queue that ended in the DLQ, plus every peek since.
	ReceiveCount int `json:"receiveCount"`
	// SourceARN is the queue it was dead-lettered from, when SQS says
	// (DeadLetterQueueSourceArn; AWS sets it, emulators may not).
	SourceARN string `json:"sourceArn,omitempty"`
	// Bytes is the body's length.
	Bytes int  `json:"bytes"`
	Body  Body `json:"body"`
}

// Reason says why the message is in the dead-letter queue, as far as the
// message and the source's redrive policy tell.
func (m Message) Reason(maxReceiveCount int) string {
	if m.Body.Poison != "" {
		return "poison: no consumer can read it (" + m.Body.Poison + ")"
	}
	if maxReceiveCount > 0 {
		return fmt.Sprintf("not processed in %d receives (received %d times, peeks included)", maxReceiveCount, m.ReceiveCount)
	}
	return fmt.Sprintf("not processed (received %d times, peeks included)", m.ReceiveCount)
}

// Peek limits.
const (
	// MaxPeek bounds how many messages one peek reads.
	MaxPeek = 100
	// PeekVisibility is how long a peeked message stays hidden should the
	// peek die before it makes the message visible again.
	PeekVisibility = 30 * time.Second
)

// Peek reads up to limit messages of q without consuming them: it receives
// them with a visibility timeout of PeekVisibility and then makes each
// visible again at once (ChangeMessageVisibility to 0). Every peek counts
// as a receive in ApproximateReceiveCount. Messages hidden while the peek
// runs (being redriven, or peeked by someone else) are not seen.
func Peek(ctx context.Context, c Client, q Queue, limit int) (msgs []Message, err error) {
	limit = min(max(limit, 0), MaxPeek)
	var handles []types.ChangeMessageVisibilityBatchRequestEntry
	defer func() {
		// Whatever happened, what was received becomes visible again; with
		// a context already cancelled, a fresh one bounds the reset.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := resetVisibility(rctx, c, q, handles); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	for len(msgs) < limit {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(q.URL),
			MaxNumberOfMessages: int32(min(limit-len(msgs), 10)),
			VisibilityTimeout:   int32(PeekVisibility / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{
				types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp,
				types.MessageSystemAttributeNameDeadLetterQueueSourceArn,
			},
		})
		if err != nil {
			return msgs, fmt.Errorf("peek at %s: %w", q.Name, err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			handles = append(handles, types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(len(handles))), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
			})
			msgs = append(msgs, describe(m))
		}
	}
	return msgs, nil
}

func describe(m types.Message) Message {
	body := aws.ToString(m.Body)
	out := Message{ID: aws.ToString(m.MessageId), Bytes: len(body), Body: DecodeBody(body),
		SourceARN: m.Attributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)]}
	out.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil && ms > 0 {
		out.SentAt = time.UnixMilli(ms).UTC()
	}
	return out
}

// resetVisibility makes the peeked messages visible again, ten at a time.
func resetVisibility(ctx context.Context, c Client, q Queue, entries []types.ChangeMessageVisibilityBatchRequestEntry) error {
	var errs []error
	for len(entries) > 0 {
		n := min(len(entries), 10)
		out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.URL), Entries: entries[:n]})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("make %d peeked messages of %s visible again (they reappear within %v): %w", n, q.Name, PeekVisibility, err))
		case len(out.Failed) > 0:
			errs = append(errs, fmt.Errorf("make %d peeked messages of %s visible again (they reappear within %v): %s", len(out.Failed), q.Name, PeekVisibility, aws.ToString(out.Failed[0].Message)))
		}
		entries = entries[n:]
	}
	return errors.Join(errs...)
}
