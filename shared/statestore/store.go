// Package statestore keeps orders and their state records in DynamoDB. Every
// write that changes a state record is a conditional UpdateItem whose failed
// condition maps to a domain error from package workflow; nothing is ever
// overwritten blindly.
package statestore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

// Client is the part of the DynamoDB API the store uses.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Store reads and writes orders and state records, and the code steps'
// ledger (ledger.go).
type Store struct {
	db     Client
	tables Tables
	clk    clock.Clock
	// serial: the reads of many partitions run one after the other, in the
	// caller's goroutine (WithSerialReads).
	serial bool
	sleep  func(ctx context.Context, d time.Duration) error
}

// Option changes a Store's defaults.
type Option func(*Store)

// WithClock makes the store read the time from c: its reads take an item
// past its ExpiresAt for gone (see expired). The default is the system's.
func WithClock(c clock.Clock) Option { return func(s *Store) { s.clk = c } }

// WithSerialReads makes the reads of many partitions (Expired's shards, a
// listing's shards, CountOpen's partitions) run one after the other in the
// caller's goroutine, instead of several at once on goroutines of their
// own: for a caller that orders every call itself (the deterministic
// simulation, internal/simulation). The answers are the same.
func WithSerialReads() Option { return func(s *Store) { s.serial = true } }

// WithSleep makes the store wait with sleep (the backoff before asking
// again for the keys BatchGetItem left unprocessed) instead of a timer:
// for a caller on a simulated clock. sleep returns early with ctx's error.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Store) { s.sleep = sleep }
}

// New returns a Store over the tables named: the orders and state tables
// for the actors, the ledger for a code step.
func New(db Client, tables Tables, opts ...Option) *Store {
	s := &Store{db: db, tables: tables, clk: clock.System{}, sleep: sleepTimer}
	for _, o := range opts {
		o(s)
	}
	return s
}

// expired reports whether an item whose TTL is at has come due. DynamoDB's
// TTL deletes an item some time after it expires (typically within days,
// not at once), so every read treats one past its ExpiresAt as already
// deleted: a GET answers 404, a listing leaves it out, an operator cannot
// act on it.
func (s *Store) expired(at time.Time) bool { return !at.IsZero() && !s.clk.Now().Before(at) }

// CreateOrder writes the order and its initial state record in one
// transaction: both or neither, and with them the key item of its
// Idempotency-Key, if it has one (see key.go). It returns
// workflow.ErrKeyUsed when the key made another order the store still
// remembers, and workflow.ErrExists when the order ID is taken.
func (s *Store) CreateOrder(ctx context.Context, o workflow.Order, st workflow.State) error {
	order, err := encodeOrder(o) // with its ByOwner keys (owner.go)
	if err != nil {
		return fmt.Errorf("encode order %s: %w", o.OrderID, err)
	}
	state, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("encode state %s: %w", o.OrderID, err)
	}
	if st.ProcessState.Listed() {
		state[ByStateKeyAttr] = str(ByStateKey(st.ProcessState, st.OrderID))
		state[ByStateSortAttr] = str(SortKey(st.UpdatedAt, st.OrderID))
	}
	notExists := aws.String("attribute_not_exists(" + KeyOrderID + ")")
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(s.tables.Orders), Item: order, ConditionExpression: notExists}},
		{Put: &types.Put{TableName: aws.String(s.tables.State), Item: state, ConditionExpression: notExists}},
	}
	if o.IdempotencyKey != "" {
		key, err := encodeKey(o)
		if err != nil {
			return fmt.Errorf("encode the key item of %s: %w", o.OrderID, err)
		}
		// A key past its ExpiresAt is forgotten, whether or not DynamoDB's
		// TTL has deleted its item yet: it is taken over.
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Orders), Item: key,
			ConditionExpression:       aws.String("attribute_not_exists(#id) OR #exp <= :now"),
			ExpressionAttributeNames:  map[string]string{"#id": KeyOrderID, "#exp": ExpiresAtAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": num64(s.clk.Now().Unix())},
		}})
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		// The reasons are in the order of the items.
		reasons := canceled.CancellationReasons
		if len(reasons) == 3 && aws.ToString(reasons[2].Code) == "ConditionalCheckFailed" {
			return fmt.Errorf("create order %s: %w", o.OrderID, workflow.ErrKeyUsed)
		}
		for _, r := range reasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return fmt.Errorf("create order %s: %w", o.OrderID, workflow.ErrExists)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create order %s: %w", o.OrderID, err)
	}
	return nil
}

// GetOrder reads an order.
func (s *Store) GetOrder(ctx context.Context, orderID string) (workflow.Order, error) {
	item, err := s.get(ctx, s.tables.Orders, orderID, true)
	if err != nil {
		return workflow.Order{}, err
	}
	o, err := decodeOrder(item)
	if err != nil {
		return workflow.Order{}, fmt.Errorf("decode order %s: %w", orderID, err)
	}
	if s.expired(o.ExpiresAt) {
		return workflow.Order{}, fmt.Errorf("get %s from %s: expired at %s: %w", orderID, s.tables.Orders, o.ExpiresAt.Format(time.RFC3339), workflow.ErrNotFound)
	}
	return o, nil
}

// GetState reads a state record with a strongly consistent read.
func (s *Store) GetState(ctx context.Context, orderID string) (workflow.State, error) {
	return s.state(ctx, orderID, true)
}

// PeekHead reads a state record's head eventually consistent
// (Port.PeekHead). It reads the whole item, which costs the same read
// units as a projection of it ("the size of the item" is what a read
// consumes, GetItem,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_GetItem.html),
// and decodes all but the steps.
func (s *Store) PeekHead(ctx context.Context, orderID string) (workflow.State, error) {
	return s.read(ctx, orderID, false, decodeHead)
}

func (s *Store) state(ctx context.Context, orderID string, consistent bool) (workflow.State, error) {
	return s.read(ctx, orderID, consistent, DecodeState)
}

func (s *Store) read(ctx context.Context, orderID string, consistent bool, decode func(map[string]types.AttributeValue) (workflow.State, error)) (workflow.State, error) {
	item, err := s.get(ctx, s.tables.State, orderID, consistent)
	if err != nil {
		return workflow.State{}, err
	}
	st, err := decode(item)
	if err != nil {
		return workflow.State{}, err
	}
	if s.expired(st.ExpiresAt) {
		return workflow.State{}, fmt.Errorf("get %s from %s: expired at %s: %w", orderID, s.tables.State, st.ExpiresAt.Format(time.RFC3339), workflow.ErrNotFound)
	}
	return st, nil
}

func (s *Store) get(ctx context.Context, table, orderID string, consistent bool) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{KeyOrderID: str(orderID)},
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s from %s: %w", orderID, table, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("get %s from %s: %w", orderID, table, workflow.ErrNotFound)
	}
	return out.Item, nil
}

// Apply carries out a change the workflow's Machine decided: its fence and
// its patch as one conditional UpdateItem. A failed fence is
// workflow.ErrStale, never an overwrite. It returns the record as written.
func (s *Store) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	// The record's step count is unknown without a read: a step past the
	// end is DynamoDB's to refuse (a path that does not exist).
	if err := c.Patch.CheckSteps(math.MaxInt); err != nil {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, err)
	}
	moves, err := c.Moves()
	if err != nil {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, err)
	}
	e := newExpr()
	fenceOf(e, c.Fence)
	patchOf(e, c.OrderID, c.Patch)
	if moves {
		listedOf(e, c.OrderID, c.Patch)
	}
	var st workflow.State
	if c.MovesOrder() {
		st, err = s.updateWithOrder(ctx, c.OrderID, e, c.Patch)
	} else {
		st, err = s.update(ctx, c.OrderID, e)
	}
	if err != nil {
		what := string(c.Transition)
		if what == "" {
			what = "change"
		}
		return workflow.State{}, fmt.Errorf("%s %s: %w", what, c.OrderID, err)
	}
	return st, nil
}

// fenceOf adds the fence's conditions. The record must exist whatever the
// fence says: an update of a missing key would create a partial record, and
// an empty fence must never become an unconditional write.
func fenceOf(e *expr, f workflow.Fence) {
	e.Present(KeyOrderID)
	if f.Workflow != "" {
		e.Is("Workflow", str(f.Workflow))
	}
	switch len(f.In) {
	case 0:
	case 1:
		e.Is(ProcessStateAttr, str(string(f.In[0])))
	default:
		states := make([]types.AttributeValue, len(f.In))
		for i, st := range f.In {
			states[i] = str(string(st))
		}
		e.OneOf(ProcessStateAttr, states...)
	}
	if f.Attempt != nil {
		e.Is("Attempt", num(*f.Attempt))
	}
	if f.StepIndex != nil {
		e.Is("StepIndex", num(*f.StepIndex))
	}
	if f.Unlocked {
		e.Absent("LockedBy")
	}
	if !f.LiveAt.IsZero() {
		e.After(CompleteByAttr, millis(f.LiveAt))
	}
	if !f.CompleteBy.IsZero() {
		e.Is(CompleteByAttr, millis(f.CompleteBy))
	}
	if f.AlertPending {
		e.Is("AlertPending", boolean(true))
	}
}

// patchOf adds the patch's writes; each field of workflow.Patch.Apply maps
// to one clause, so the conformance suite can hold the two together.
func patchOf(e *expr, orderID string, p workflow.Patch) {
	e.Set("UpdatedAt", millis(p.Now))
	if p.State != "" {
		e.Set(ProcessStateAttr, str(string(p.State)))
	}
	if p.MoveTo != nil {
		e.Set("StepIndex", num(p.MoveTo.Index)).Set("Step", str(p.MoveTo.Name))
	}
	if p.Unlock {
		e.Remove("LockedBy")
	}
	if p.Lock != "" {
		e.Set("LockedBy", str(p.Lock))
	}
	if !p.CompleteBy.IsZero() {
		e.Set(CompleteByAttr, millis(p.CompleteBy))
	}
	if p.NextAttempt {
		e.Add("Attempt", 1)
	}
	// A count back at zero, and a flag off, are removed rather than
	// written: a missing one reads as zero or false, and the bytes count
	// toward the 1 KB a write unit covers.
	switch {
	case p.FailureCount == nil:
	case *p.FailureCount == 0:
		e.Remove("FailureCount")
	default:
		e.Set("FailureCount", num(*p.FailureCount))
	}
	switch {
	case p.WaitRound == nil:
	case *p.WaitRound == 0:
		e.Remove("WaitRound")
	default:
		e.Set("WaitRound", num(*p.WaitRound))
	}
	if p.LastError != nil {
		e.Set("LastError", str(*p.LastError))
	}
	switch {
	case p.AlertPending == nil:
	case *p.AlertPending:
		e.Set("AlertPending", boolean(true))
	default:
		e.Remove("AlertPending")
	}
	if p.Notify {
		e.Add(eventSeqAttr, 1)
	}
	switch {
	case p.InFlight == nil:
	case *p.InFlight:
		e.Set(InFlightShardAttr, str(ShardOf(orderID)))
	default:
		e.Remove(InFlightShardAttr)
	}
	if p.Cancel {
		e.Set("Cancelled", boolean(true))
	}
	if p.Requeue {
		e.Add("Requeues", 1)
	}
	if p.Resubmit {
		e.Add("Resubmits", 1)
	}
	// Unexpire before ExpiresAt, as in Patch.Apply; the Machine never
	// sets both.
	switch {
	case !p.ExpiresAt.IsZero():
		e.Set(ExpiresAtAttr, num64(unixSeconds(p.ExpiresAt)))
	case p.Unexpire:
		e.Remove(ExpiresAtAttr)
	}
	switch {
	case !p.OpenUntil.IsZero():
		e.Set("OpenUntil", num64(unixMilli(p.OpenUntil)))
	case p.Seal:
		e.Remove("OpenUntil")
	}
	for _, sp := range p.Steps {
		stepPatchOf(e, stepPath(sp.Index), sp, p.Now)
	}
}

// listedOf moves the record's ByState entry with a change that moves it to
// another state: into a listed state it enters the index, keyed by the time
// it entered; into any other it leaves it (removing keys a record does not
// carry writes nothing to the index). A write that keeps the state leaves
// the keys alone, so its entry does not move and costs no index write.
func listedOf(e *expr, orderID string, p workflow.Patch) {
	if p.State.Listed() {
		e.Set(ByStateKeyAttr, str(ByStateKey(p.State, orderID))).Set(ByStateSortAttr, str(SortKey(p.Now, orderID)))
		return
	}
	e.Remove(ByStateKeyAttr).Remove(ByStateSortAttr)
}

func stepPatchOf(e *expr, path string, sp workflow.StepPatch, now time.Time) {
	set := func(attr string, ok bool, v types.AttributeValue) {
		if ok {
			e.Set(path+"."+attr, v)
		}
	}
	add := func(attr string, ok bool) {
		if ok {
			e.Add(path+"."+attr, 1)
		}
	}
	set("State", sp.State != "", str(string(sp.State)))
	add("Attempts", sp.Claimed)
	set("StartedAt", sp.Claimed, millis(now))
	add("Failures", sp.Failed)
	set("FinishedAt", sp.Finished, millis(now))
	set("Output", len(sp.Output) > 0, str(string(sp.Output)))
	if sp.Error != nil {
		e.Set(path+".Error", str(*sp.Error))
	}
	set("Compensation", sp.Compensation != "", str(string(sp.Compensation)))
	add("CompensationAttempts", sp.UndoClaimed)
	add("CompensationFailures", sp.UndoFailed)
	set("CompensatedAt", sp.Undone, millis(now))
	set("CompensationOutput", len(sp.UndoOutput) > 0, str(string(sp.UndoOutput)))
	if sp.UndoError != nil {
		e.Set(path+".CompensationError", str(*sp.UndoError))
	}
	flag := func(attr string, v *bool) {
		switch {
		case v == nil:
		case *v:
			e.Set(path+"."+attr, boolean(true))
		default:
			// Off is absent, as in stepItem.
			e.Remove(path + "." + attr)
		}
	}
	flag("Refused", sp.Refused)
	flag("UndoRefused", sp.UndoRefused)
	add("KeyRound", sp.Rekey)
	add("UndoKeyRound", sp.UndoRekey)
}

// stepPath is the path of a step's history entry.
func stepPath(i int) string { return "Steps[" + strconv.Itoa(i) + "]" }

// update runs a conditional UpdateItem and returns the record as written.
// A failed condition is workflow.ErrStale, unless the record already holds
// this very write: every write stamps a fresh WriteToken, and the failed
// condition returns the item as it is. The SDK retries a write whose answer
// was lost (a reset connection, a timeout) with the same request, and that
// retry fails its condition against the write itself; seeing its own token,
// the caller gets the record as written instead of a lost race, so a claim
// still dispatches, a commit still dispatches the next step, and an
// operator's retry or cancel still answers 202 and schedules its order.
func (s *Store) update(ctx context.Context, orderID string, e *expr) (workflow.State, error) {
	token := newWriteToken()
	e.Set(WriteTokenAttr, str(token))
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.State),
		Key:                                 map[string]types.AttributeValue{KeyOrderID: str(orderID)},
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 e.condition(),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if v, ok := failed.Item[WriteTokenAttr].(*types.AttributeValueMemberS); ok && v.Value == token {
			return DecodeState(failed.Item)
		}
		return workflow.State{}, workflow.ErrStale
	}
	if err != nil {
		return workflow.State{}, fmt.Errorf("update state %s: %w", orderID, err)
	}
	return DecodeState(out.Attributes)
}

// updateWithOrder is update for a change that also moves the TTL of the
// order's item in the orders table (workflow.Change.MovesOrder): the
// record's conditional update and the orders item's in one transaction, so
// the orders item never lives shorter than its record. Such changes are
// rare (a reopening, an alert confirmed, a change past the record's
// OpenUntil), which is why the transaction's double write units are
// acceptable here. An orders item that does not exist (deleted by hand,
// or by the TTL of an older release) has nothing to keep, and the record
// is written alone.
//
// A transaction returns no item, and a read after it may find a later
// writer's record (the Scheduler's claim right after an operator's retry),
// whose follow-up would then be taken for this one's. So the record is read
// first, strongly consistent, the transaction is also conditioned on that
// read's WriteToken, and the record as written is the read with the patch
// applied (workflow.Patch.Apply, which the conformance suite holds this
// store's expressions to). The read costs what the read after did. A write
// that lands between the read and the transaction fails only the token:
// the change is tried again on a fresh read, up to ownWriteTries times.
// The SDK's idempotency token makes a retry of a transaction whose answer
// was lost succeed again rather than fail its condition.
func (s *Store) updateWithOrder(ctx context.Context, orderID string, e *expr, p workflow.Patch) (workflow.State, error) {
	base := e.condition()
	for try := 1; ; try++ {
		item, err := s.get(ctx, s.tables.State, orderID, true)
		if errors.Is(err, workflow.ErrNotFound) {
			// The fence requires the record: nothing to write.
			return workflow.State{}, workflow.ErrStale
		}
		if err != nil {
			return workflow.State{}, fmt.Errorf("read state %s before its update with its order's TTL: %w", orderID, err)
		}
		before, err := DecodeState(item)
		if err != nil {
			return workflow.State{}, err
		}
		st, err := s.transactWithOrder(ctx, orderID, e, base, tokenOf(item), p, before)
		if errors.Is(err, errTokenMoved) {
			if try < ownWriteTries {
				continue
			}
			return workflow.State{}, fmt.Errorf("update state %s with its order's TTL: written by others %d times between a read and the write", orderID, try)
		}
		return st, err
	}
}

// ownWriteTries bounds updateWithOrder's reads and writes: each try lost
// means another actor wrote the record within a few milliseconds.
const ownWriteTries = 4

// errTokenMoved: the record was written between updateWithOrder's read and
// its transaction, which its fence may still admit.
var errTokenMoved = errors.New("the record was written since it was read")

func tokenOf(item map[string]types.AttributeValue) string {
	if v, ok := item[WriteTokenAttr].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// transactWithOrder is one try of updateWithOrder: e's update under the
// condition base and the record's WriteToken being prev, with the orders
// item's TTL.
func (s *Store) transactWithOrder(ctx context.Context, orderID string, e *expr, base *string, prev string, p workflow.Patch, before workflow.State) (workflow.State, error) {
	token := newWriteToken()
	e.Set(WriteTokenAttr, str(token))
	cond := "attribute_not_exists(#" + WriteTokenAttr + ")"
	delete(e.values, ":prevToken")
	if prev != "" {
		cond = "#" + WriteTokenAttr + " = :prevToken"
		e.values[":prevToken"] = str(prev)
	}
	if base != nil {
		cond = *base + " AND " + cond
	}
	order := &types.Update{
		TableName:                aws.String(s.tables.Orders),
		Key:                      map[string]types.AttributeValue{KeyOrderID: str(orderID)},
		ConditionExpression:      aws.String("attribute_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": KeyOrderID, "#exp": ExpiresAtAttr},
		UpdateExpression:         aws.String("REMOVE #exp"),
	}
	if !p.KeepOrder {
		order.UpdateExpression = aws.String("SET #exp = :exp")
		order.ExpressionAttributeValues = map[string]types.AttributeValue{":exp": num64(unixSeconds(p.OrderExpiresAt))}
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:                           aws.String(s.tables.State),
			Key:                                 map[string]types.AttributeValue{KeyOrderID: str(orderID)},
			UpdateExpression:                    aws.String(e.update()),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            e.names,
			ExpressionAttributeValues:           e.values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Update: order},
	}})
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) && len(canceled.CancellationReasons) == 2 {
		state, orders := canceled.CancellationReasons[0], canceled.CancellationReasons[1]
		switch {
		case aws.ToString(state.Code) == "ConditionalCheckFailed":
			switch now := tokenOf(state.Item); {
			case state.Item == nil:
				return workflow.State{}, workflow.ErrStale
			case now == token:
				// Its own write, whose answer was lost: nothing since.
				return DecodeState(state.Item)
			case now != prev:
				return workflow.State{}, errTokenMoved
			}
			return workflow.State{}, workflow.ErrStale
		case aws.ToString(orders.Code) == "ConditionalCheckFailed":
			delete(e.values, ":prevToken")
			return s.update(ctx, orderID, e)
		}
	}
	if err != nil {
		return workflow.State{}, fmt.Errorf("update state %s with its order's TTL: %w", orderID, err)
	}
	// Written on exactly the record read: as stored, that record patched.
	written, err := encodeState(p.Apply(before))
	if err != nil {
		return workflow.State{}, err
	}
	return DecodeState(written)
}

// sleepTimer waits d, or until ctx ends.
func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WriteTokenAttr holds the random token of the record's last write, so a
// writer whose answer was lost recognizes its own write (see update).
const WriteTokenAttr = "WriteToken"

// newWriteToken returns 64 random bits: a writer takes another's token for
// its own once in 2^64 tries, and the token is in every write's item size.
func newWriteToken() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("statestore: no randomness for a write token: %v", err))
	}
	// Unpadded base64: 11 bytes of the item, not hex's 16.
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Expired returns the records in the in-flight index whose CompleteBy is at
// or before now, at most limit per shard, whole. Each shard's entries (keys
// only) are read in parallel, then their records, eventually consistent: a
// record read stale only makes the Supervisor's conditional write fail, and
// a deadline read stale is seen at the next sweep. It reads every in-flight
// record once a sweep, and no record that left the index.
func (s *Store) Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
	shards := ShardNames()
	results := make([][]workflow.State, len(shards))
	errs := make([]error, len(shards))
	if s.serial {
		for i, shard := range shards {
			results[i], errs[i] = s.expiredInShard(ctx, shard, now, limit)
		}
	} else {
		sem := make(chan struct{}, expiredParallel)
		var wg sync.WaitGroup
		for i, shard := range shards {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				results[i], errs[i] = s.expiredInShard(ctx, shard, now, limit)
			})
		}
		wg.Wait()
	}
	// What was read goes back with what failed (Port.Expired).
	return slices.Concat(results...), errors.Join(errs...)
}

// expiredParallel bounds the shards read at once.
const expiredParallel = 16

func (s *Store) expiredInShard(ctx context.Context, shard string, now time.Time, limit int) ([]workflow.State, error) {
	ids, err := s.shardEntries(ctx, shard)
	if err != nil {
		return nil, err
	}
	var found []workflow.State
	var errs []error
	for chunk := range slices.Chunk(ids, MaxPage) {
		states, err := s.batchGetStates(ctx, chunk, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("read in-flight records of shard %s: %w", shard, err))
			continue
		}
		for _, id := range chunk {
			st, ok := states[id]
			if ok && st.InFlight && !st.CompleteBy.After(now) && !s.expired(st.ExpiresAt) {
				found = append(found, st)
			}
		}
	}
	slices.SortFunc(found, func(a, b workflow.State) int {
		return cmp.Or(a.CompleteBy.Compare(b.CompleteBy), cmp.Compare(a.OrderID, b.OrderID))
	})
	return found[:min(len(found), limit)], errors.Join(errs...)
}

// shardEntries lists the order IDs in one shard of the in-flight index.
func (s *Store) shardEntries(ctx context.Context, shard string) ([]string, error) {
	var (
		ids   []string
		start map[string]types.AttributeValue
	)
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.tables.State),
			IndexName:                 aws.String(InFlightIndex),
			KeyConditionExpression:    aws.String("#shard = :shard"),
			ExpressionAttributeNames:  map[string]string{"#shard": InFlightShardAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":shard": str(shard)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("query shard %s of %s: %w", shard, InFlightIndex, err)
		}
		for _, item := range out.Items {
			if v, ok := item[KeyOrderID].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return ids, nil
		}
	}
}
