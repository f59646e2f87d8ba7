// Package ddbmodel is a model of the part of the DynamoDB API that
// shared/statestore uses, in memory: GetItem, UpdateItem, DeleteItem,
// TransactWriteItems, Query and BatchGetItem (statestore.Client), and
// CreateTable and UpdateTimeToLive (statestore.TableCreator), with AWS's
// semantics for what the store relies on. The simulation
// (internal/simulation) runs the real store, statestore.Store, on it, so
// the store's condition expressions, its recovery of a write whose answer
// was lost, its transactions' cancellation reasons, its index queries and
// its retries of unprocessed keys run there as they run on AWS.
//
// What it models, each from AWS's documentation (cited where it is
// implemented):
//   - condition and update expressions, the subset expr.go reads, with
//     placeholders checked as DynamoDB checks them (every one defined,
//     every one used);
//   - conditional writes, and ReturnValuesOnConditionCheckFailure;
//   - TransactWriteItems: all or nothing, CancellationReasons per action,
//     and ClientRequestToken idempotent for 10 minutes (the SDK fills one
//     in when the caller does not);
//   - the 400 KB item limit;
//   - read consistency: an eventually consistent read (GetItem, Query,
//     BatchGetItem without ConsistentRead) may return an item as it was
//     before writes less than Lag old, absent if it was created since;
//     a strongly consistent read returns the latest;
//   - global secondary indexes as eventually consistent projections of
//     the table: sparse (an item without the index's keys is not in it),
//     KEYS_ONLY, ALL or INCLUDE, queried with pagination
//     (LastEvaluatedKey, 1 MB);
//   - BatchGetItem's UnprocessedKeys (a hook decides which), 100 keys and
//     16 MB;
//   - TTL: a background pass deletes an item TTLDelay after its TTL
//     attribute's time, with a REMOVE stream record;
//   - streams: a record of every write (INSERT, MODIFY, REMOVE) with the
//     table's view of the images, in the order of the writes to each item.
//
// What it does not model: provisioned capacity and throttling (the
// caller's Call hook injects those), transaction conflicts between
// concurrent transactions (each call here is atomic), reserved words,
// number precision past int64 and 38 significant digits' exact rounding,
// tables with a sort key or non-string keys, local secondary indexes,
// Scan, PutItem, BatchWriteItem and TransactGetItems.
//
// It is deterministic: it starts no goroutine, reads the time from its
// clock only, iterates no map where the order could show, and makes every
// choice (a stale read, an unprocessed key) through a hook the caller
// seeds. It is safe for concurrent use. It is a test kit: nothing ships
// it.
package ddbmodel

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
)

// Options configures a Model. The zero value of each field is a working
// default.
type Options struct {
	// Clock is the service's time: when writes happen, how old they are,
	// when a TTL has passed. Default: the system's.
	Clock clock.Clock
	// Lag is how far behind the latest write an eventually consistent read
	// (and an index) may be. Default DefaultLag.
	Lag time.Duration
	// Stale picks, for an eventually consistent read of an item that has
	// n > 1 versions within Lag, which one it returns: 0 the latest, n-1
	// the oldest. nil: always the latest, as DynamoDB Local answers. It
	// must not call the model.
	Stale func(n int) int
	// Unprocessed reports whether BatchGetItem leaves the key of table
	// unprocessed (as DynamoDB does when throttled). nil: never. It must
	// not call the model.
	Unprocessed func(table, key string) bool
	// TTLDelay is how long after its TTL attribute's time the background
	// pass (RunTTL) deletes an item. Default DefaultTTLDelay.
	TTLDelay time.Duration
	// Call runs every API call: c.Attempt once is the call; more than once
	// is the SDK sending it again (a retry after a lost answer). nil runs
	// each call once.
	Call func(ctx context.Context, c Call) error
	// OnWrite sees every item write, in order, with the context of the
	// call that made it (context.Background for TTL's deletions), after the
	// tables hold it. It may call the model.
	OnWrite func(ctx context.Context, w Write)
	// Tokens makes the ClientRequestToken the SDK fills in for a
	// TransactWriteItems that names none. Default: a counter.
	Tokens func() string
}

// DefaultLag is how old a write an eventually consistent read may miss:
// a second, as writes "propagate to a GSI within 1 second" ("Why aren't my
// Amazon DynamoDB table items showing up in my global secondary index?",
// https://repost.aws/knowledge-center/dynamodb-missing-table-items-gsi)
// and table replicas converge "usually within a second" for reads too.
const DefaultLag = time.Second

// DefaultTTLDelay is when TTL deletes an expired item: "DynamoDB
// typically deletes expired items within two days of expiration"
// (UpdateTimeToLive,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html).
const DefaultTTLDelay = 48 * time.Hour

// Call is one API call, as the SDK makes it.
type Call struct {
	// Op is the API operation ("UpdateItem").
	Op string
	// Table is the table the request names first, and Key the key of the
	// item it names first ("" when it names none, as a Query).
	Table, Key string
	// Write: the call may change the tables.
	Write bool
	// Attempt sends the request once and takes its answer: the tables as
	// they are now decide it. Sending it again is the SDK's retry.
	Attempt func() error
}

// Write is one item's change.
type Write struct {
	Table string
	// Key is the item's partition key value.
	Key string
	// Old and New are the item before and after; nil when absent. Neither
	// may be changed.
	Old, New map[string]types.AttributeValue
	At       time.Time
	// ByTTL: TTL's background pass deleted the item.
	ByTTL bool
	// Record is the stream record of the write, for a table with a stream
	// (nil for one without, or a write that left the item as it was).
	Record *Record
}

// Model is the DynamoDB API in memory.
type Model struct {
	o Options

	mu     sync.Mutex
	tables map[string]*table
	cache  map[exprKey]*parsed
	// tokens are the transactions of the last 10 minutes by their
	// ClientRequestToken, oldest first in tokenOrder.
	tokens     map[string]txnToken
	tokenOrder []string
	newTokens  int
	ttl        ttlQueue
}

var (
	_ statestore.Client       = (*Model)(nil)
	_ statestore.TableCreator = (*Model)(nil)
)

// New returns a Model without tables.
func New(o Options) *Model {
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Lag <= 0 {
		o.Lag = DefaultLag
	}
	if o.TTLDelay <= 0 {
		o.TTLDelay = DefaultTTLDelay
	}
	return &Model{o: o, tables: map[string]*table{}, cache: map[exprKey]*parsed{}, tokens: map[string]txnToken{}}
}

// table is one table: its schema and its items by partition key.
type table struct {
	name   string
	hash   string
	gsis   []*gsi
	stream types.StreamViewType
	ttl    string
	seq    uint64
	items  map[string]*entry
}

// entry is an item's history: its versions within the lag, and the latest,
// oldest first. An absent item is a version with a nil item; an item
// created within the lag has the absent one before it.
type entry struct {
	versions []version
}

type version struct {
	at   time.Time
	item item
	// size is ItemSize(item), counted once at the write: the reads, pages
	// and stream records that size it are many more.
	size int
}

func (e *entry) latest() item { return e.versions[len(e.versions)-1].item }

func (m *Model) now() time.Time { return m.o.Clock.Now() }

// latest is the item of key as it is now; nil when absent.
func (t *table) latest(key string) item {
	if e := t.items[key]; e != nil {
		return e.latest()
	}
	return nil
}

// candidates prunes e's versions to those an eventually consistent read
// may still return at now (the latest, and each one whose successor was
// written less than lag ago) and returns how many there are.
func candidates(e *entry, now time.Time, lag time.Duration) int {
	n := 1
	for i := len(e.versions) - 1; i > 0 && e.versions[i].at.After(now.Add(-lag)); i-- {
		n++
	}
	if drop := len(e.versions) - n; drop > 0 {
		e.versions = append(e.versions[:0], e.versions[drop:]...)
	}
	return n
}

// read is the item of key as a read sees it: the latest when consistent,
// otherwise the version Stale picks among those within the lag.
func (m *Model) read(t *table, key string, consistent bool) item {
	return m.readVersion(t, key, consistent).item
}

// readVersion is read's version, with the item's size.
func (m *Model) readVersion(t *table, key string, consistent bool) version {
	e := t.items[key]
	if e == nil {
		return version{}
	}
	n := candidates(e, m.now(), m.o.Lag)
	if consistent || n == 1 || m.o.Stale == nil {
		return e.versions[len(e.versions)-1]
	}
	k := min(max(m.o.Stale(n), 0), n-1)
	return e.versions[len(e.versions)-1-k]
}

// write makes it (nil: absent), of size bytes (checkItem's count), the
// item of key at at, keeps the indexes, TTL's queue and the stream, and
// adds the write to ws.
func (m *Model) write(t *table, key string, it item, size int, at time.Time, byTTL bool, ws *[]Write) {
	e := t.items[key]
	if e == nil {
		// Absent since ever: a read within the lag of its creation may
		// still find it so.
		e = &entry{versions: []version{{}}}
		t.items[key] = e
	}
	before := e.versions[len(e.versions)-1]
	old := before.item
	candidates(e, at, m.o.Lag)
	e.versions = append(e.versions, version{at: at, item: it, size: size})
	for _, g := range t.gsis {
		g.wrote(key, it)
	}
	if t.ttl != "" && it != nil {
		if exp, ok := ttlOf(it, t.ttl); ok && (old == nil || !sameTTL(old, it, t.ttl)) {
			m.ttl.push(ttlDue{at: time.Unix(exp, 0).Add(m.o.TTLDelay), table: t.name, key: key, expiry: exp})
		}
	}
	w := Write{Table: t.name, Key: key, Old: old, New: it, At: at, ByTTL: byTTL}
	if t.stream != "" && !(old == nil && it == nil) && (old == nil || it == nil || !sameItem(old, it)) {
		t.seq++
		w.Record = newRecord(t, key, before, version{item: it, size: size}, at, byTTL)
	}
	*ws = append(*ws, w)
}

// tableOf finds a table by name.
func (m *Model) tableOf(name *string) (*table, error) {
	t, ok := m.tables[aws.ToString(name)]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Table: " + aws.ToString(name) + " not found")}
	}
	return t, nil
}

// keyOf reads a request's key of t: exactly its partition key, a
// non-empty string.
func (t *table) keyOf(key map[string]types.AttributeValue) (string, item, error) {
	v, ok := key[t.hash].(*types.AttributeValueMemberS)
	if !ok || len(key) != 1 {
		return "", nil, validation("The provided key element does not match the schema")
	}
	if v.Value == "" {
		return "", nil, validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", t.hash)
	}
	return v.Value, item{t.hash: v}, nil
}

// checkItem refuses an item t cannot hold: over the size limit, or with an
// index key of the wrong type or empty; it returns the item's size.
func (t *table) checkItem(it item) (int, error) {
	if it == nil {
		return 0, nil
	}
	n := ItemSize(it)
	if n > MaxItemBytes {
		return n, validation("Item size has exceeded the maximum allowed size")
	}
	for _, g := range t.gsis {
		for _, a := range []string{g.hash, g.sort} {
			if a == "" {
				continue
			}
			v, ok := it[a]
			if !ok {
				continue
			}
			s, isS := v.(*types.AttributeValueMemberS)
			if !isS {
				return n, validation("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: S Actual: %T IndexName: %s", a, v, g.name)
			}
			if s.Value == "" {
				return n, validation("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: %s, IndexKey: %s", g.name, a)
			}
		}
	}
	return n, nil
}

// copyItem is an item as an answer carries it: a map of its own, so the
// caller may add to it; the values are shared and must not be changed.
func copyItem(it item) map[string]types.AttributeValue {
	if it == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(it))
	for k, v := range it {
		out[k] = v
	}
	return out
}

// exprKey caches a parsed expression by its text.
type exprKey struct {
	kind exprKind
	text string
}

// maxCached bounds the cache: the store's expressions come in a few
// thousand shapes.
const maxCached = 1 << 16

// expr reads an expression, from the cache when it was read before.
func (m *Model) expr(kind exprKind, text string) (*parsed, error) {
	k := exprKey{kind, text}
	if p, ok := m.cache[k]; ok {
		return p, nil
	}
	p, err := parse(kind, text)
	if err != nil {
		what := [...]string{"ConditionExpression", "UpdateExpression", "ProjectionExpression"}[kind]
		return nil, validation("Invalid %s: %v; expression: %q", what, err, text)
	}
	if len(m.cache) >= maxCached {
		clear(m.cache)
	}
	m.cache[k] = p
	return p, nil
}

// exprs reads a request's expressions (an empty text is none) and checks
// its placeholders against them, as DynamoDB does: every placeholder an
// expression uses is defined, and every one defined is used.
func (m *Model) exprs(names map[string]string, values map[string]types.AttributeValue, texts ...exprText) ([]*parsed, error) {
	out := make([]*parsed, len(texts))
	var usedNames, usedValues []string
	any := false
	for i, t := range texts {
		if t.text == "" {
			continue
		}
		any = true
		p, err := m.expr(t.kind, t.text)
		if err != nil {
			return nil, err
		}
		out[i] = p
		for _, n := range p.names {
			if _, ok := names[n]; !ok {
				return nil, validation("Value provided in ExpressionAttributeNames unused in expressions or not defined: An expression attribute name used in the document path is not defined; attribute name: %s", n)
			}
			if !contains(usedNames, n) {
				usedNames = append(usedNames, n)
			}
		}
		for _, v := range p.values {
			av, ok := values[v]
			if !ok {
				return nil, validation("An expression attribute value used in expression is not defined; attribute value: %s", v)
			}
			if err := checkValue(av); err != nil {
				return nil, err
			}
			if !contains(usedValues, v) {
				usedValues = append(usedValues, v)
			}
		}
	}
	if !any && (len(names) > 0 || len(values) > 0) {
		return nil, validation("ExpressionAttributeNames and ExpressionAttributeValues can only be specified when using expressions")
	}
	if len(usedNames) != len(names) {
		return nil, validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", unused(names, usedNames))
	}
	if len(usedValues) != len(values) {
		return nil, validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", unused(values, usedValues))
	}
	return out, nil
}

type exprText struct {
	kind exprKind
	text string
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// unused lists, sorted, the keys of m not in used.
func unused[V any](m map[string]V, used []string) string {
	var out []string
	for k := range m {
		if !contains(used, k) {
			out = append(out, k)
		}
	}
	return joinSorted(out)
}

// checkValue refuses a value DynamoDB does not accept: none, or an empty
// set.
func checkValue(v types.AttributeValue) error {
	switch x := v.(type) {
	case nil:
		return validation("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	case *types.AttributeValueMemberSS:
		if len(x.Value) == 0 {
			return validation("One or more parameter values were invalid: An string set  may not be empty")
		}
	case *types.AttributeValueMemberNS:
		if len(x.Value) == 0 {
			return validation("One or more parameter values were invalid: An number set  may not be empty")
		}
	case *types.AttributeValueMemberBS:
		if len(x.Value) == 0 {
			return validation("One or more parameter values were invalid: Binary sets should not be empty")
		}
	case *types.AttributeValueMemberL:
		for _, e := range x.Value {
			if err := checkValue(e); err != nil {
				return err
			}
		}
	case *types.AttributeValueMemberM:
		for _, e := range x.Value {
			if err := checkValue(e); err != nil {
				return err
			}
		}
	case *types.UnknownUnionMember:
		return validation("Supplied AttributeValue has an unknown type %q", x.Tag)
	}
	return nil
}

// validation is DynamoDB's ValidationException: the request is wrong,
// and a retry fails alike.
func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

// apiError wraps an error of operation op as the SDK does, so that
// errors.As finds the service's error type in it.
func apiError(op string, err error) error {
	if err == nil {
		return nil
	}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}

// keyText is the partition key value of a request's key (or item) of
// table, for Call.Key: "" when the table or the value is not there.
func (m *Model) keyText(table *string, key map[string]types.AttributeValue) string {
	m.mu.Lock()
	t := m.tables[aws.ToString(table)]
	m.mu.Unlock()
	if t == nil {
		return ""
	}
	if s, ok := key[t.hash].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// newToken is the ClientRequestToken the SDK makes for a transaction that
// names none.
func (m *Model) newToken() string {
	if m.o.Tokens != nil {
		return m.o.Tokens()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.newTokens++
	return "ddbmodel-token-" + strconv.Itoa(m.newTokens)
}

// do runs one attempt of a call under the lock, then hands its writes to
// OnWrite, in order, with the lock released.
func (m *Model) do(ctx context.Context, attempt func(ws *[]Write) error) error {
	var ws []Write
	m.mu.Lock()
	err := attempt(&ws)
	m.mu.Unlock()
	if m.o.OnWrite != nil {
		for _, w := range ws {
			m.o.OnWrite(ctx, w)
		}
	}
	return err
}

// call runs c through the Call hook.
func (m *Model) call(ctx context.Context, c Call) error {
	if m.o.Call == nil {
		return c.Attempt()
	}
	return m.o.Call(ctx, c)
}

// joinSorted joins s, sorted, with ", ".
func joinSorted(s []string) string {
	slices.Sort(s)
	return strings.Join(s, ", ")
}
