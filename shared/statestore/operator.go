package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Cancel stops an order that is still going forward, or closes one in Error.
// The write is conditional on the state and Attempt seen, and takes a new
// Attempt, so the reply of an Agent still working on the step is refused as
// stale. stop is the workflow's decision (Definition.StopAt with StopCancel):
// the compensation of stop.UndoFrom waits for a claim until claimBy, or the
// order is Cancelled outright. An order in Error keeps its failed step's
// history and its LastError; its alert is no longer owed, since an operator
// acted. ErrStale means the record moved on meanwhile.
func (s *Store) Cancel(ctx context.Context, seen workflow.State, stop workflow.Stop, now, claimBy time.Time) (workflow.State, error) {
	if !workflow.CanCancel(seen) {
		return workflow.State{}, fmt.Errorf("cancel %s: %w", seen.OrderID, workflow.ErrNotCancellable)
	}
	e := newExpr()
	e.Is("ProcessState", str(string(seen.ProcessState))).Is("Attempt", num(seen.Attempt))
	if seen.ProcessState == workflow.Error {
		e.Set("AlertPending", boolean(false)).touch(now)
	} else {
		stopStep(e, seen.StepIndex, workflow.StepCancelled, now, "cancelled at step "+seen.Step)
	}
	e.Set("Cancelled", boolean(true)).Add("Attempt", 1).notify()
	if stop.UndoFrom >= 0 {
		if stop.UndoFrom >= len(seen.Steps) {
			return workflow.State{}, fmt.Errorf("cancel %s: step %d to undo is not in its history", seen.OrderID, stop.UndoFrom)
		}
		startUndo(e, stop.UndoFrom, seen.Steps[stop.UndoFrom].Name)
		// An Error record whose alert went out has left the in-flight
		// index; its compensation must be watched again.
		e.Set(CompleteByAttr, millis(claimBy)).Set(InFlightShardAttr, str(ShardOf(seen.OrderID)))
	} else {
		e.Set("ProcessState", str(string(workflow.Cancelled))).Remove(InFlightShardAttr)
	}
	st, err := s.update(ctx, seen.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("cancel %s: %w", seen.OrderID, err)
	}
	return st, nil
}

// Resubmit restarts an order an operator fixed: from Error at its failed
// step, or from CompensationFailed at its failed compensation, with a fresh
// FailureCount. The write is conditional on the state and Attempt seen, so of
// two operators resubmitting at once exactly one wins; the other gets
// ErrStale.
func (s *Store) Resubmit(ctx context.Context, seen workflow.State, r workflow.Resubmission, now time.Time) (workflow.State, error) {
	e := newExpr()
	e.Is("ProcessState", str(string(seen.ProcessState))).Is("Attempt", num(seen.Attempt))
	sp := stepPath(seen.StepIndex)
	switch r.State {
	case workflow.Pending:
		e.Set(sp+".State", str(string(workflow.StepPending)))
	case workflow.CompensationPending:
		e.Set(sp+".Compensation", str(string(workflow.StepPending)))
	default:
		return workflow.State{}, fmt.Errorf("resubmit %s: to %s: %w", seen.OrderID, r.State, workflow.ErrNotResubmittable)
	}
	e.Set("ProcessState", str(string(r.State))).
		Set("FailureCount", num(0)).
		Set("AlertPending", boolean(false)).
		Set(CompleteByAttr, millis(r.ClaimBy)).
		Set(InFlightShardAttr, str(ShardOf(seen.OrderID))).
		Add("Resubmits", 1).
		touch(now).
		notify()
	st, err := s.update(ctx, seen.OrderID, e)
	if err != nil {
		return workflow.State{}, fmt.Errorf("resubmit %s: %w", seen.OrderID, err)
	}
	return st, nil
}

// Page is one page of a listing.
type Page struct {
	States []workflow.State
	// Next is the opaque cursor of the next page; empty at the end.
	Next string
}

// ErrBadCursor is wrapped when a listing cursor cannot be read: a client
// mistake.
var ErrBadCursor = errors.New("bad cursor")

// MaxPage is the largest page ListByState returns.
const MaxPage = 100

// Cursor is the position after a page: the last record's key in ByState.
type Cursor struct {
	State     string `json:"s"`
	OrderID   string `json:"o"`
	ChangedAt int64  `json:"c"`
}

// ListByState lists the records in a state, most recently changed first, at
// most limit (1..MaxPage) per page. Records carry only ByStateProjection's
// attributes: no Input, no step history.
func (s *Store) ListByState(ctx context.Context, state workflow.ProcessState, limit int, after string) (Page, error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, fmt.Errorf("list %s: limit %d outside 1..%d", state, limit, MaxPage)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.tables.State),
		IndexName:                 aws.String(ByStateIndex),
		KeyConditionExpression:    aws.String("#st = :st"),
		ExpressionAttributeNames:  map[string]string{"#st": ProcessStateAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":st": str(string(state))},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
	}
	if after != "" {
		c, err := DecodeCursor(after)
		if err != nil {
			return Page{}, err
		}
		if c.State != string(state) {
			return Page{}, fmt.Errorf("%w: it belongs to a listing of %q", ErrBadCursor, c.State)
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			KeyOrderID: str(c.OrderID), ProcessStateAttr: str(c.State),
			ChangedAtAttr: &types.AttributeValueMemberN{Value: strconv.FormatInt(c.ChangedAt, 10)},
		}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return Page{}, fmt.Errorf("list %s: %w", state, err)
	}
	var p Page
	for _, item := range out.Items {
		st, err := DecodeState(item)
		if err != nil {
			return Page{}, err
		}
		p.States = append(p.States, st)
	}
	if len(out.LastEvaluatedKey) > 0 {
		var c Cursor
		c.State = string(state)
		if v, ok := out.LastEvaluatedKey[KeyOrderID].(*types.AttributeValueMemberS); ok {
			c.OrderID = v.Value
		}
		if v, ok := out.LastEvaluatedKey[ChangedAtAttr].(*types.AttributeValueMemberN); ok {
			c.ChangedAt, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		p.Next = encodeCursor(c)
	}
	return p, nil
}

func encodeCursor(c Cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxCursorLen bounds a cursor before it is decoded.
const maxCursorLen = 512

// DecodeCursor reads a cursor a client sent back. It is outside input: any
// failure wraps ErrBadCursor.
func DecodeCursor(s string) (Cursor, error) {
	if len(s) > maxCursorLen {
		return Cursor{}, fmt.Errorf("%w: longer than %d bytes", ErrBadCursor, maxCursorLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return Cursor{}, fmt.Errorf("%w: not a cursor", ErrBadCursor)
	}
	if _, ok := workflow.ParseProcessState(c.State); !ok || !message.ValidOrderID(c.OrderID) || c.ChangedAt < 0 {
		return Cursor{}, fmt.Errorf("%w: fields out of range", ErrBadCursor)
	}
	return c, nil
}
