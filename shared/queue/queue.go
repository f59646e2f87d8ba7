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
// what the caller asked not to happen.
func (s *Sender) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("send to %s: %w: %v is outside 0..%v", queueURL, ErrDelay, delay, MaxDelay)
	}
	_, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(queueURL),
		MessageBody:  aws.String(body),
		DelaySeconds: int32((delay + time.Second - 1) / time.Second),
	})
	if err != nil {
		return fmt.Errorf("send to %s: %w", queueURL, err)
	}
	return nil
}

// SendBatch puts bodies on the queue without delay, MaxBatch to a request.
// It sends every chunk even when one fails, and then reports the bodies that
// were not sent in a *BatchError, so the caller can resend just those.
func (s *Sender) SendBatch(ctx context.Context, queueURL string, bodies []string) error {
	var failures []BatchFailure
	for start := 0; start < len(bodies); start += MaxBatch {
		end := min(start+MaxBatch, len(bodies))
		failures = append(failures, s.sendChunk(ctx, queueURL, bodies, start, end)...)
	}
	if len(failures) > 0 {
		return &BatchError{QueueURL: queueURL, Total: len(bodies), Failures: failures}
	}
	return nil
}

// sendChunk sends bodies[start:end]; entry IDs are indexes into bodies so a
// failure names the body it belongs to.
func (s *Sender) sendChunk(ctx context.Context, queueURL string, bodies []string, start, end int) []BatchFailure {
	entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
	for i := start; i < end; i++ {
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i)),
			MessageBody: aws.String(bodies[i]),
		})
	}
	out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err != nil {
		failures := make([]BatchFailure, 0, end-start)
		for i := start; i < end; i++ {
			failures = append(failures, BatchFailure{Index: i, Err: err})
		}
		return failures
	}
	// An entry SQS reports neither way was not sent as far as we can tell.
	pending := make(map[int]bool, end-start)
	for i := start; i < end; i++ {
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
	for i := start; i < end; i++ {
		if pending[i] {
			failures = append(failures, BatchFailure{Index: i, Message: "no result for this entry in the SendMessageBatch response"})
		}
	}
	return failures
}

// BatchFailure is one body SendBatch did not send.
type BatchFailure struct {
	// Index is the body's position in the slice given to SendBatch.
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
