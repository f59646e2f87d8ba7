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
	w       *World
	shards  [streamShards][]*streamRecord
	readers []*streamReader
}

// streamReader is one consumer's event source mapping.
type streamReader struct {
	name    string
	batch   int
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

// poll hands r the next batch of shard sh, if any.
func (s *stream) poll(r *streamReader, sh int) {
	recs := s.shards[sh]
	if r.busy[sh] || r.pos[sh] >= len(recs) {
		return
	}
	end := min(len(recs), r.pos[sh]+r.batch)
	batch := recs[r.pos[sh]:end]
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
		if r.pos[sh] < len(s.shards[sh]) {
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
		n += len(s.shards[sh]) - r.pos[sh]
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
