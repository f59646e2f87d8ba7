package timer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

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

// Ledger gives a code step's ledger entry its TTL; *statestore.Store is one.
type Ledger interface {
	Expire(ctx context.Context, key string, at time.Time) error
}

var _ Ledger = (*statestore.Store)(nil)

// Handler follows the state table's stream: it turns each new phase of a
// watched record into a Deadline, and when an order ends for good it gives
// the ledger entries of its code steps the record's TTL. Its event source
// mapping must have ReportBatchItemFailures on: Handle reports the first
// record whose Deadline was not sent or whose entries were not expired,
// and Lambda retries from there.
type Handler struct {
	cfg    Config
	send   Sender
	ledger Ledger
	clk    clock.Clock
	log    *slog.Logger
}

// New returns a Handler that sends through send and expires ledger
// entries through ledger (nil when cfg names no code step), reporting every
// problem of cfg and of the ports at once.
func New(cfg Config, send Sender, ledger Ledger, deps actor.Deps) (*Handler, error) {
	ports := []actor.Port{{Name: "Sender", Value: send}}
	if len(cfg.CodeSteps) > 0 {
		ports = append(ports, actor.Port{Name: "Ledger", Value: ledger})
	}
	if err := actor.Check("timer", cfg.Validate(), ports...); err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	return &Handler{cfg: cfg, send: send, ledger: ledger, clk: deps.Clock, log: deps.Log}, nil
}

// armed is the Deadline of the stream record at index at.
type armed struct {
	at  int
	msg queue.Outgoing
}

// Handle gives the batch's ended orders' ledger entries their TTL, in
// stream order, and sends the Deadlines of the records before the first
// whose entries failed, ten to a request. When something failed it reports
// the first record affected alone, so Lambda retries from it: Deadlines
// and TTLs after it may be written twice, which the Supervisor's fence and
// the TTL's idempotence make harmless. It never returns an error, which
// would make Lambda retry the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log := actor.InvocationLog(ctx, h.log)
	now := h.clk.Now()
	var out []armed
	stuck := len(ev.Records)
	for i, rec := range ev.Records {
		st, old, ok := images(log, rec)
		if ok {
			st, ok = h.withSteps(log, rec, st, old)
		}
		if !ok {
			continue
		}
		if err := h.expireEntries(ctx, st, old); err != nil {
			trace.Log(log, trace.Stored(st.Trace)).Warn(actor.BatchItemFailed, slog.String("reason", "ledger entries not expired; the stream retries from this record"),
				slog.String("orderId", st.OrderID), slog.Any("error", err), slog.String("sequenceNumber", rec.Change.SequenceNumber))
			stuck = i
			break
		}
		d, tr, ok := deadlineOf(st, old)
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
	if err := h.arm(ctx, out); err != nil {
		first := 0 // a failure that names no message holds back the whole batch
		var be *queue.BatchError
		if errors.As(err, &be) && len(be.Failures) > 0 {
			first = be.Failures[0].Index
			for _, f := range be.Failures {
				first = min(first, f.Index)
			}
		}
		stuck = min(stuck, out[first].at)
		log.Warn(actor.BatchItemFailed, slog.String("reason", "deadline not sent; the stream retries from this record"), slog.Any("error", err),
			slog.String("sequenceNumber", ev.Records[stuck].Change.SequenceNumber), slog.Int("redelivered", len(ev.Records)-stuck))
	} else if len(out) > 0 {
		log.Debug("deadlines armed", slog.Int("deadlines", len(out)), slog.Int("records", len(ev.Records)))
	}
	if stuck == len(ev.Records) {
		return events.DynamoDBEventResponse{}, nil
	}
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
		{ItemIdentifier: ev.Records[stuck].Change.SequenceNumber},
	}}, nil
}

// arm sends the Deadlines out.
func (h *Handler) arm(ctx context.Context, out []armed) error {
	if len(out) == 0 {
		return nil
	}
	msgs := make([]queue.Outgoing, len(out))
	for i, a := range out {
		msgs[i] = a.msg
	}
	return h.send.SendBatch(ctx, h.cfg.DeadlineQueueURL, msgs)
}

// images reads a stream record's new image and its old one without their
// steps, which only an order's end needs (see withSteps); the old one
// only when it is readable. An unreadable new image is poison: logged and
// skipped (the sweep still sees the record), never retried, since it
// would fail the same way and hold back the shard.
func images(log *slog.Logger, rec events.DynamoDBEventRecord) (st, old workflow.State, ok bool) {
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		return st, old, false
	}
	st, err := statestore.DecodeImageHead(rec.Change.NewImage)
	if err != nil {
		unreadable(log, rec, err)
		return st, old, false
	}
	if len(rec.Change.OldImage) > 0 {
		// An unreadable old image reads as none: at worst one Deadline,
		// or one TTL, written again.
		old, _ = statestore.DecodeImageHead(rec.Change.OldImage)
	}
	return st, old, true
}

// withSteps reads the new image whole when this write ended the order, so
// expireEntries can read the steps' keys; false when it is unreadable.
func (h *Handler) withSteps(log *slog.Logger, rec events.DynamoDBEventRecord, st, old workflow.State) (workflow.State, bool) {
	if !h.ends(st, old) {
		return st, true
	}
	whole, err := statestore.DecodeImage(rec.Change.NewImage)
	if err != nil {
		unreadable(log, rec, err)
		return st, false
	}
	return whole, true
}

func unreadable(log *slog.Logger, rec events.DynamoDBEventRecord, err error) {
	log.Error(actor.RecordSkipped+": new image unreadable", slog.String("sequenceNumber", rec.Change.SequenceNumber), slog.Any("error", err))
}

// ends reports whether the write from old to st ended an order whose code
// steps' ledger entries take its TTL.
func (h *Handler) ends(st, old workflow.State) bool {
	return len(h.cfg.CodeSteps) > 0 && st.ProcessState.Ended() && !old.ProcessState.Ended() && !st.ExpiresAt.IsZero()
}

// expireEntries gives the ledger entries of the code steps of an order
// that this write ended for good the record's own TTL: every key each of
// them ran under, as its history tells (workflow.StepKeys). Until then an
// entry has none, so it outlives every try of its key, an operator's
// retry of an order that waited for one included; from then on no try
// comes, and it goes with its order. An entry that does not exist is left
// absent.
func (h *Handler) expireEntries(ctx context.Context, st, old workflow.State) error {
	if !h.ends(st, old) {
		return nil
	}
	for i, r := range st.Steps {
		if !slices.Contains(h.cfg.CodeSteps, r.Name) {
			continue
		}
		steps, undos := workflow.StepKeys(st, i)
		for _, key := range append(steps, undos...) {
			if err := h.ledger.Expire(ctx, statestore.LedgerKey(r.Name, key), st.ExpiresAt); err != nil {
				return fmt.Errorf("expire the ledger entry of %s with order %s: %w", key, st.OrderID, err)
			}
		}
	}
	return nil
}

// deadlineOf is the Deadline of a write, if it started a new phase of a
// record the Supervisor watches: the record is in flight, and its Attempt
// or CompleteBy is not what it was (old is zero for an insert, or an
// unreadable old image: at worst one Deadline too many, which the
// Supervisor drops). It returns the order's trace, which the record keeps,
// with the Deadline.
func deadlineOf(st, old workflow.State) (message.Deadline, trace.Header, bool) {
	if !st.InFlight || st.CompleteBy.IsZero() || samePhase(old, st) {
		return message.Deadline{}, trace.Header{}, false
	}
	return message.NewDeadline(st.OrderID, st.StepIndex, st.Attempt, st.CompleteBy), trace.Stored(st.Trace), true
}

// samePhase reports whether a write left the record in the phase it was
// in: still watched, same Attempt, same CompleteBy.
func samePhase(old, st workflow.State) bool {
	return old.InFlight && old.Attempt == st.Attempt && old.CompleteBy.Equal(st.CompleteBy)
}
