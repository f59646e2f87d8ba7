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
// how many messages it received. A batch the handler failed as a whole
// yields an error wrapping ErrBatchFailed.
func (b *Bridge) PollOnce(ctx context.Context) (received int, err error) {
	if err := b.validate(); err != nil {
		return 0, err
	}
	out, err := b.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(b.QueueURL),
		MaxNumberOfMessages:         int32(b.batchSize()),
		WaitTimeSeconds:             int32((b.WaitTime + time.Second - 1) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return 0, fmt.Errorf("receive from %s: %w", b.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	ev := b.event(out.Messages)
	resp, err := esm.Call(ctx, b.Handler, ev)
	if err != nil {
		return len(out.Messages), fmt.Errorf("%w: handler for %s: %w", ErrBatchFailed, b.QueueURL, err)
	}
	keep, err := failedItems(ev, resp)
	if err != nil {
		return len(out.Messages), fmt.Errorf("%w: handler for %s: %w", ErrBatchFailed, b.QueueURL, err)
	}
	var done []events.SQSMessage
	for _, m := range ev.Records {
		if !keep[m.MessageId] {
			done = append(done, m)
		}
	}
	return len(out.Messages), b.delete(ctx, done)
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
	failed := make([]string, len(out.Failed))
	for i, f := range out.Failed {
		id := aws.ToString(f.Id)
		if n, err := strconv.Atoi(id); err == nil && n >= 0 && n < len(msgs) {
			id = msgs[n].MessageId
		}
		failed[i] = fmt.Sprintf("%s (%s: %s)", id, aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return fmt.Errorf("delete handled messages from %s: %d failed, so they will be handled again: %s",
		b.QueueURL, len(failed), strings.Join(failed, "; "))
}
