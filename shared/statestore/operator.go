package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

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
		p.Next = EncodeCursor(c)
	}
	return p, nil
}

// EncodeCursor is the opaque form of c that DecodeCursor reads.
func EncodeCursor(c Cursor) string {
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
