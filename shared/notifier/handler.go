package notifier

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/statestore"
)

// Handler turns the state table's stream into client events. Its event
// source mapping must have ReportBatchItemFailures on: Handle reports the
// first record it could not publish, and Lambda retries the batch from
// there.
type Handler struct {
	cfg Config
	pub Sender
	log *slog.Logger
}

// New returns a Handler that publishes through pub, reporting every problem
// of cfg and of the port at once. It reads no clock: an event's time is its
// record's.
func New(cfg Config, pub Sender, deps actor.Deps) (*Handler, error) {
	if err := actor.Check("notifier", cfg.Validate(), actor.Port{Name: "Sender", Value: pub}); err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	return &Handler{cfg: cfg, pub: pub, log: deps.Log.With("topic", cfg.OrderEventsTopicARN)}, nil
}

// Handle publishes the status changes in a batch of stream records, in
// order. It stops at the first record whose event cannot be published and
// reports it alone: Lambda then retries from that record, so no later change
// of the same order overtakes it (a shard holds an order's records in write
// order, also with a ParallelizationFactor above 1) and the records before
// it are not published twice. It never returns an error, which would make
// Lambda retry the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log := actor.InvocationLog(ctx, h.log)
	for i, rec := range ev.Records {
		rlog := log.With("sequenceNumber", rec.Change.SequenceNumber, "eventName", rec.EventName)
		if err := h.handleRecord(ctx, rlog, rec, len(ev.Records)-i-1); err != nil {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
				{ItemIdentifier: rec.Change.SequenceNumber},
			}}, nil
		}
	}
	return events.DynamoDBEventResponse{}, nil
}

// handleRecord publishes the record's event, if it has one. It returns an
// error, which it logs, only when trying again may succeed; notAttempted
// counts the records of the batch after this one, for that log.
func (h *Handler) handleRecord(ctx context.Context, log *slog.Logger, rec events.DynamoDBEventRecord, notAttempted int) (err error) {
	defer func() {
		// A bug is retried rather than skipped: a skipped event is lost for
		// good, while a stuck shard shows in the iterator age alarm.
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
		if err != nil {
			// log, reassigned below, names the order once it is known.
			log.Error("event not published; the stream retries from this record", "error", err, "notAttempted", notAttempted)
		}
	}()
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		return nil // a deleted record changes no client's status
	}

	// A record whose image cannot be read, or makes no valid event, is
	// poison: it would fail the same way on every retry, and retrying would
	// hold back every order on the shard until the record leaves the stream
	// after 24 hours. So it is logged (alarm on it) and skipped.
	//
	// Skipping can leave a gap: if the unreadable write changed the status,
	// its seq is never published, and the client sees seq N-1 then N+1, or
	// nothing more if it was the order's last change. The next write's old
	// image is that same unreadable item, which is why an unreadable old
	// image below publishes rather than skips. Clients that see a gap, or
	// no terminal status in time, read the order's status from the API.
	st, err := statestore.DecodeImage(rec.Change.NewImage)
	if err != nil {
		log.Error("poison stream record skipped: new image unreadable", "error", err)
		return nil
	}
	if st.ClientID == "" {
		return nil // nobody asked to be told
	}
	log = log.With("orderId", st.OrderID, "seq", st.EventSeq)

	oldSeq := oldSeqOf(log, rec)
	if st.EventSeq <= oldSeq {
		return nil // this write left the client's status alone
	}
	if oldSeq > 0 && st.EventSeq > oldSeq+1 {
		// Writers add exactly one per change; more is a writer's bug that
		// clients will see as a gap.
		log.Warn("event sequence skipped numbers", "oldSeq", oldSeq)
	}

	e := EventOf(st)
	log = log.With("clientId", e.ClientID, "status", e.Status, "state", e.State)
	if err := e.Validate(); err != nil {
		log.Error("poison stream record skipped: no valid event", "error", err)
		return nil
	}
	if err := h.pub.Publish(ctx, e); err != nil {
		return err
	}
	log.Info("notified")
	return nil
}

// oldSeqOf is the event seq of rec's old image. It is 0 for an INSERT (the
// order is new, so seq 1 is a change) and for an old image it cannot read:
// with the old seq unknown, the event is published, and at worst it is a
// duplicate, which clients drop by seq.
func oldSeqOf(log *slog.Logger, rec events.DynamoDBEventRecord) int {
	if len(rec.Change.OldImage) == 0 {
		return 0
	}
	old, err := statestore.DecodeImage(rec.Change.OldImage)
	if err != nil {
		log.Warn("old image unreadable; publishing the new state as a change", "error", err)
		return 0
	}
	return old.EventSeq
}
