package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

// An order of an IAM user or role written before owners' unique IDs were
// recorded names its owner by ARN alone (workflow.Order.OwnerID is empty),
// so its key (workflow.OwnerKey) is the ARN, which no caller is matched on
// any more: no client reads it. Stamping it gives it the unique ID of the
// principal that made it, as the Submission writes an order of that
// principal now. Only the operators' CLI stamps (sasctl owners stamp); no
// function scans a table, so the Stamper has a client of its own.

// OwnerIDAttr is the attribute of an order, a state record and a key item
// that holds the owner's unique ID (workflow.Order.OwnerID).
const OwnerIDAttr = "OwnerID"

// ownerAttr holds the owner (workflow.Order.Owner).
const ownerAttr = "Owner"

// StampClient is the part of the DynamoDB API the Stamper uses.
type StampClient interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ StampClient = (*dynamodb.Client)(nil)

// Stamper finds the orders whose owner has no unique ID recorded, and
// stamps them with one.
type Stamper struct {
	db     StampClient
	tables Tables
	clk    clock.Clock
}

// NewStamper returns a Stamper of the orders and state tables named; clk
// tells which items are past their ExpiresAt (nil: the system's).
func NewStamper(db StampClient, tables Tables, clk clock.Clock) *Stamper {
	if clk == nil {
		clk = clock.System{}
	}
	return &Stamper{db: db, tables: tables, clk: clk}
}

// Unstamped is an order with an owner and no unique ID of it, as its
// orders item names it.
type Unstamped struct {
	OrderID, Owner string
	// IdempotencyKey is the key the order was made with, "" for none.
	IdempotencyKey string
	CreatedAt      time.Time
}

// unstampedItem is what the scan reads of an orders item.
type unstampedItem struct {
	OrderID        string    `dynamodbav:"OrderID"`
	Owner          string    `dynamodbav:"Owner"`
	IdempotencyKey string    `dynamodbav:"IdempotencyKey"`
	CreatedAt      time.Time `dynamodbav:"CreatedAt"`
	ExpiresAt      int64     `dynamodbav:"ExpiresAt"`
}

// ScanUnstamped reads the whole orders table, a page at a time, and hands
// each orders item with an owner and no OwnerID to each, in no order, until
// each fails. Key items, and orders past their ExpiresAt, are left out.
// A scan reads every item (one read unit per 4 KB, eventually consistent);
// orders made while it runs are the Submission's, stamped already.
func (s *Stamper) ScanUnstamped(ctx context.Context, each func(Unstamped) error) error {
	in := &dynamodb.ScanInput{
		TableName:                aws.String(s.tables.Orders),
		FilterExpression:         aws.String("attribute_exists(#owner) AND attribute_not_exists(#ownerId) AND attribute_not_exists(#keyOrder)"),
		ProjectionExpression:     aws.String("#id, #owner, #key, #created, #expires"),
		ExpressionAttributeNames: map[string]string{"#id": KeyOrderID, "#owner": ownerAttr, "#ownerId": OwnerIDAttr, "#keyOrder": KeyOrderAttr, "#key": "IdempotencyKey", "#created": "CreatedAt", "#expires": ExpiresAtAttr},
	}
	for page := dynamodb.NewScanPaginator(s.db, in); page.HasMorePages(); {
		out, err := page.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("scan %s for orders without their owner's unique ID: %w", s.tables.Orders, err)
		}
		for _, item := range out.Items {
			var it unstampedItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return fmt.Errorf("scan %s: decode an orders item: %w", s.tables.Orders, err)
			}
			if it.Owner == "" || s.expired(fromSeconds(it.ExpiresAt)) {
				continue
			}
			if err := each(Unstamped{OrderID: it.OrderID, Owner: it.Owner, IdempotencyKey: it.IdempotencyKey, CreatedAt: it.CreatedAt}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Stamper) expired(at time.Time) bool { return !at.IsZero() && !s.clk.Now().Before(at) }

// KeyStamp is what stamping an order did with its Idempotency-Key.
type KeyStamp string

// What StampOwner did with an order's key.
const (
	// KeyNone: the order had no key, or its key is forgotten (past its
	// ExpiresAt), or its slot names no longer this order.
	KeyNone KeyStamp = "none"
	// KeyCopied: the key names the order at its slot under the owner's
	// unique ID too, so the principal's retry with it is answered with
	// the order.
	KeyCopied KeyStamp = "copied"
	// KeyTaken: the slot under the unique ID names another order, one the
	// principal made with the key since its orders are matched on its ID.
	// That one keeps the key.
	KeyTaken KeyStamp = "taken"
)

// Stamp is what StampOwner did.
type Stamp struct {
	// Record tells whether the order has a state record to stamp (one past
	// its ExpiresAt or deleted has none).
	Record bool
	Key    KeyStamp
}

// ErrOwnerChanged is wrapped when an item of the order names another owner
// than the one it is stamped for: nothing of that item was written.
var ErrOwnerChanged = errors.New("the order's owner is not the one stamped")

// StampOwner records id, the unique ID of o's owner's principal, for o, as
// the Submission writes an order of that principal now: the state record
// keeps the ID instead of the owner (workflow.State.Owner); the key, when o
// has one the store still remembers, gets a key item at its slot under the
// ID; the orders item gets the ID and its ByOwner partition under it (and
// its sort key, if an older release wrote none), which puts it in the
// principal's listing. The orders item is written last, each write
// conditional on what it replaces, and a write already made is not made
// again: a stamp cut off halfway is finished by the next, whose scan still
// finds the order, and nothing the Submission or an actor wrote is
// overwritten. Stamping an item that names another owner, or an ID other
// than id, wraps ErrOwnerChanged.
func (s *Stamper) StampOwner(ctx context.Context, o Unstamped, id string) (Stamp, error) {
	var done Stamp
	if o.Owner == "" || id == "" {
		return done, fmt.Errorf("stamp order %s: an owner and its ID are needed", o.OrderID)
	}
	var err error
	if done.Record, err = s.stampRecord(ctx, o, id); err != nil {
		return done, err
	}
	if done.Key, err = s.copyKey(ctx, o, id); err != nil {
		return done, err
	}
	return done, s.stampOrder(ctx, o, id)
}

// stampRecord gives the state record the ID in place of the owner; false
// when there is no record.
func (s *Stamper) stampRecord(ctx context.Context, o Unstamped, id string) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.State),
		Key:                                 map[string]types.AttributeValue{KeyOrderID: str(o.OrderID)},
		UpdateExpression:                    aws.String("SET #ownerId = :id REMOVE #owner"),
		ConditionExpression:                 aws.String("#owner = :owner AND attribute_not_exists(#ownerId)"),
		ExpressionAttributeNames:            map[string]string{"#owner": ownerAttr, "#ownerId": OwnerIDAttr},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":id": str(id), ":owner": str(o.Owner)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return s.stampedAlready(o, id, "state record", failed.Item)
	case err != nil:
		return false, fmt.Errorf("stamp the state record of order %s: %w", o.OrderID, err)
	}
	return true, nil
}

// stampedAlready tells a refused stamp of an item (what it held, nothing
// when there is none) that is done already from one that must not be.
func (s *Stamper) stampedAlready(o Unstamped, id, what string, item map[string]types.AttributeValue) (bool, error) {
	if len(item) == 0 {
		return false, nil
	}
	var held struct{ Owner, OwnerID string }
	if err := attributevalue.UnmarshalMap(item, &held); err != nil {
		return false, fmt.Errorf("stamp the %s of order %s: decode what it holds: %w", what, o.OrderID, err)
	}
	if held.OwnerID == id {
		return true, nil
	}
	return false, fmt.Errorf("stamp the %s of order %s for %s: it names owner %q, ID %q: %w", what, o.OrderID, o.Owner, held.Owner, held.OwnerID, ErrOwnerChanged)
}

// copyKey puts the key item of o's key, as its slot under the owner still
// remembers it, at its slot under the ID too.
func (s *Stamper) copyKey(ctx context.Context, o Unstamped, id string) (KeyStamp, error) {
	if o.IdempotencyKey == "" {
		return KeyNone, nil
	}
	old := KeySlot(o.Owner, o.IdempotencyKey)
	use, expiresAt, found, err := s.key(ctx, old)
	switch {
	case err != nil:
		return "", fmt.Errorf("copy the key of order %s: %w", o.OrderID, err)
	case !found || use.OrderID != o.OrderID || s.expired(expiresAt):
		return KeyNone, nil
	}
	slot := KeySlot(id, o.IdempotencyKey)
	item, err := attributevalue.MarshalMap(keyItem{Slot: slot, OrderID: o.OrderID, Owner: o.Owner, OwnerID: id, RequestHash: use.RequestHash,
		CreatedAt: unixMilli(o.CreatedAt), ExpiresAt: unixSeconds(expiresAt)})
	if err != nil {
		return "", fmt.Errorf("copy the key of order %s: %w", o.OrderID, err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.Orders), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": KeyOrderID},
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		held, _, found, err := s.key(ctx, slot)
		switch {
		case err != nil:
			return "", fmt.Errorf("copy the key of order %s: %w", o.OrderID, err)
		case found && held.OrderID == o.OrderID:
			return KeyCopied, nil
		}
		return KeyTaken, nil
	case err != nil:
		return "", fmt.Errorf("copy the key of order %s to slot %s: %w", o.OrderID, slot, err)
	}
	return KeyCopied, nil
}

// key reads what slot holds (see decodeKey), strongly consistent.
func (s *Stamper) key(ctx context.Context, slot string) (use workflow.KeyUse, expiresAt time.Time, found bool, err error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.Orders), Key: map[string]types.AttributeValue{KeyOrderID: str(slot)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return use, expiresAt, false, fmt.Errorf("read key slot %s: %w", slot, err)
	}
	if len(out.Item) == 0 {
		return use, expiresAt, false, nil
	}
	use, expiresAt, err = decodeKey(out.Item)
	if err != nil {
		return use, expiresAt, false, fmt.Errorf("decode key slot %s: %w", slot, err)
	}
	return use, expiresAt, true, nil
}

// stampOrder gives the orders item the ID and its ByOwner keys under it.
func (s *Stamper) stampOrder(ctx context.Context, o Unstamped, id string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.tables.Orders),
		Key:                 map[string]types.AttributeValue{KeyOrderID: str(o.OrderID)},
		UpdateExpression:    aws.String("SET #ownerId = :id, #shard = :shard, #sort = if_not_exists(#sort, :sort)"),
		ConditionExpression: aws.String("#owner = :owner AND attribute_not_exists(#ownerId) AND attribute_not_exists(#keyOrder)"),
		ExpressionAttributeNames: map[string]string{"#owner": ownerAttr, "#ownerId": OwnerIDAttr, "#keyOrder": KeyOrderAttr,
			"#shard": OwnerShardAttr, "#sort": OwnerSortAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id), ":owner": str(o.Owner),
			":shard": str(OwnerShard(id, o.OrderID)), ":sort": str(SortKey(o.CreatedAt, o.OrderID))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		if stamped, err := s.stampedAlready(o, id, "orders item", failed.Item); err != nil || stamped {
			return err
		}
		return fmt.Errorf("stamp order %s: its orders item is gone", o.OrderID)
	case err != nil:
		return fmt.Errorf("stamp order %s: %w", o.OrderID, err)
	}
	return nil
}
