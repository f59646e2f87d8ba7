package simulation

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/testkit/ddbmodel"
	"github.com/sasflow/sas/shared/statestore"
)

// The state table's stream and Lambda's event source mapping on it, as the
// DynamoDB and Lambda developer guides describe them and the stack
// configures them:
//   - every write of a record appears once, in its shard, in the order of
//     the writes to that item (items spread over shards; no order across
//     them);
//   - a consumer reads each shard one batch at a time (ParallelizationFactor
//     1), up to its batch size, polling it four times a second;
//   - a batch that fails is retried whole, and one that reports a batch
//     item failure is retried from that record (ReportBatchItemFailures),
//     until it succeeds (RetryAttempts -1): at least once, in order;
//   - NEW_AND_OLD_IMAGES; INSERT and MODIFY only (the stack filters REMOVE).
//
// The records are the DynamoDB model's (ddbmodel.Record): one of each
// write the state table took, with the images as the table held them.
// Once every reader is past a record it is dropped (its images are every
// version of every record the run wrote); what the deadline check needs of
// it is kept (stream.phases).

const (
	streamShards = 4
	streamPoll   = 250 * time.Millisecond
)

type streamRecord struct {
	seq     string
	orderID string
	rec     *ddbmodel.Record
	// ev is the record as Lambda hands it over, made on first use.
	ev *events.DynamoDBEventRecord
}

type stream struct {
	w *World
	// shards holds each shard's records from base on: those before it
	// every reader has had.
	shards  [streamShards][]*streamRecord
	base    [streamShards]int
	readers []*streamReader
	// phases are the phases the records began, in stream order: each a
	// write that left a record in flight with a new Attempt or CompleteBy.
	phases []phase
}

// trimAt is how many records every reader must be past before they are
// dropped: the copy that drops them is then rare.
const trimAt = 1024

// streamReader is one consumer's event source mapping.
type streamReader struct {
	name  string
	batch int
	// pos is the next record's sequence in its shard, counted from the
	// shard's first record (dropped ones included).
	pos     [streamShards]int
	busy    [streamShards]bool
	polling [streamShards]bool
	handle  func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	timeout time.Duration
}

func shardOf(orderID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(orderID))
	return int(h.Sum32() % streamShards)
}

// append adds the record of a write; a REMOVE (a TTL deletion) the event
// source mappings' filter drops, as the stack's does.
func (s *stream) append(rec *ddbmodel.Record) {
	if rec.EventName == events.DynamoDBOperationTypeRemove {
		return
	}
	id := rec.Keys[statestore.KeyOrderID].(*types.AttributeValueMemberS).Value
	sh := shardOf(id)
	if st, old := phaseOf(rec.NewImage), phaseOf(rec.OldImage); st.inFlight && !(old.inFlight && old.attempt == st.attempt && old.completeBy.Equal(st.completeBy)) {
		s.phases = append(s.phases, st)
	}
	s.shards[sh] = append(s.shards[sh], &streamRecord{seq: rec.SequenceNumber(), orderID: id, rec: rec})
	for _, r := range s.readers {
		s.wake(r, sh)
	}
}

// wake makes sure r polls shard sh soon.
func (s *stream) wake(r *streamReader, sh int) {
	if r.polling[sh] || r.busy[sh] {
		return
	}
	r.polling[sh] = true
	s.w.after(s.w.delay(time.Millisecond, streamPoll), func() {
		r.polling[sh] = false
		s.poll(r, sh)
	})
}

// end is the sequence, in shard sh, after its last record.
func (s *stream) end(sh int) int { return s.base[sh] + len(s.shards[sh]) }

// trim drops the records of shard sh that every reader has had, once
// there are trimAt of them.
func (s *stream) trim(sh int) {
	done := s.end(sh)
	for _, r := range s.readers {
		done = min(done, r.pos[sh])
	}
	if n := done - s.base[sh]; n >= trimAt {
		s.shards[sh] = append([]*streamRecord(nil), s.shards[sh][n:]...)
		s.base[sh] = done
	}
}

// poll hands r the next batch of shard sh, if any.
func (s *stream) poll(r *streamReader, sh int) {
	if r.busy[sh] || r.pos[sh] >= s.end(sh) {
		return
	}
	recs := s.shards[sh]
	from := r.pos[sh] - s.base[sh]
	batch := recs[from:min(len(recs), from+r.batch)]
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(batch))}
	for i, rec := range batch {
		ev.Records[i] = rec.event()
	}
	r.busy[sh] = true
	start := r.pos[sh]
	var resp events.DynamoDBEventResponse
	var err error
	s.w.log.add(s.w.now, r.name, "stream.batch", batch[0].seq+".."+batch[len(batch)-1].seq)
	s.w.spawn(r.name, r.timeout, func(ctx context.Context) {
		resp, err = r.handle(ctx, ev)
	}, func(killed bool) {
		r.busy[sh] = false
		switch {
		case killed || err != nil:
			// The whole batch again.
		case len(resp.BatchItemFailures) > 0:
			at := len(batch)
			for _, f := range resp.BatchItemFailures {
				for i, rec := range batch {
					if rec.seq == f.ItemIdentifier {
						at = min(at, i)
					}
				}
			}
			r.pos[sh] = start + at
		default:
			r.pos[sh] = start + len(batch)
		}
		s.trim(sh)
		if r.pos[sh] < s.end(sh) {
			s.wake(r, sh)
		}
	})
}

// event is the record as the event source mapping delivers it.
func (rec *streamRecord) event() events.DynamoDBEventRecord {
	if rec.ev != nil {
		return *rec.ev
	}
	ev, err := rec.rec.Event("us-east-1", "arn:aws:dynamodb:us-east-1:123456789012:table/sim-state/stream/2026-01-01T00:00:00.000")
	if err != nil {
		panic("simulation: a stream record: " + err.Error())
	}
	rec.ev = &ev
	return ev
}

// behind counts the records r has not yet had.
func (s *stream) behind(r *streamReader) int {
	n := 0
	for sh := range s.shards {
		n += s.end(sh) - r.pos[sh]
	}
	return n
}

// phase is what the deadline check reads of a state record, straight from
// its item: decoding every record of the stream whole would cost more than
// the rest of the check.
type phase struct {
	orderID             string
	state               string
	inFlight            bool
	attempt             int
	completeBy, updated time.Time
}

func phaseOf(it map[string]types.AttributeValue) phase {
	if it == nil {
		return phase{}
	}
	id, _ := it[statestore.KeyOrderID].(*types.AttributeValueMemberS)
	st, _ := it[statestore.ProcessStateAttr].(*types.AttributeValueMemberS)
	_, inFlight := it[statestore.InFlightShardAttr]
	p := phase{inFlight: inFlight, attempt: int(numberAttr(it, "Attempt")),
		completeBy: time.UnixMilli(numberAttr(it, statestore.CompleteByAttr)).UTC(),
		updated:    time.UnixMilli(numberAttr(it, "UpdatedAt")).UTC()}
	if id != nil {
		p.orderID = id.Value
	}
	if st != nil {
		p.state = st.Value
	}
	return p
}
