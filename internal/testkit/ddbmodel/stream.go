package ddbmodel

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Record is a stream record of a table with a stream: one per write that
// changed an item, "exactly once in the stream", and "for each item that
// is modified in a DynamoDB table, the stream records appear in the same
// sequence as the actual modifications to the item" ("Change data capture
// for DynamoDB Streams",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html).
// Its images are the table's StreamViewType of the item before and after.
type Record struct {
	Table string
	// Seq numbers the table's records in the order of its writes.
	Seq uint64
	// EventName is INSERT, MODIFY or REMOVE.
	EventName events.DynamoDBOperationType
	Keys      map[string]types.AttributeValue
	OldImage  map[string]types.AttributeValue
	NewImage  map[string]types.AttributeValue
	View      types.StreamViewType
	At        time.Time
	// ByTTL: TTL's background pass deleted the item; the record then
	// names the service as its user ("Items that are deleted by the Time
	// to Live process after expiration have the following fields:
	// Records[].userIdentity.type "Service",
	// Records[].userIdentity.principalId "dynamodb.amazonaws.com"",
	// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_Record.html).
	ByTTL bool
	// sizeBytes is SizeBytes: the sizes of its keys and images.
	sizeBytes int
}

func newRecord(t *table, key string, before, after version, at time.Time, byTTL bool) *Record {
	old, next := before.item, after.item
	r := &Record{Table: t.name, Seq: t.seq, View: t.stream, At: at, ByTTL: byTTL,
		Keys: map[string]types.AttributeValue{t.hash: &types.AttributeValueMemberS{Value: key}}}
	switch {
	case old == nil:
		r.EventName = events.DynamoDBOperationTypeInsert
	case next == nil:
		r.EventName = events.DynamoDBOperationTypeRemove
	default:
		r.EventName = events.DynamoDBOperationTypeModify
	}
	r.sizeBytes = ItemSize(r.Keys)
	if t.stream == types.StreamViewTypeNewImage || t.stream == types.StreamViewTypeNewAndOldImages {
		r.NewImage = next
		r.sizeBytes += after.size
	}
	if t.stream == types.StreamViewTypeOldImage || t.stream == types.StreamViewTypeNewAndOldImages {
		r.OldImage = old
		r.sizeBytes += before.size
	}
	return r
}

// SequenceNumber is the record's sequence number as the stream writes it:
// digits, at least 21 of them (StreamRecord,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_StreamRecord.html),
// in the order of the table's writes.
func (r *Record) SequenceNumber() string { return fmt.Sprintf("%021d", r.Seq) }

// Event is the record as Lambda's event source mapping hands it to a
// function, from the stream sourceARN.
func (r *Record) Event(region, sourceARN string) (events.DynamoDBEventRecord, error) {
	keys, err := Image(r.Keys)
	if err != nil {
		return events.DynamoDBEventRecord{}, err
	}
	ev := events.DynamoDBEventRecord{
		EventID: r.SequenceNumber(), EventName: string(r.EventName), EventSource: "aws:dynamodb", EventVersion: "1.1",
		AWSRegion: region, EventSourceArn: sourceARN,
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: r.At.Truncate(time.Second)},
			Keys:                        keys, SequenceNumber: r.SequenceNumber(), StreamViewType: string(r.View),
			SizeBytes: int64(r.sizeBytes),
		},
	}
	if ev.Change.NewImage, err = Image(r.NewImage); err != nil {
		return events.DynamoDBEventRecord{}, err
	}
	if ev.Change.OldImage, err = Image(r.OldImage); err != nil {
		return events.DynamoDBEventRecord{}, err
	}
	if r.ByTTL {
		ev.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	}
	return ev, nil
}

// Image is an item as a stream record carries it in Lambda's event; nil
// stays nil.
func Image(it map[string]types.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if it == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(it))
	for k, v := range it {
		e, err := eventValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = e
	}
	return out, nil
}

func eventValue(av types.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), nil
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value), nil
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value), nil
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value), nil
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value), nil
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			var err error
			if l[i], err = eventValue(e); err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("list element %d: %w", i, err)
			}
		}
		return events.NewListAttribute(l), nil
	case *types.AttributeValueMemberM:
		m, err := Image(v.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		if m == nil {
			m = map[string]events.DynamoDBAttributeValue{}
		}
		return events.NewMapAttribute(m), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("unsupported attribute value %T", av)
}

// ttlOf reads an item's TTL attribute: Unix seconds, a number ("TTL
// compares the current time in epoch time format to the time stored in
// the TTL attribute of an item", UpdateTimeToLive,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html).
// An attribute of another type is no TTL.
func ttlOf(it item, attr string) (int64, bool) {
	n, ok := it[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	s, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.Value, 64)
		if ferr != nil {
			return 0, false
		}
		s = int64(f)
	}
	return s, true
}

func sameTTL(a, b item, attr string) bool {
	x, okA := ttlOf(a, attr)
	y, okB := ttlOf(b, attr)
	return okA == okB && x == y
}

// ttlDue is when TTL's pass deletes an item, if its TTL is still expiry
// then.
type ttlDue struct {
	at     time.Time
	seq    uint64
	table  string
	key    string
	expiry int64
}

// ttlQueue orders the deletions due, by time and then by when they were
// queued.
type ttlQueue struct {
	due []ttlDue
	seq uint64
}

func (q *ttlQueue) Len() int { return len(q.due) }
func (q *ttlQueue) Less(i, j int) bool {
	if !q.due[i].at.Equal(q.due[j].at) {
		return q.due[i].at.Before(q.due[j].at)
	}
	return q.due[i].seq < q.due[j].seq
}
func (q *ttlQueue) Swap(i, j int) { q.due[i], q.due[j] = q.due[j], q.due[i] }
func (q *ttlQueue) Push(x any)    { q.due = append(q.due, x.(ttlDue)) }
func (q *ttlQueue) Pop() any {
	d := q.due[len(q.due)-1]
	q.due = q.due[:len(q.due)-1]
	return d
}

func (q *ttlQueue) push(d ttlDue) {
	q.seq++
	d.seq = q.seq
	heap.Push(q, d)
}

// RunTTL is TTL's background pass at the model's time: it deletes every
// item whose TTL attribute's time is TTLDelay past, with a REMOVE record
// in its table's stream, and returns how many it deleted. The deletions
// bypass the Call hook: DynamoDB makes them, not a client. Items "that
// have expired and not been deleted will still show up in reads, queries,
// and scans" until then (UpdateTimeToLive,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html).
func (m *Model) RunTTL() int {
	n := 0
	_ = m.do(context.Background(), func(ws *[]Write) error {
		now := m.now()
		for m.ttl.Len() > 0 && !m.ttl.due[0].at.After(now) {
			d := heap.Pop(&m.ttl).(ttlDue)
			t := m.tables[d.table]
			if t == nil || t.ttl == "" {
				continue
			}
			it := t.latest(d.key)
			if exp, ok := ttlOf(it, t.ttl); it == nil || !ok || exp != d.expiry {
				continue
			}
			m.write(t, d.key, nil, 0, now, true, ws)
			n++
		}
		return nil
	})
	return n
}
