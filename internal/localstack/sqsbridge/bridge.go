// Package sqsbridge polls an SQS queue and hands batches to a Lambda SQS
// handler the way Lambda's event source mapping does, with
// ReportBatchItemFailures on: integration tests and local runs use it to
// drive the real handlers without Lambda.
package sqsbridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/esm"
)

// Handler is a Lambda SQS handler that reports partial batch failures.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Client is the part of *sqs.Client the Bridge uses.
type Client interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ Client = (*sqs.Client)(nil)

const (
	// LambdaWaitTime is the long poll Lambda's pollers use; set WaitTime to
	// it for a poller that behaves like Lambda's while idle.
	LambdaWaitTime = 20 * time.Second
	// MaxWaitTime is the longest long poll SQS allows.
	MaxWaitTime = 20 * time.Second
	// MaxBatchSize is the most messages one ReceiveMessage returns.
	MaxBatchSize = 10
	// errorBackoff spaces Run's retries after a failed receive.
	errorBackoff = time.Second
	// idlePause keeps Run from spinning on an empty queue when WaitTime is
	// too short to long-poll.
	idlePause = 200 * time.Millisecond
	// receiveMargin is how long a receive may take beyond its long poll
	// before the poller gives up on its answer: room for an engine slowed
	// down by a loaded machine. A receive given up on may have taken a
	// batch that then stays invisible for the visibility timeout, so it is
	// reported, never retried.
	receiveMargin = 20 * time.Second
	// settleTimeout bounds the delete or the give-back that finishes a
	// batch, which a stopping poller still makes.
	settleTimeout = 20 * time.Second
)

// ErrBatchFailed marks a batch the handler failed as a whole, by returning
// an error, panicking, or naming a message not in the batch. No message of
// such a batch is deleted; all come back after the visibility timeout.
var ErrBatchFailed = errors.New("batch failed")

// Bridge feeds one queue to one handler. Set the fields, then call PollOnce
// or Run; do not change them while Run runs.
type Bridge struct {
	Client   Client
	QueueURL string
	// QueueARN is the events' EventSourceARN.
	QueueARN string
	// BatchSize is the most messages per handler call, 1..10; zero means 10.
	BatchSize int
	// WaitTime is the long poll of each receive, rounded up to whole
	// seconds, at most MaxWaitTime. Zero leaves it to the queue's
	// ReceiveMessageWaitTimeSeconds, which is a short poll (an immediate
	// answer) unless set, as in SQS: right for tests that pump queues.
	WaitTime time.Duration
	Handler  Handler
	// Region is the events' AWSRegion; empty means the one in QueueARN.
	Region string
	// OnError, if set, hears of every error Run carries on past.
	OnError func(error)
}

// PollOnce receives one batch, gives it to the handler if it is not empty,
// and deletes the messages the handler did not report as failed. It returns
// how many messages it gave the handler. A batch the handler failed as a
// whole yields an error wrapping ErrBatchFailed.
//
// A receive, once sent, is never abandoned: the engine takes the messages
// that arrive during its long poll whether or not anyone still waits for
// the answer, and a batch whose answer is lost stays invisible for the
// whole visibility timeout with no handler having seen it. So ctx ending
// (the poller stopping) does not cut the receive short: it runs to the end
// of its wait, bounded by WaitTime plus receiveMargin, and a batch that
// arrives after ctx ended is given back at once (visibility 0), unhandled.
// Nor does the SDK retry a receive: a retry after an answer lost on the way
// back would lose that answer's batch silently, where a failed receive is
// reported.
func (b *Bridge) PollOnce(ctx context.Context) (handled int, err error) {
	if err := b.validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	msgs, err := b.receive(ctx)
	if err != nil {
		return 0, err
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if ctx.Err() != nil {
		return 0, b.giveBack(ctx, msgs)
	}
	ev := b.event(msgs)
	resp, err := esm.Call(ctx, b.Handler, ev)
	if err != nil {
		return len(msgs), fmt.Errorf("%w: handler for %s: %w", ErrBatchFailed, b.QueueURL, err)
	}
	keep, err := failedItems(ev, resp)
	if err != nil {
		return len(msgs), fmt.Errorf("%w: handler for %s: %w", ErrBatchFailed, b.QueueURL, err)
	}
	var done []events.SQSMessage
	for _, m := range ev.Records {
		if !keep[m.MessageId] {
			done = append(done, m)
		}
	}
	// The handler is done with them: a poller stopping now still deletes
	// them, or they would run again.
	return len(msgs), b.delete(ctx, done)
}

// receive makes one ReceiveMessage call that neither ctx's end nor an SDK
// retry cuts short (see PollOnce).
func (b *Bridge) receive(ctx context.Context) ([]types.Message, error) {
	wait := (b.WaitTime + time.Second - 1) / time.Second
	limit := time.Duration(wait)*time.Second + receiveMargin
	if wait == 0 {
		limit = MaxWaitTime + receiveMargin // the queue's own wait, at most MaxWaitTime
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	out, err := b.Client.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(b.QueueURL),
		MaxNumberOfMessages:         int32(b.batchSize()),
		WaitTimeSeconds:             int32(wait),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}, noRetry)
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", b.QueueURL, err)
	}
	return out.Messages, nil
}

// noRetry makes one attempt of a call.
func noRetry(o *sqs.Options) { o.RetryMaxAttempts = 1 }

// giveBack makes msgs visible again at once, for another poller to take.
func (b *Bridge) giveBack(ctx context.Context, msgs []types.Message) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
	}
	out, err := b.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(b.QueueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("give %d message(s) received while stopping back to %s: %w", len(msgs), b.QueueURL, err)
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("give messages received while stopping back to %s: %d failed, so they come back after the visibility timeout: %s",
			b.QueueURL, len(out.Failed), failures(out.Failed, len(msgs), func(i int) string { return aws.ToString(msgs[i].MessageId) }))
	}
	return nil
}

// Run polls until ctx is done, then returns nil. Errors do not stop it: they
// go to OnError, and after a failed receive it waits a moment before trying
// again. It returns an error at once only if the Bridge is misconfigured.
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.validate(); err != nil {
		return err
	}
	esm.Loop(ctx, func(ctx context.Context) time.Duration {
		n, err := b.PollOnce(ctx)
		switch {
		case ctx.Err() != nil:
			// Stopping: only what the stop did not cause is a failure, such
			// as a batch that could not be given back.
			if err != nil && !errors.Is(err, context.Canceled) && b.OnError != nil {
				b.OnError(err)
			}
			return 0
		case err != nil:
			if b.OnError != nil {
				b.OnError(err)
			}
			if n == 0 {
				return errorBackoff
			}
		case n == 0 && b.WaitTime < time.Second:
			return idlePause
		}
		return 0
	})
	return nil
}

func (b *Bridge) validate() error {
	var errs []error
	if b.QueueURL == "" {
		errs = append(errs, errors.New("no QueueURL"))
	}
	if b.QueueARN == "" {
		errs = append(errs, errors.New("no QueueARN"))
	}
	if b.BatchSize < 0 || b.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("BatchSize %d is outside 1..%d", b.BatchSize, MaxBatchSize))
	}
	if b.WaitTime < 0 || b.WaitTime > MaxWaitTime {
		errs = append(errs, fmt.Errorf("WaitTime %v is outside 0..%v", b.WaitTime, MaxWaitTime))
	}
	if b.Region == "" && esm.ARNRegion(b.QueueARN) == "" && b.QueueARN != "" {
		errs = append(errs, fmt.Errorf("no Region, and QueueARN %q names none", b.QueueARN))
	}
	return esm.Validate("sqsbridge", b.QueueURL, b.Client != nil, b.Handler != nil, errs...)
}

func (b *Bridge) batchSize() int { return cmp.Or(b.BatchSize, MaxBatchSize) }

func (b *Bridge) region() string {
	if b.Region != "" {
		return b.Region
	}
	return esm.ARNRegion(b.QueueARN)
}

// event builds the event Lambda would: the runtime decodes JSON in which
// empty lists are [] and missing maps are {}, so they are never nil here.
func (b *Bridge) event(msgs []types.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		attrs := make(map[string]string, len(m.Attributes))
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		mattrs := make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			mattrs[k] = events.SQSMessageAttribute{
				DataType:         aws.ToString(v.DataType),
				StringValue:      v.StringValue,
				BinaryValue:      v.BinaryValue,
				StringListValues: nonNil(v.StringListValues),
				BinaryListValues: nonNil(v.BinaryListValues),
			}
		}
		ev.Records[i] = events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             attrs,
			MessageAttributes:      mattrs,
			EventSourceARN:         b.QueueARN,
			EventSource:            "aws:sqs",
			AWSRegion:              b.region(),
		}
	}
	return ev
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// failedItems returns the IDs the handler reported as failed. An ID not in
// the batch, or an empty one, fails the whole batch, as Lambda treats it.
func failedItems(ev events.SQSEvent, resp events.SQSEventResponse) (map[string]bool, error) {
	inBatch := make(map[string]bool, len(ev.Records))
	for _, m := range ev.Records {
		inBatch[m.MessageId] = true
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if !inBatch[f.ItemIdentifier] {
			return nil, fmt.Errorf("batch item failure names %q, which is not in the batch", f.ItemIdentifier)
		}
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

func (b *Bridge) delete(ctx context.Context, msgs []events.SQSMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.ReceiptHandle)}
	}
	out, err := b.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(b.QueueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("delete %d handled message(s) from %s: %w", len(msgs), b.QueueURL, err)
	}
	if len(out.Failed) == 0 {
		return nil
	}
	return fmt.Errorf("delete handled messages from %s: %d failed, so they will be handled again: %s",
		b.QueueURL, len(out.Failed), failures(out.Failed, len(msgs), func(i int) string { return msgs[i].MessageId }))
}

// failures names the failed entries of a batch call on n messages whose
// entry IDs are the messages' indexes, by the message IDs id gives.
func failures(failed []types.BatchResultErrorEntry, n int, id func(int) string) string {
	names := make([]string, len(failed))
	for i, f := range failed {
		name := aws.ToString(f.Id)
		if k, err := strconv.Atoi(name); err == nil && k >= 0 && k < n {
			name = id(k)
		}
		names[i] = fmt.Sprintf("%s (%s: %s)", name, aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return strings.Join(names, "; ")
}
