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

	"github.com/sasflow/sas/shared/jsonstrict"
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

// MaxPage is the largest page a listing returns.
const MaxPage = 100

// Listing is one of the two listings, by state (StateListing) and by owner
// (OwnerListing): the index it pages through, newest first, and the cursors
// that carry a position in it from page to page. The Store queries DynamoDB
// with it, and the in-memory store (internal/testkit/memstore) pages its
// maps with it, so both check limits and cursors alike.
type Listing struct {
	name     string // names the listing in errors
	index    string
	partAttr string // the index's partition key,
	part     string // and the partition listed
	sortAttr string
	resume   func(cursor string) (Position, error) // refuses another listing's cursor
	cursor   func(Position) string
}

// Position is a record's place in a listing: its key in the index.
type Position struct {
	OrderID string
	// Sort is the index's sort key in Unix milliseconds: when the record
	// last changed (by state) or the order was created (by owner).
	Sort int64
}

// Start checks that limit is within 1..MaxPage and reads the cursor a
// client sent back: the position the page starts after, nil for the first
// page. A cursor that is not this listing's wraps ErrBadCursor.
func (l Listing) Start(limit int, cursor string) (*Position, error) {
	if limit < 1 || limit > MaxPage {
		return nil, fmt.Errorf("%s: limit %d outside 1..%d", l.name, limit, MaxPage)
	}
	if cursor == "" {
		return nil, nil
	}
	pos, err := l.resume(cursor)
	if err != nil {
		return nil, err
	}
	return &pos, nil
}

// Next is the cursor of the page that follows pos.
func (l Listing) Next(pos Position) string { return l.cursor(pos) }

// query reads a page of l from table: the items as the index holds them,
// and the cursor of the next page when DynamoDB says more may follow.
func (s *Store) query(ctx context.Context, table string, l Listing, limit int, cursor string) ([]map[string]types.AttributeValue, string, error) {
	after, err := l.Start(limit, cursor)
	if err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		IndexName:                 aws.String(l.index),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": l.partAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(l.part)},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
	}
	if after != nil {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			KeyOrderID: str(after.OrderID), l.partAttr: str(l.part),
			l.sortAttr: &types.AttributeValueMemberN{Value: strconv.FormatInt(after.Sort, 10)},
		}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", l.name, err)
	}
	if len(out.LastEvaluatedKey) == 0 {
		return out.Items, "", nil
	}
	var last Position
	if v, ok := out.LastEvaluatedKey[KeyOrderID].(*types.AttributeValueMemberS); ok {
		last.OrderID = v.Value
	}
	if v, ok := out.LastEvaluatedKey[l.sortAttr].(*types.AttributeValueMemberN); ok {
		last.Sort, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	return out.Items, l.Next(last), nil
}

// maxCursorLen bounds a cursor before it is decoded.
const maxCursorLen = 512

// encodeCursor is the opaque form of a cursor that decodeCursor reads.
func encodeCursor(c any) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor a client sent back into c, strictly: it is
// outside input, so an unknown member or data after it is refused, and any
// failure wraps ErrBadCursor. The caller checks the fields' ranges.
func decodeCursor(s string, c any) error {
	if len(s) > maxCursorLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrBadCursor, maxCursorLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	switch err := jsonstrict.Decode(b, c); {
	case errors.Is(err, jsonstrict.ErrTrailing):
		return fmt.Errorf("%w: data after the cursor", ErrBadCursor)
	case err != nil:
		return fmt.Errorf("%w: not a cursor", ErrBadCursor)
	}
	return nil
}
