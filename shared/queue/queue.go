// Package queue sends messages to SQS queues for the Submission, Scheduler,
// Supervisor and Agents.
package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/shared/trace"
)

// MaxDelay is the longest delay SQS accepts on a message.
const MaxDelay = 15 * time.Minute

// MaxBatch is the most entries SQS takes in one SendMessageBatch.
const MaxBatch = 10

// ErrDelay marks a delay SQS cannot honour: negative or over MaxDelay.
var ErrDelay = errors.New("invalid message delay")

// Client is the part of *sqs.Client the Sender uses.
type Client interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ Client = (*sqs.Client)(nil)

// Sender sends message bodies to queues named by URL.
type Sender struct {
	client Client
}

// NewSender returns a Sender over c.
func NewSender(c Client) *Sender { return &Sender{client: c} }

// Send puts body on the queue, invisible for delay. The delay is rounded up
// to whole seconds (SQS's unit) so a message never arrives early; a delay
// over MaxDelay is an error rather than a silent cap, since arriving early is
// what the caller asked not to happen. The trace ctx carries (trace.NewContext)
// goes with the message as its AWSTraceHeader.
func (s *Sender) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("send to %s: %w: %v is outside 0..%v", queueURL, ErrDelay, delay, MaxDelay)
	}
	_, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:                aws.String(queueURL),
		MessageBody:             aws.String(body),
		DelaySeconds:            int32((delay + time.Second - 1) / time.Second),
		MessageSystemAttributes: traceAttribute(ctx, trace.Header{}),
	})
	if err != nil {
		return fmt.Errorf("send to %s: %w", queueURL, err)
	}
	return nil
}

// Outgoing is one message of a batch: its body, invisible for Delay
// (rounded up to whole seconds, as Send does), in the trace of its order
// (a batch mixes orders); a zero Trace means the one the context carries.
type Outgoing struct {
	Body  string
	Delay time.Duration
	Trace trace.Header
}

// traceAttribute is the AWSTraceHeader system attribute of a message in
// trace h, or else in the trace ctx carries; nil when there is none.
func traceAttribute(ctx context.Context, h trace.Header) map[string]types.MessageSystemAttributeValue {
	if h.IsZero() {
		h, _ = trace.FromContext(ctx)
	}
	if h.IsZero() {
		return nil
	}
	return map[string]types.MessageSystemAttributeValue{
		trace.SQSAttribute: {DataType: aws.String("String"), StringValue: aws.String(h.String())},
	}
}

// Bodies is bodies as a batch without delays.
func Bodies(bodies ...string) []Outgoing {
	out := make([]Outgoing, len(bodies))
	for i, b := range bodies {
		out[i].Body = b
	}
	return out
}

// SendBatch puts msgs on the queue, MaxBatch to a request. A ten-message
// request of small messages is billed as one. It sends every chunk even
// when one fails, and then reports the messages that were not sent in a
// *BatchError, so the caller can resend just those. A message whose delay
// is outside 0..MaxDelay is not sent and fails with ErrDelay.
func (s *Sender) SendBatch(ctx context.Context, queueURL string, msgs []Outgoing) error {
	var failures []BatchFailure
	for start := 0; start < len(msgs); start += MaxBatch {
		end := min(start+MaxBatch, len(msgs))
		failures = append(failures, s.sendChunk(ctx, queueURL, msgs, start, end)...)
	}
	if len(failures) > 0 {
		return &BatchError{QueueURL: queueURL, Total: len(msgs), Failures: failures}
	}
	return nil
}

// sendChunk sends msgs[start:end]; entry IDs are indexes into msgs so a
// failure names the message it belongs to.
func (s *Sender) sendChunk(ctx context.Context, queueURL string, msgs []Outgoing, start, end int) []BatchFailure {
	entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
	var refused []BatchFailure
	for i := start; i < end; i++ {
		if d := msgs[i].Delay; d < 0 || d > MaxDelay {
			refused = append(refused, BatchFailure{Index: i, Err: fmt.Errorf("%w: %v is outside 0..%v", ErrDelay, d, MaxDelay)})
			continue
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id:                      aws.String(strconv.Itoa(i)),
			MessageBody:             aws.String(msgs[i].Body),
			DelaySeconds:            int32((msgs[i].Delay + time.Second - 1) / time.Second),
			MessageSystemAttributes: traceAttribute(ctx, msgs[i].Trace),
		})
	}
	if len(entries) == 0 {
		return refused
	}
	return append(refused, s.sendEntries(ctx, queueURL, entries)...)
}

// sendEntries sends one SendMessageBatch request and reports the entries it
// did not send, by the index their IDs carry.
func (s *Sender) sendEntries(ctx context.Context, queueURL string, entries []types.SendMessageBatchRequestEntry) []BatchFailure {
	out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	index := make([]int, len(entries))
	for k, e := range entries {
		index[k], _ = strconv.Atoi(aws.ToString(e.Id))
	}
	if err != nil {
		failures := make([]BatchFailure, 0, len(entries))
		for _, i := range index {
			failures = append(failures, BatchFailure{Index: i, Err: err})
		}
		return failures
	}
	// An entry SQS reports neither way was not sent as far as we can tell.
	pending := make(map[int]bool, len(entries))
	for _, i := range index {
		pending[i] = true
	}
	for _, ok := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil {
			delete(pending, i)
		}
	}
	var failures []BatchFailure
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || !pending[i] {
			continue
		}
		delete(pending, i)
		failures = append(failures, BatchFailure{
			Index:       i,
			Code:        aws.ToString(f.Code),
			Message:     aws.ToString(f.Message),
			SenderFault: f.SenderFault,
		})
	}
	for _, i := range index {
		if pending[i] {
			failures = append(failures, BatchFailure{Index: i, Message: "no result for this entry in the SendMessageBatch response"})
		}
	}
	return failures
}

// BatchFailure is one message SendBatch did not send.
type BatchFailure struct {
	// Index is the message's position in the slice given to SendBatch.
	Index int
	// Code, Message and SenderFault are SQS's verdict on this entry.
	Code, Message string
	SenderFault   bool
	// Err is set instead when the whole request for this body's chunk failed.
	Err error
}

// BatchError lists the bodies SendBatch did not send.
type BatchError struct {
	QueueURL string
	Total    int
	Failures []BatchFailure
}

// Error names each failed entry by index; entries of a chunk whose whole
// request failed share one line.
func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "send batch to %s: %d of %d messages not sent:", e.QueueURL, len(e.Failures), e.Total)
	fs := e.Failures
	for i := 0; i < len(fs); i++ {
		if i > 0 {
			b.WriteString(";")
		}
		f := fs[i]
		if f.Err != nil {
			j := i
			for j+1 < len(fs) && sameRequestError(fs[j], fs[j+1]) {
				j++
			}
			if j > i {
				fmt.Fprintf(&b, " #%d-#%d %v", f.Index, fs[j].Index, f.Err)
				i = j
				continue
			}
			fmt.Fprintf(&b, " #%d %v", f.Index, f.Err)
			continue
		}
		if f.Code != "" {
			fmt.Fprintf(&b, " #%d %s: %s", f.Index, f.Code, f.Message)
			continue
		}
		fmt.Fprintf(&b, " #%d %s", f.Index, f.Message)
	}
	return b.String()
}

// Unwrap returns the request errors, one per failed chunk, so errors.Is
// sees, say, context.Canceled.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for i, f := range e.Failures {
		if f.Err != nil && (i == 0 || !sameRequestError(e.Failures[i-1], f)) {
			errs = append(errs, f.Err)
		}
	}
	return errs
}

// sameRequestError tells whether b follows a in the same failed chunk. It
// compares messages, not values: some error types panic under ==.
func sameRequestError(a, b BatchFailure) bool {
	return a.Err != nil && b.Err != nil && b.Index == a.Index+1 &&
		b.Index%MaxBatch != 0 && a.Err.Error() == b.Err.Error()
}
