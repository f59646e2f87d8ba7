package notifier

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/trace"
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
	return &Handler{cfg: cfg, pub: pub, log: deps.Log.With(slog.String("topic", cfg.OrderEventsTopicARN))}, nil
}

// Handle publishes the status changes in a batch of stream records, in
// stream order, up to ten events per SNS request (PublishBatch). It reports
// the first record whose event was not published, alone: Lambda then
// retries from that record, so the records before it are not published
// twice and it is published before any later record's event that SNS did
// not already take (a shard holds an order's records in write order, also
// with a ParallelizationFactor above 1). Events after it that SNS did take,
// in its request, are published again on the retry; clients drop such
// duplicates by seq. It never returns an error, which would make Lambda
// retry the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log := actor.InvocationLog(ctx, h.log)
	queue, stuck := h.collect(log, ev.Records)
	n, err := h.send(ctx, queue)
	// One line per event would be the Notifier's biggest log cost (a third
	// of an order's log bytes); the events themselves are on the topic, so
	// each is a debug line and the invocation logs one summary.
	for _, q := range queue[:n] {
		q.log.Debug("notified")
	}
	if n > 0 {
		log.Info("events published", slog.Int("events", n), slog.Int("records", len(ev.Records)))
	}
	switch {
	case n < len(queue):
		stuck = queue[n]
		stuck.err = err
	case stuck.err == nil:
		return events.DynamoDBEventResponse{}, nil
	}
	stuck.log.Warn(actor.BatchItemFailed, slog.String("reason", "event not published; the stream retries from this record"), slog.Any("error", stuck.err),
		slog.Int("redelivered", len(ev.Records)-stuck.at))
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
		{ItemIdentifier: ev.Records[stuck.at].Change.SequenceNumber},
	}}, nil
}

// queued is the event of the record at index at of a stream batch, with the
// log that names both; err says why the record has none when it should.
type queued struct {
	at    int
	ev    Event
	trace trace.Header
	log   *slog.Logger
	err   error
}

// collect returns the events of records, in order, up to the first record
// whose event could not be made for a reason a retry may cure; that record
// is returned as stuck, with its error (nil when there is none).
func (h *Handler) collect(log *slog.Logger, records []events.DynamoDBEventRecord) (queue []queued, stuck queued) {
	for i, rec := range records {
		q := queued{at: i, log: log.With(slog.String("sequenceNumber", rec.Change.SequenceNumber), slog.String("eventName", rec.EventName))}
		ok := h.eventOf(rec, &q)
		if q.err != nil {
			return queue, q
		}
		if ok {
			queue = append(queue, q)
		}
	}
	return queue, queued{}
}

// send publishes the queued events and returns how many from the first are
// published, and why the next is not.
func (h *Handler) send(ctx context.Context, queue []queued) (n int, err error) {
	if len(queue) == 0 {
		return 0, nil
	}
	defer func() {
		// A panic leaves unknown which events went out: all count as not
		// published, which costs at most duplicates.
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("panic: %v", p)
		}
	}()
	evs := make([]Event, len(queue))
	for i, q := range queue {
		evs[i] = q.ev
	}
	// A publish request carries one trace header, and a batch mixes
	// orders: the request goes in the first event's trace. Each event's own
	// trace is in the log lines about it.
	n, err = h.pub.PublishBatch(trace.NewContext(ctx, queue[0].trace), evs)
	switch {
	case n < 0 || n > len(evs):
		return 0, fmt.Errorf("sender reported %d of %d events published", n, len(evs))
	case n < len(evs) && err == nil:
		return n, fmt.Errorf("sender stopped at event %d of %d without an error", n, len(evs))
	}
	return n, err
}

// eventOf fills in q.ev and reports true if the record has an event to
// publish, and sets q.err, which the caller logs, only when trying again may
// succeed. It adds to q.log what it learns of the order.
func (h *Handler) eventOf(rec events.DynamoDBEventRecord, q *queued) (ok bool) {
	defer func() {
		// A bug is retried rather than skipped: a skipped event is lost for
		// good, while a stuck shard shows in the iterator age alarm.
		if p := recover(); p != nil {
			ok, q.err = false, fmt.Errorf("panic: %v", p)
		}
	}()
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		return false // a deleted record changes no client's status
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
	// Most writes leave the client's status alone: their images' EventSeq
	// attributes say so, and neither image is decoded. Then the head (no
	// steps), and the whole new image only for a change.
	if seq, ok := statestore.ImageEventSeq(rec.Change.NewImage); ok && len(rec.Change.OldImage) > 0 {
		if old, ok := statestore.ImageEventSeq(rec.Change.OldImage); ok && seq <= old {
			return false
		}
	}
	head, err := statestore.DecodeImageHead(rec.Change.NewImage)
	if err != nil {
		q.log.Error(actor.RecordSkipped+": new image unreadable", slog.Any("error", err))
		return false
	}
	if head.ClientID == "" {
		return false // nobody asked to be told
	}
	q.trace = trace.Stored(head.Trace)
	q.log = trace.Log(q.log.With(slog.String("orderId", head.OrderID), slog.Int("seq", head.EventSeq)), q.trace)

	oldSeq := oldSeqOf(q.log, rec)
	if head.EventSeq <= oldSeq {
		return false // this write left the client's status alone
	}
	if oldSeq > 0 && head.EventSeq > oldSeq+1 {
		// Writers add exactly one per change; more is a writer's bug that
		// clients will see as a gap.
		q.log.Warn("event sequence skipped numbers", slog.Int("oldSeq", oldSeq))
	}
	st, err := statestore.DecodeImage(rec.Change.NewImage)
	if err != nil {
		q.log.Error(actor.RecordSkipped+": new image unreadable", slog.Any("error", err))
		return false
	}

	q.ev = EventOf(st)
	q.log = q.log.With(slog.String("clientId", q.ev.ClientID), slog.Any("status", q.ev.Status), slog.Any("state", q.ev.State))
	if err := q.ev.Validate(); err != nil {
		q.log.Error(actor.RecordSkipped+": no valid event", slog.Any("error", err))
		return false
	}
	return true
}

// oldSeqOf is the event seq of rec's old image. It is 0 for an INSERT (the
// order is new, so seq 1 is a change) and for an old image it cannot read:
// with the old seq unknown, the event is published, and at worst it is a
// duplicate, which clients drop by seq.
func oldSeqOf(log *slog.Logger, rec events.DynamoDBEventRecord) int {
	if len(rec.Change.OldImage) == 0 {
		return 0
	}
	old, err := statestore.DecodeImageHead(rec.Change.OldImage)
	if err != nil {
		log.Warn("old image unreadable; publishing the new state as a change", slog.Any("error", err))
		return 0
	}
	return old.EventSeq
}
