package timer

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// Sender puts a batch of messages on an SQS queue, each with its delay.
type Sender interface {
	SendBatch(ctx context.Context, queueURL string, msgs []queue.Outgoing) error
}

var _ Sender = (*queue.Sender)(nil)

// Handler turns the state table's stream into Deadlines. Its event source
// mapping must have ReportBatchItemFailures on: Handle reports the first
// record whose Deadline was not sent, and Lambda retries from there.
type Handler struct {
	cfg  Config
	send Sender
	clk  clock.Clock
	log  *slog.Logger
}

// New returns a Handler that sends through send, reporting every problem
// of cfg and of the port at once.
func New(cfg Config, send Sender, deps actor.Deps) (*Handler, error) {
	if err := actor.Check("timer", cfg.Validate(), actor.Port{Name: "Sender", Value: send}); err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	return &Handler{cfg: cfg, send: send, clk: deps.Clock, log: deps.Log}, nil
}

// armed is the Deadline of the stream record at index at.
type armed struct {
	at  int
	msg queue.Outgoing
}

// Handle sends the Deadlines of a batch of stream records, ten to a
// request. When some are not sent it reports the first of their records
// alone, so Lambda retries from it: Deadlines after it may go twice, which
// the Supervisor's fence makes harmless. It never returns an error, which
// would make Lambda retry the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log := actor.InvocationLog(ctx, h.log)
	now := h.clk.Now()
	var out []armed
	for i, rec := range ev.Records {
		d, tr, ok := h.deadlineOf(log, rec)
		if !ok {
			continue
		}
		wait := d.CompleteBy.Sub(now)
		if wait > queue.MaxDelay {
			trace.Log(log, tr).Debug("phase longer than a message delay; left to the sweep", slog.String("orderId", d.OrderID), slog.Time("completeBy", d.CompleteBy))
			continue
		}
		// Each Deadline goes in its own order's trace: a batch mixes orders.
		out = append(out, armed{at: i, msg: queue.Outgoing{Body: message.Encode(d), Delay: max(wait, 0), Trace: tr}})
	}
	if len(out) == 0 {
		return events.DynamoDBEventResponse{}, nil
	}
	msgs := make([]queue.Outgoing, len(out))
	for i, a := range out {
		msgs[i] = a.msg
	}
	err := h.send.SendBatch(ctx, h.cfg.DeadlineQueueURL, msgs)
	if err == nil {
		log.Debug("deadlines armed", slog.Int("deadlines", len(out)), slog.Int("records", len(ev.Records)))
		return events.DynamoDBEventResponse{}, nil
	}
	first := 0 // a failure that names no message holds back the whole batch
	var be *queue.BatchError
	if errors.As(err, &be) && len(be.Failures) > 0 {
		first = be.Failures[0].Index
		for _, f := range be.Failures {
			first = min(first, f.Index)
		}
	}
	stuck := out[first].at
	log.Warn(actor.BatchItemFailed, slog.String("reason", "deadline not sent; the stream retries from this record"), slog.Any("error", err),
		slog.String("sequenceNumber", ev.Records[stuck].Change.SequenceNumber), slog.Int("redelivered", len(ev.Records)-stuck))
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
		{ItemIdentifier: ev.Records[stuck].Change.SequenceNumber},
	}}, nil
}

// deadlineOf is the Deadline of a stream record, if its write started a new
// phase of a record the Supervisor watches: the record is in flight, and
// its Attempt or CompleteBy is not what it was. An unreadable new image is
// poison: logged and skipped (the sweep still sees the record), never
// retried, since it would fail the same way and hold back the shard. It
// returns the order's trace, which the record keeps, with the Deadline.
func (h *Handler) deadlineOf(log *slog.Logger, rec events.DynamoDBEventRecord) (message.Deadline, trace.Header, bool) {
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		return message.Deadline{}, trace.Header{}, false
	}
	st, err := statestore.DecodeImage(rec.Change.NewImage)
	if err != nil {
		log.Error(actor.RecordSkipped+": new image unreadable", slog.String("sequenceNumber", rec.Change.SequenceNumber), slog.Any("error", err))
		return message.Deadline{}, trace.Header{}, false
	}
	if !st.InFlight || st.CompleteBy.IsZero() {
		return message.Deadline{}, trace.Header{}, false
	}
	if len(rec.Change.OldImage) > 0 {
		// An unreadable old image counts as a new phase: at worst one
		// Deadline too many, which the Supervisor drops.
		if old, err := statestore.DecodeImage(rec.Change.OldImage); err == nil && samePhase(old, st) {
			return message.Deadline{}, trace.Header{}, false
		}
	}
	return message.NewDeadline(st.OrderID, st.StepIndex, st.Attempt, st.CompleteBy), trace.Stored(st.Trace), true
}

// samePhase reports whether a write left the record in the phase it was
// in: still watched, same Attempt, same CompleteBy.
func samePhase(old, st workflow.State) bool {
	return old.InFlight && old.Attempt == st.Attempt && old.CompleteBy.Equal(st.CompleteBy)
}
