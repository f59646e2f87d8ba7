// Package segments sends the X-Ray segments of recorded orders (see
// shared/trace: Sample, Begin) when each Lambda invocation ends: one
// PutTraceSegments request per invocation that recorded any, none for the
// others. Every segment of an order carries the order's trace ID, so X-Ray
// shows the order as one trace across every actor, which Lambda's own
// tracing cannot: it starts a new trace for each invocation an SQS message
// or a stream record triggers.
//
// Sending is best effort: a failure is logged and never fails the work.
package segments

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/trace"
)

// PerRequest is how many segment documents one PutTraceSegments request
// carries at most. The API reference gives no limit; an invocation
// records one segment per record of its batch (at most 10), so one
// request is the rule, and this bound only keeps a request small.
const PerRequest = 50

// Timeout bounds the sending of one invocation's segments. Lambda bills
// the wait; a slow X-Ray costs recorded orders a second at most, and
// unrecorded ones nothing.
const Timeout = time.Second

// Client is the X-Ray API the sender uses.
type Client interface {
	PutTraceSegments(ctx context.Context, in *xray.PutTraceSegmentsInput, opts ...func(*xray.Options)) (*xray.PutTraceSegmentsOutput, error)
}

// Sender sends segments to X-Ray.
type Sender struct {
	client Client
	log    *slog.Logger
}

// New is a Sender over client; a nil client sends nothing (and Wrap then
// records nothing).
func New(client Client, log *slog.Logger) *Sender { return &Sender{client: client, log: log} }

// Send puts segs in requests of up to PerRequest documents. It returns the
// first error; the segments X-Ray reports unprocessed are an error too.
func (s *Sender) Send(ctx context.Context, segs []trace.Segment) error {
	docs := make([]string, 0, len(segs))
	for _, seg := range segs {
		d, err := seg.Document()
		if err != nil {
			return err
		}
		docs = append(docs, d)
	}
	for len(docs) > 0 {
		n := min(len(docs), PerRequest)
		out, err := s.client.PutTraceSegments(ctx, &xray.PutTraceSegmentsInput{TraceSegmentDocuments: docs[:n]})
		if err != nil {
			return fmt.Errorf("put %d trace segments: %w", n, err)
		}
		if k := len(out.UnprocessedTraceSegments); k > 0 {
			return fmt.Errorf("put trace segments: %d of %d unprocessed", k, n)
		}
		docs = docs[n:]
	}
	return nil
}

// Wrap returns fn with each invocation recorded: the segments the actors
// open under it (trace.Begin) are sent when fn returns. now stamps them.
func Wrap[E, R any](s *Sender, now func() time.Time, fn func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	if s == nil || s.client == nil {
		return fn
	}
	return func(ctx context.Context, ev E) (R, error) {
		rec := trace.NewRecording(now)
		resp, err := fn(trace.WithRecording(ctx, rec), ev)
		if segs := rec.Segments(); len(segs) > 0 {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
			if serr := s.Send(sctx, segs); serr != nil {
				s.log.Warn("trace segments not sent; the orders' logs still carry their traceId", slog.Int("segments", len(segs)), slog.Any("error", serr))
			}
			cancel()
		}
		return resp, err
	}
}

// WrapErr is Wrap for a handler that answers only an error (the
// Supervisor's schedule).
func WrapErr[E any](s *Sender, now func() time.Time, fn func(context.Context, E) error) func(context.Context, E) error {
	wrapped := Wrap(s, now, func(ctx context.Context, ev E) (struct{}, error) { return struct{}{}, fn(ctx, ev) })
	return func(ctx context.Context, ev E) error {
		_, err := wrapped(ctx, ev)
		return err
	}
}
