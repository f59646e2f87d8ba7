package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// Redeliverer brings a message back after a wait of the handler's choosing.
type Redeliverer interface {
	After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error
}

var _ Redeliverer = (*queue.Redeliverer)(nil)

// Option configures a Handler.
type Option func(*Handler)

// WithRedelivery brings a Deadline that failed for a reason that may pass,
// or that came before its CompleteBy, back when it should; without it the
// message waits out the queue's visibility timeout.
func WithRedelivery(r Redeliverer) Option { return func(h *Handler) { h.redeliver = r } }

// HandleDeadlines is the fast path: each message.Deadline (armed by
// shared/timer when a phase of a record began) arrives when that phase's
// CompleteBy passes, and the record is recovered exactly as a sweep would
// recover it, under the same fence. A Deadline of a phase the record has
// left (the step completed, another Supervisor or a sweep got there first,
// a duplicate) is dropped after one read. Poison goes back to the queue and
// so, after its receive limit, to the dead-letter queue and its alarm.
func (h *Handler) HandleDeadlines(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	log := actor.InvocationLog(ctx, h.log)
	var resp events.SQSEventResponse
	var rep Report
	for _, rec := range ev.Records {
		wait, err := h.deadline(ctx, rec, &rep, log.With(slog.String("messageId", rec.MessageId)))
		if err == nil {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		if errors.Is(err, message.ErrPoison) || h.redeliver == nil {
			continue
		}
		if rerr := h.redeliver.After(ctx, rec, wait); rerr != nil {
			log.Warn("deadline not brought back early; it waits out the visibility timeout", slog.String("messageId", rec.MessageId), slog.Any("error", rerr))
		}
	}
	if rep.Expired > 0 {
		log.Debug("deadlines handled", slog.Int("deadlines", len(ev.Records)), slog.Int("expired", rep.Expired), slog.Int("retried", rep.Retried),
			slog.Int("gaveUp", rep.GaveUp), slog.Int("requeued", rep.Requeued), slog.Int("alertsResent", rep.AlertsResent), slog.Int("lostRace", rep.Lost), slog.Int("failed", rep.Failed))
	}
	return resp, nil
}

// deadline handles one Deadline. An error asks for the message back after
// wait: poison (which waits out its visibility), a read or a recovery that
// failed (soon), or a Deadline that came before its CompleteBy (then).
func (h *Handler) deadline(ctx context.Context, rec events.SQSMessage, rep *Report, log *slog.Logger) (time.Duration, error) {
	ctx, log = trace.JoinSQS(ctx, log, rec)
	d, err := message.DecodeDeadline(rec.Body)
	if err != nil {
		log.Error(actor.BatchItemFailed, slog.String("reason", "poison deadline; it goes to the dead-letter queue after its receives"), slog.Any("error", err))
		return 0, err
	}
	log = log.With(slog.String("orderId", d.OrderID), slog.Int("stepIndex", d.StepIndex), slog.Int("attempt", d.Attempt))
	head, ok, wait, err := h.stillIn(ctx, rec, d, log, h.store.PeekHead)
	if !ok {
		return wait, err // the record left that phase (the usual case), or could not be read
	}
	if _, ok := trace.FromContext(ctx); !ok {
		// A Deadline sent without a trace: the record keeps its order's.
		ctx, log = trace.Join(ctx, log, trace.Stored(head.Trace))
	}
	now := h.clk.Now()
	if early := head.CompleteBy.Sub(now); early > 0 {
		// Clocks of two functions disagree by a little: look again then.
		log.Warn(actor.BatchItemFailed, slog.String("reason", "deadline came before its CompleteBy; it comes back then"), slog.Any("error", errNotDue), slog.Duration("in", early))
		return early, errNotDue
	}
	// The recovery decides on the whole record, read as it is now.
	st, ok, wait, err := h.stillIn(ctx, rec, d, log, h.store.GetState)
	if !ok {
		return wait, err
	}
	rep.Expired++
	failed := rep.Failed
	rctx, span := trace.Open(ctx, DeadlineSegmentName)
	span.Annotate("order_id", st.OrderID)
	h.recover(rctx, st, now, rep, log.With(slog.String("step", st.Step)))
	span.End(rep.Failed > failed)
	if rep.Failed > failed {
		wait := queue.RedeliveryDelay(queue.ReceiveCount(rec))
		log.Warn(actor.BatchItemFailed, slog.String("reason", "recovery failed; the deadline comes back"), slog.Any("error", errRecoverFailed), slog.Duration("in", wait))
		return wait, errRecoverFailed
	}
	return 0, nil
}

// DeadlineSegmentName names a recovery the fast path makes in a recorded
// order's trace.
const DeadlineSegmentName = "supervisor deadline"

var (
	errNotDue        = errors.New("deadline came before its CompleteBy")
	errRecoverFailed = errors.New("recovery failed")
)

// stillIn reads d's record with read and reports whether it is still in
// the phase d was sent for. A record that does not exist drops the
// Deadline; a read that failed asks for it back after wait.
func (h *Handler) stillIn(ctx context.Context, rec events.SQSMessage, d message.Deadline, log *slog.Logger,
	read func(context.Context, string) (workflow.State, error)) (st workflow.State, ok bool, wait time.Duration, err error) {
	st, err = read(ctx, d.OrderID)
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		log.Warn("deadline of an order that does not exist; dropped")
		return st, false, 0, nil
	case err != nil:
		wait = queue.RedeliveryDelay(queue.ReceiveCount(rec))
		log.Warn(actor.BatchItemFailed, slog.String("reason", "deadline not checked; it comes back"), slog.Any("error", err), slog.Duration("in", wait))
		return st, false, wait, err
	}
	return st, inPhase(st, d), 0, nil
}

// inPhase reports whether st is still in the phase d was sent for.
func inPhase(st workflow.State, d message.Deadline) bool {
	return st.InFlight && st.Attempt == d.Attempt && st.CompleteBy.Equal(d.CompleteBy)
}
