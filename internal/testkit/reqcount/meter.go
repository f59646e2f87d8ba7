package reqcount

import (
	"context"
	"maps"
	"reflect"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
)

// chunk is the payload size SQS and SNS bill as one request.
const chunk = 64 << 10

// Meter measures what AWS bills for a client's requests: the requests by
// service and operation, SQS and SNS requests in 64 KiB chunks, and the
// DynamoDB capacity units each request consumed, which it asks DynamoDB to
// report (ReturnConsumedCapacity INDEXES) on every call, so the code under
// measure stays as it is. The zero value is ready to use.
type Meter struct {
	// Table maps a table name to the name it is reported under (its role,
	// "orders" or "state"); nil reports table names as they are.
	Table func(name string) string

	mu  sync.Mutex
	all tally
	// tags are the requests made under a context WithTag marked, by tag.
	tags map[string]*tally
}

// tally is what the meter measured of some requests.
type tally struct {
	requests map[string]int
	billed   map[string]int
	entries  map[string]int
	wru, rru map[string]float64
	txnIndex map[string]float64
}

type tagKey struct{}

// WithTag marks the requests made under ctx as tag's: the meter counts them
// in its totals and apart under the tag too (SnapshotTags), so a caller
// can tell whose requests they were, e.g. one step's Agent invocations.
func WithTag(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, tagKey{}, tag)
}

// tallies are where a request under ctx counts: the totals and its tag's.
func (m *Meter) tallies(ctx context.Context) []*tally {
	out := []*tally{&m.all}
	if tag, _ := ctx.Value(tagKey{}).(string); tag != "" {
		if m.tags == nil {
			m.tags = map[string]*tally{}
		}
		if m.tags[tag] == nil {
			m.tags[tag] = &tally{}
		}
		out = append(out, m.tags[tag])
	}
	return out
}

// Add is an SDK APIOptions entry: append it to a client's Options.APIOptions.
func (m *Meter) Add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("reqcount-meter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			key := awsmiddleware.GetServiceID(ctx) + " " + awsmiddleware.GetOperationName(ctx)
			askCapacity(in.Parameters)
			m.count(ctx, key, payload(in.Parameters), batchEntries(in.Parameters))
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				op := awsmiddleware.GetOperationName(ctx)
				m.consumed(ctx, capacityOf(out.Result), reads[op], op == "TransactWriteItems")
			}
			return out, md, err
		}), middleware.Before)
}

func (m *Meter) count(ctx context.Context, key string, bytes, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tallies(ctx) {
		if t.requests == nil {
			t.requests, t.billed, t.entries = map[string]int{}, map[string]int{}, map[string]int{}
		}
		t.requests[key]++
		if bytes >= 0 {
			t.billed[key] += max(1, (bytes+chunk-1)/chunk)
		}
		if entries > 0 {
			t.entries[key] += entries
		}
	}
}

// batchEntries is how many messages a batch request carries; 0 for any
// other request.
func batchEntries(in any) int {
	switch v := in.(type) {
	case *sqs.SendMessageBatchInput:
		return len(v.Entries)
	case *sns.PublishBatchInput:
		return len(v.PublishBatchRequestEntries)
	}
	return 0
}

// reads are the DynamoDB operations that consume read units; every other
// one consumes write units.
var reads = map[string]bool{"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true, "TransactGetItems": true}

// consumed adds what one response reported. DynamoDB may report only the
// total CapacityUnits; read tells which kind they are.
// transactional tells which are a transaction's, whose index units are
// also kept apart (TransactionIndexWRU).
func (m *Meter) consumed(ctx context.Context, caps []ddbtypes.ConsumedCapacity, read, transactional bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tallies(ctx) {
		t.consumed(m.Table, caps, read, transactional)
	}
}

func (t *tally) consumed(rename func(string) string, caps []ddbtypes.ConsumedCapacity, read, transactional bool) {
	if t.wru == nil {
		t.wru, t.rru, t.txnIndex = map[string]float64{}, map[string]float64{}, map[string]float64{}
	}
	for _, c := range caps {
		table := aws.ToString(c.TableName)
		if rename != nil {
			table = rename(table)
		}
		add := func(name string, cap *ddbtypes.Capacity) {
			if cap == nil {
				return
			}
			units := aws.ToFloat64(cap.CapacityUnits)
			if read {
				t.rru[name] += units
			} else {
				t.wru[name] += units
			}
		}
		add(table, c.Table)
		for ix, cap := range c.GlobalSecondaryIndexes {
			add(table+"/"+ix, &cap)
			if transactional && !read {
				t.txnIndex[table+"/"+ix] += aws.ToFloat64(cap.CapacityUnits)
			}
		}
		for ix, cap := range c.LocalSecondaryIndexes {
			add(table+"/"+ix, &cap)
		}
	}
}

// Usage is what a Meter measured.
type Usage struct {
	// Requests by "Service Operation"; Billed, for SQS and SNS only, in
	// 64 KiB chunks of payload; Entries, for the batch sends only
	// (SendMessageBatch, PublishBatch), the messages they carried.
	Requests, Billed, Entries map[string]int
	// WRU and RRU by table, and by "table/index".
	WRU, RRU map[string]float64
	// TransactionIndexWRU are the index WRU (part of WRU) that
	// TransactWriteItems requests consumed, by "table/index".
	TransactionIndexWRU map[string]float64
}

// Snapshot returns what was measured so far.
func (m *Meter) Snapshot() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.all.usage()
}

// SnapshotTags returns what was measured so far of the requests made under
// each tag (WithTag), by tag.
func (m *Meter) SnapshotTags() map[string]Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Usage, len(m.tags))
	for tag, t := range m.tags {
		out[tag] = t.usage()
	}
	return out
}

func (t *tally) usage() Usage {
	u := Usage{Requests: maps.Clone(t.requests), Billed: maps.Clone(t.billed), Entries: maps.Clone(t.entries),
		WRU: maps.Clone(t.wru), RRU: maps.Clone(t.rru), TransactionIndexWRU: maps.Clone(t.txnIndex)}
	for k := range u.Billed {
		if !strings.HasPrefix(k, "SQS ") && !strings.HasPrefix(k, "SNS ") {
			delete(u.Billed, k)
		}
	}
	return u
}

// Reset forgets everything measured.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.all, m.tags = tally{}, nil
}

// askCapacity asks DynamoDB to report the capacity a request consumes,
// indexes included. Every DynamoDB input that can report capacity has the
// same ReturnConsumedCapacity field, but no interface names it.
func askCapacity(in any) {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	if f := v.Elem().FieldByName("ReturnConsumedCapacity"); f.IsValid() && f.CanSet() &&
		f.Type() == reflect.TypeOf(ddbtypes.ReturnConsumedCapacityIndexes) {
		f.Set(reflect.ValueOf(ddbtypes.ReturnConsumedCapacityIndexes))
	}
}

// capacityOf reads the consumed capacity of a DynamoDB response: one
// ConsumedCapacity for a single-item or query request, a list for batches
// and transactions.
func capacityOf(out any) []ddbtypes.ConsumedCapacity {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	switch c := v.Elem().FieldByName("ConsumedCapacity"); {
	case !c.IsValid():
		return nil
	case c.Type() == reflect.TypeOf(&ddbtypes.ConsumedCapacity{}):
		if c.IsNil() {
			return nil
		}
		return []ddbtypes.ConsumedCapacity{*c.Interface().(*ddbtypes.ConsumedCapacity)}
	case c.Type() == reflect.TypeOf([]ddbtypes.ConsumedCapacity(nil)):
		return c.Interface().([]ddbtypes.ConsumedCapacity)
	}
	return nil
}

// payload is the size SQS or SNS bills a request by: its bodies and
// message attributes; -1 for any other request.
func payload(in any) int {
	switch v := in.(type) {
	case *sqs.SendMessageInput:
		return len(aws.ToString(v.MessageBody)) + sqsAttrs(v.MessageAttributes)
	case *sqs.SendMessageBatchInput:
		n := 0
		for _, e := range v.Entries {
			n += len(aws.ToString(e.MessageBody)) + sqsAttrs(e.MessageAttributes)
		}
		return n
	case *sqs.ReceiveMessageInput, *sqs.DeleteMessageInput, *sqs.DeleteMessageBatchInput,
		*sqs.ChangeMessageVisibilityInput, *sqs.ChangeMessageVisibilityBatchInput:
		return 0
	case *sns.PublishInput:
		return len(aws.ToString(v.Message)) + len(aws.ToString(v.Subject)) + snsAttrs(v.MessageAttributes)
	case *sns.PublishBatchInput:
		n := 0
		for _, e := range v.PublishBatchRequestEntries {
			n += len(aws.ToString(e.Message)) + len(aws.ToString(e.Subject)) + snsAttrs(e.MessageAttributes)
		}
		return n
	}
	return -1
}

func sqsAttrs(a map[string]sqstypes.MessageAttributeValue) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

func snsAttrs(a map[string]snstypes.MessageAttributeValue) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}
