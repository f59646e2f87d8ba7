package statestore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// An Idempotency-Key lives in the orders table as an item of its own, its
// key item, under KeySlot(ownerKey, key): it names the order the key made
// (KeyOrderAttr) and the fingerprint of the request that made it, until
// the key's ExpiresAt (workflow.Machine.KeyExpiresAt). The order itself has
// a random ID of its own, so a key reused once it is forgotten makes a new
// order that shares nothing with the old one: neither its ID, nor the
// remote idempotency keys derived from it (workflow.IdempotencyKey), nor
// its status events. Order IDs are UUIDs and slots are too, of another
// version, so the two never meet; orders made by an older release with a
// key have the slot for their ID, so their orders item is their key item.

// keyNamespace separates the slot's derivation from any other SHA-256 of
// the same input. Its v2 is the derivation an older release used for the
// order IDs of keyed orders, so their orders items sit at their keys'
// slots.
const keyNamespace = "sasflow/submission/order-id/v2\x00"

// KeyOrderAttr is the attribute of a key item naming the order the key
// made; an orders item has none.
const KeyOrderAttr = "KeyOrder"

// KeySlot is where the Idempotency-Key key of the owner matched on
// ownerKey (the caller's workflow.OwnerKey) lives in the orders table: a
// UUID of version 8 (RFC 9562's custom-hash version) hashed from both, so
// another caller's same key has a slot of its own, and so has the same key
// of a principal created anew under an old one's name.
func KeySlot(ownerKey, key string) string {
	// An owner's key is printable ASCII, so the NUL between the two keeps
	// (owner, key) pairs apart.
	sum := sha256.Sum256([]byte(keyNamespace + ownerKey + "\x00" + key))
	return message.UUID([16]byte(sum[:16]), 8)
}

// keyItem is a key item as stored.
type keyItem struct {
	Slot        string `dynamodbav:"OrderID"`
	OrderID     string `dynamodbav:"KeyOrder"`
	Owner       string `dynamodbav:"Owner"`
	OwnerID     string `dynamodbav:"OwnerID,omitempty"`
	RequestHash string `dynamodbav:"RequestHash"`
	CreatedAt   int64  `dynamodbav:"CreatedAt"`
	ExpiresAt   int64  `dynamodbav:"ExpiresAt,omitempty"`
}

// encodeKey is the key item of o, an order with an Idempotency-Key.
func encodeKey(o workflow.Order) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(keyItem{
		Slot: KeySlot(o.OwnerKey(), o.IdempotencyKey), OrderID: o.OrderID, Owner: o.Owner, OwnerID: o.OwnerID, RequestHash: o.RequestHash,
		CreatedAt: unixMilli(o.CreatedAt), ExpiresAt: unixSeconds(o.KeyExpiresAt),
	})
}

// decodeKey reads what a slot holds: a key item, or the orders item of an
// order an older release made with the key (whose ID is the slot).
func decodeKey(item map[string]types.AttributeValue) (use workflow.KeyUse, expiresAt time.Time, err error) {
	if _, ok := item[KeyOrderAttr]; !ok {
		o, err := decodeOrder(item)
		return workflow.KeyUse{OrderID: o.OrderID, Owner: o.Owner, OwnerID: o.OwnerID, RequestHash: o.RequestHash}, o.ExpiresAt, err
	}
	var k keyItem
	if err := attributevalue.UnmarshalMap(item, &k); err != nil {
		return workflow.KeyUse{}, time.Time{}, err
	}
	return workflow.KeyUse{OrderID: k.OrderID, Owner: k.Owner, OwnerID: k.OwnerID, RequestHash: k.RequestHash}, fromSeconds(k.ExpiresAt), nil
}

// GetKey reads what the Idempotency-Key key of the owner matched on
// ownerKey (workflow.OwnerKey) made: the order and its request's
// fingerprint, with a strongly consistent read (the transaction that wrote
// it may have just committed). workflow.ErrNotFound when the key made
// nothing or is forgotten (past its ExpiresAt).
func (s *Store) GetKey(ctx context.Context, ownerKey, key string) (workflow.KeyUse, error) {
	slot := KeySlot(ownerKey, key)
	item, err := s.get(ctx, s.tables.Orders, slot, true)
	if err != nil {
		return workflow.KeyUse{}, err
	}
	use, expiresAt, err := decodeKey(item)
	if err != nil {
		return workflow.KeyUse{}, fmt.Errorf("decode key item %s: %w", slot, err)
	}
	if s.expired(expiresAt) {
		return workflow.KeyUse{}, fmt.Errorf("key item %s: expired at %s: %w", slot, expiresAt.Format(time.RFC3339), workflow.ErrNotFound)
	}
	return use, nil
}
