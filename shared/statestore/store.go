// Package statestore keeps orders and their state records in DynamoDB. Every
// write that changes a state record is a conditional UpdateItem whose failed
// condition maps to a domain error from package workflow; nothing is ever
// overwritten blindly.
package statestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// Client is the part of the DynamoDB API the store uses.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Store reads and writes orders and state records.
type Store struct {
	db     Client
	tables Tables
}

// New returns a Store over the two tables.
func New(db Client, tables Tables) *Store { return &Store{db: db, tables: tables} }

// CreateOrder writes the order and its initial state record in one
// transaction: both or neither. It returns workflow.ErrExists when the order
// ID is taken.
func (s *Store) CreateOrder(ctx context.Context, o workflow.Order, st workflow.State) error {
	order, err := encodeOrder(o) // with CreatedAtMs, the ByOwner index's sort key (owner.go)
	if err != nil {
		return fmt.Errorf("encode order %s: %w", o.OrderID, err)
	}
	state, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("encode state %s: %w", o.OrderID, err)
	}
	notExists := aws.String("attribute_not_exists(" + KeyOrderID + ")")
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(s.tables.Orders), Item: order, ConditionExpression: notExists}},
			{Put: &types.Put{TableName: aws.String(s.tables.State), Item: state, ConditionExpression: notExists}},
		},
	})
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		for _, r := range canceled.CancellationReasons {
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
	item, err := s.get(ctx, s.tables.Orders, orderID)
	if err != nil {
		return workflow.Order{}, err
	}
	var o workflow.Order
	if err := attributevalue.UnmarshalMap(item, &o); err != nil {
		return workflow.Order{}, fmt.Errorf("decode order %s: %w", orderID, err)
	}
	return o, nil
}

// GetState reads a state record with a strongly consistent read.
func (s *Store) GetState(ctx context.Context, orderID string) (workflow.State, error) {
	item, err := s.get(ctx, s.tables.State, orderID)
	if err != nil {
		return workflow.State{}, err
	}
	return DecodeState(item)
}

func (s *Store) get(ctx context.Context, table, orderID string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{KeyOrderID: str(orderID)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s from %s: %w", orderID, table, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("get %s from %s: %w", orderID, table, workflow.ErrNotFound)
	}
	return out.Item, nil
}

// Claim is a Scheduler's request to take a Pending step, or a
// CompensationPending step's compensation.
type Claim struct {
	OrderID   string
	StepIndex int
	// Compensate claims the step's compensation instead of the step.
	Compensate bool
	// Owner names the claiming invocation; it becomes LockedBy.
	Owner      string
	Now        time.Time
	CompleteBy time.Time
}

// Claim moves a Pending, unlocked record at the given step to Processing,
// locked by the caller, with a new CompleteBy and the next Attempt. It
// returns the record as written, or workflow.ErrClaimLost.
func (s *Store) Claim(ctx context.Context, c Claim) (workflow.State, error) {
	e := newExpr()
	want := workflow.Pending
	if c.Compensate {
		want = workflow.CompensationPending
	}
	e.Is("ProcessState", str(string(want))).Absent("LockedBy").Is("StepIndex", num(c.StepIndex))
	if c.Compensate {
		claimUndo(e, c.StepIndex, c.Owner, c.Now, c.CompleteBy)
	} else {
		claimStep(e, c.StepIndex, c.Owner, c.Now, c.CompleteBy)
	}
	st, err := s.update(ctx, c.OrderID, e)
	if errors.Is(err, workflow.ErrStale) {
		return workflow.State{}, fmt.Errorf("claim %s step %d: %w", c.OrderID, c.StepIndex, workflow.ErrClaimLost)
	}
	return st, err
}

func claimStep(e *expr, step int, owner string, now, completeBy time.Time) {
	sp := stepPath(step)
	e.Set("ProcessState", str(string(workflow.Processing))).
		Set("LockedBy", str(owner)).
		Set(CompleteByAttr, millis(completeBy)).
		Add("Attempt", 1).
		touch(now).
		Set(sp+".State", str(string(workflow.StepProcessing))).
		Add(sp+".Attempts", 1).
		Set(sp+".StartedAt", stamp(now))
}

// stepPath is the path of a step's history entry.
func stepPath(i int) string { return "Steps[" + strconv.Itoa(i) + "]" }

// touch stamps a write: UpdatedAt for people, ChangedAt for the ByState
// index's order.
func (e *expr) touch(now time.Time) *expr {
	return e.Set("UpdatedAt", stamp(now)).Set(ChangedAtAttr, millis(now))
}

// notify marks a write that changes what a client is told of the order
// (workflow.StatusOf, or the step it is at): the event publisher numbers its
// events by EventSeq, so every such write adds exactly one and no other
// write does.
func (e *expr) notify() *expr { return e.Add("EventSeq", 1) }

// fence adds the condition every commit of an Agent's outcome needs: the
// record is still Processing the same step under the same Attempt, and its
// CompleteBy has not passed.
func fence(e *expr, stepIndex, attempt int, now time.Time) {
	fenceIn(e, workflow.Processing, stepIndex, attempt, now)
}

func fenceIn(e *expr, state workflow.ProcessState, stepIndex, attempt int, now time.Time) {
	e.Is("ProcessState", str(string(state))).
		Is("Attempt", num(attempt)).
		Is("StepIndex", num(stepIndex)).
		After(CompleteByAttr, millis(now))
}

// Advance commits a successful step.
type Advance struct {
	OrderID   string
	StepIndex int
	Attempt   int
	Now       time.Time
	Output    json.RawMessage
	// Next, when set, claims the following step in the same write so the
	// Scheduler can dispatch it straight on; nil after the last step.
	Next *NextClaim
}

// NextClaim claims the step after the one committed.
type NextClaim struct {
	Step       string
	Owner      string
	CompleteBy time.Time
}

// Advance records the step's output and either claims the next step or marks
// the order Processed. It returns the record as written, or workflow.ErrStale
// when the reply is not for the record's current claim.
func (s *Store) Advance(ctx context.Context, a Advance) (workflow.State, error) {
	e := newExpr()
	fence(e, a.StepIndex, a.Attempt, a.Now)
	sp := stepPath(a.StepIndex)
	e.Set(sp+".State", str(string(workflow.StepSucceeded))).
		Set(sp+".FinishedAt", stamp(a.Now)).
		touch(a.Now).
		notify()
	if len(a.Output) > 0 {
		e.Set(sp+".Output", str(string(a.Output)))
	}
	if a.Next != nil {
		next := a.StepIndex + 1
		e.Set("StepIndex", num(next)).
			Set("Step", str(a.Next.Step)).
			Set("FailureCount", num(0))
		claimStep(e, next, a.Next.Owner, a.Now, a.Next.CompleteBy)
	} else {
		e.Set("ProcessState", str(string(workflow.Processed))).
			Remove("LockedBy").
			Remove(InFlightShardAttr)
	}
	st, err := s.update(ctx, a.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("advance %s step %d attempt %d: %w", a.OrderID, a.StepIndex, a.Attempt, err)
	}
	return st, nil
}

// Failure commits a permanent failure reported by an Agent.
type Failure struct {
	OrderID   string
	StepIndex int
	Attempt   int
	Now       time.Time
	Error     string
	// AlertBy is when the Supervisor publishes the alert if the Scheduler
	// has not confirmed it sent.
	AlertBy time.Time
	// Undo, when set, starts the compensation in the same write and claims
	// it, so the Scheduler dispatches it straight on; the order goes to
	// Compensating instead of Error and raises no alert.
	Undo *UndoClaim
}

// UndoClaim claims the compensation of a step.
type UndoClaim struct {
	StepIndex  int
	Step       string
	Owner      string
	CompleteBy time.Time
}

// Fail moves the order to Error with its alert pending, or into its
// compensation. It returns workflow.ErrStale when the reply is not for the
// current claim.
func (s *Store) Fail(ctx context.Context, f Failure) (workflow.State, error) {
	e := newExpr()
	fence(e, f.StepIndex, f.Attempt, f.Now)
	if f.Undo != nil {
		stopStep(e, f.StepIndex, workflow.StepFailed, f.Now, f.Error)
		startUndo(e, f.Undo.StepIndex, f.Undo.Step)
		claimUndo(e, f.Undo.StepIndex, f.Undo.Owner, f.Now, f.Undo.CompleteBy)
	} else {
		failStep(e, f.StepIndex, f.Now, f.Error)
		e.Set(CompleteByAttr, millis(f.AlertBy))
	}
	e.notify()
	st, err := s.update(ctx, f.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("fail %s step %d attempt %d: %w", f.OrderID, f.StepIndex, f.Attempt, err)
	}
	return st, nil
}

// stopStep ends the forward path at a step: its history entry says how, and
// the record keeps the reason as LastError.
func stopStep(e *expr, stepIndex int, state workflow.StepState, now time.Time, msg string) {
	sp := stepPath(stepIndex)
	e.Set("LastError", str(msg)).
		touch(now).
		Set(sp+".State", str(string(state))).
		Set(sp+".Error", str(msg)).
		Set(sp+".FinishedAt", stamp(now)).
		Remove("LockedBy")
}

// startUndo moves the record to the compensation of step i, unclaimed.
func startUndo(e *expr, i int, step string) {
	e.Set("ProcessState", str(string(workflow.CompensationPending))).
		Set("StepIndex", num(i)).
		Set("Step", str(step)).
		Set("FailureCount", num(0)).
		Set(stepPath(i)+".Compensation", str(string(workflow.StepPending)))
}

// failStep moves a record to Error and keeps it in the in-flight index with
// AlertPending, so an alert lost to a crash is still sent by the Supervisor.
func failStep(e *expr, stepIndex int, now time.Time, msg string) {
	stopStep(e, stepIndex, workflow.StepFailed, now, msg)
	e.Set("ProcessState", str(string(workflow.Error))).
		Set("AlertPending", boolean(true))
}

// AlertSent records that the alert of the given Attempt (of an order in
// Error or CompensationFailed) went out, which takes the record out of the
// in-flight index. ErrStale means another actor confirmed it first.
func (s *Store) AlertSent(ctx context.Context, orderID string, attempt int, now time.Time) error {
	e := newExpr()
	e.OneOf("ProcessState", str(string(workflow.Error)), str(string(workflow.CompensationFailed))).
		Is("AlertPending", boolean(true)).
		Is("Attempt", num(attempt))
	e.Set("AlertPending", boolean(false)).
		touch(now).
		Remove(InFlightShardAttr)
	_, err := s.update(ctx, orderID, e)
	if err != nil {
		return fmt.Errorf("alert sent %s attempt %d: %w", orderID, attempt, err)
	}
	return nil
}

// Recover applies a Recovery decision: the Supervisor's for a record it found
// expired, or the Scheduler's for a claim whose dispatch failed. The
// condition re-checks the state, Attempt and CompleteBy the caller saw, so of
// two Supervisors (or a Supervisor and a late Scheduler) exactly one write
// wins; the loser gets workflow.ErrStale.
func (s *Store) Recover(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
	e := newExpr()
	e.Is("ProcessState", str(string(seen.ProcessState))).
		Is("Attempt", num(seen.Attempt)).
		Is(CompleteByAttr, millis(seen.CompleteBy))
	sp := stepPath(seen.StepIndex)
	undoing := seen.ProcessState == workflow.Compensating
	msg := r.Reason
	if msg == "" {
		msg = workflow.TimeoutMessage(seen)
	}
	switch {
	case r.Kind == workflow.Retry && undoing:
		e.Set("ProcessState", str(string(workflow.CompensationPending))).
			Set("FailureCount", num(r.FailureCount)).
			Set("LastError", str(msg)).
			Set(sp+".Compensation", str(string(workflow.StepPending))).
			Add(sp+".CompensationFailures", 1).
			Remove("LockedBy")
	case r.Kind == workflow.Retry:
		e.Set("ProcessState", str(string(workflow.Pending))).
			Set("FailureCount", num(r.FailureCount)).
			Set("LastError", str(msg)).
			Set(sp+".State", str(string(workflow.StepPending))).
			Add(sp+".Failures", 1).
			Remove("LockedBy")
	case r.Kind == workflow.GiveUp && undoing:
		e.Set("ProcessState", str(string(workflow.CompensationFailed))).
			Set("AlertPending", boolean(true)).
			Set("FailureCount", num(r.FailureCount)).
			Set("LastError", str(msg)).
			Set(sp+".Compensation", str(string(workflow.StepFailed))).
			Set(sp+".CompensationError", str(msg)).
			Add(sp+".CompensationFailures", 1).
			Remove("LockedBy").
			notify()
	case r.Kind == workflow.GiveUp && r.UndoFrom >= 0:
		stopStep(e, seen.StepIndex, workflow.StepFailed, now, msg)
		e.Add(sp+".Failures", 1)
		startUndo(e, r.UndoFrom, r.UndoStep)
		e.notify()
	case r.Kind == workflow.GiveUp:
		failStep(e, seen.StepIndex, now, msg)
		e.Set("FailureCount", num(r.FailureCount)).Add(sp+".Failures", 1).notify()
	case r.Kind == workflow.Requeue:
		e.Add("Requeues", 1)
	case r.Kind == workflow.ResendAlert:
		e.Is("AlertPending", boolean(true))
	default:
		return workflow.State{}, fmt.Errorf("recover %s: nothing to write for %q", seen.OrderID, r.Kind)
	}
	e.Set(CompleteByAttr, millis(r.CompleteBy)).touch(now)
	st, err := s.update(ctx, seen.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("recover %s (%s): %w", seen.OrderID, r.Kind, err)
	}
	return st, nil
}

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

// WriteTokenAttr holds the random token of the record's last write, so a
// writer whose answer was lost recognizes its own write (see update).
const WriteTokenAttr = "WriteToken"

// newWriteToken returns 128 random bits: no two writes share one.
func newWriteToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("statestore: no randomness for a write token: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// Expired returns the records in the in-flight index whose CompleteBy is at
// or before now, querying every shard in parallel. At most limit records are
// read per shard per call; the Supervisor's next run picks up the rest. The
// records carry only the projected attributes (no Input, no step history).
func (s *Store) Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
	shards := ShardNames()
	results := make([][]workflow.State, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, shard := range shards {
		wg.Go(func() { results[i], errs[i] = s.expiredInShard(ctx, shard, now, limit) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []workflow.State
	for _, r := range results {
		all = append(all, r...)
	}
	return all, nil
}

func (s *Store) expiredInShard(ctx context.Context, shard string, now time.Time, limit int) ([]workflow.State, error) {
	var (
		found []workflow.State
		start map[string]types.AttributeValue
	)
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                aws.String(s.tables.State),
			IndexName:                aws.String(InFlightIndex),
			KeyConditionExpression:   aws.String("#shard = :shard AND #cb <= :now"),
			ExpressionAttributeNames: map[string]string{"#shard": InFlightShardAttr, "#cb": CompleteByAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":shard": str(shard), ":now": millis(now),
			},
			Limit:             aws.Int32(int32(limit - len(found))),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, fmt.Errorf("query shard %s of %s: %w", shard, InFlightIndex, err)
		}
		for _, item := range out.Items {
			st, err := DecodeState(item)
			if err != nil {
				return nil, err
			}
			found = append(found, st)
		}
		start = out.LastEvaluatedKey
		if len(start) == 0 || len(found) >= limit {
			return found, nil
		}
	}
}
