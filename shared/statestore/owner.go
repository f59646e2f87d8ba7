package statestore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// encodeOrder is an order as stored: its fields, and, when it has an owner,
// its keys in the ByOwner index, under the key its owner is matched on
// (workflow.OwnerKey). The keys are written once, so the index entry never
// moves (but when an operator stamps an older order with its owner's
// unique ID, StampOwner).
func encodeOrder(o workflow.Order) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(o)
	if err != nil {
		return nil, err
	}
	if o.Owner != "" {
		item[OwnerShardAttr] = str(OwnerShard(o.OwnerKey(), o.OrderID))
		item[OwnerSortAttr] = str(SortKey(o.CreatedAt, o.OrderID))
	}
	if !o.ExpiresAt.IsZero() {
		item[ExpiresAtAttr] = num64(unixSeconds(o.ExpiresAt))
	}
	return item, nil
}

// decodeOrder reads an order as stored.
func decodeOrder(item map[string]types.AttributeValue) (workflow.Order, error) {
	var o workflow.Order
	if err := attributevalue.UnmarshalMap(item, &o); err != nil {
		return workflow.Order{}, err
	}
	if v, ok := item[ExpiresAtAttr]; ok {
		var secs int64
		if err := attributevalue.Unmarshal(v, &secs); err != nil {
			return workflow.Order{}, fmt.Errorf("%s: %w", ExpiresAtAttr, err)
		}
		o.ExpiresAt = fromSeconds(secs)
	}
	return o, nil
}

// batchGetTries bounds the BatchGetItem calls of one page: DynamoDB may
// leave keys unprocessed when throttled, and they are asked for again after
// a backoff, but not forever.
const batchGetTries = 5

// batchGetBackoff is the wait before the second try; it doubles each try.
var batchGetBackoff = 20 * time.Millisecond

// OwnerListing is the listing of the orders of the owner matched on
// ownerKey (workflow.OwnerKey), newest first, from the ByOwner index. Its
// cursors name the owner by OwnerTag(ownerKey), so every other caller's
// listing refuses them, a principal created anew under an old one's name
// included.
func OwnerListing(ownerKey string) Listing {
	l := Listing{
		name: "list by owner", index: ByOwnerIndex,
		partAttr: OwnerShardAttr, sortAttr: OwnerSortAttr,
		part: func(shard int) string { return listPartition(ownerKey, shard) },
		resume: func(cursor string) (string, error) {
			c, err := DecodeOwnerCursor(cursor)
			if err != nil {
				return "", err
			}
			if c.Owner != OwnerTag(ownerKey) {
				return "", fmt.Errorf("%w: it belongs to another caller's listing", ErrBadCursor)
			}
			return c.After, nil
		},
		cursor: func(after string) string {
			return EncodeOwnerCursor(OwnerCursor{Owner: OwnerTag(ownerKey), After: after})
		},
	}
	if ownerKey == "" {
		l.refused = errors.New("no owner")
	}
	return l
}

// ListByOwner lists the orders of the owner matched on ownerKey
// (workflow.OwnerKey), newest first, at most limit (1..MaxPage) per page. It reads a page of order IDs from the ByOwner
// index, then those orders' state records in one BatchGetItem, and returns
// them in the index's order. Records carry SummaryAttrs only (no Input, no
// step history). A cursor that is not one of this owner's listings wraps
// ErrBadCursor.
func (s *Store) ListByOwner(ctx context.Context, ownerKey string, limit int, after string) (Page, error) {
	// Both records are written in one transaction, so a state is missing
	// only if someone deleted it; the listing goes on without it.
	return s.list(ctx, s.tables.Orders, OwnerListing(ownerKey), limit, after, func(workflow.State) bool { return true })
}

// batchGetStates reads attrs (nil: every attribute) of the state records
// of ids (at most MaxPage), eventually consistent, asking again for the
// keys DynamoDB left unprocessed.
func (s *Store) batchGetStates(ctx context.Context, ids []string, attrs []string) (map[string]workflow.State, error) {
	out := make(map[string]workflow.State, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	bg := s.db
	keys := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		keys[i] = map[string]types.AttributeValue{KeyOrderID: str(id)}
	}
	req := map[string]types.KeysAndAttributes{s.tables.State: {Keys: keys}}
	if attrs != nil {
		names := make(map[string]string, len(attrs))
		proj := make([]byte, 0, 8*len(attrs))
		for i, a := range attrs {
			ph := "#a" + strconv.Itoa(i)
			names[ph] = a
			if i > 0 {
				proj = append(proj, ',')
			}
			proj = append(proj, ph...)
		}
		req[s.tables.State] = types.KeysAndAttributes{Keys: keys, ProjectionExpression: aws.String(string(proj)), ExpressionAttributeNames: names}
	}
	wait := batchGetBackoff
	for try := 1; ; try++ {
		res, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("batch get %d state records: %w", len(ids), err)
		}
		for _, item := range res.Responses[s.tables.State] {
			st, err := DecodeState(item)
			if err != nil {
				return nil, err
			}
			out[st.OrderID] = st
		}
		left := res.UnprocessedKeys[s.tables.State]
		if len(left.Keys) == 0 {
			return out, nil
		}
		if try == batchGetTries {
			return nil, fmt.Errorf("batch get: %d of %d state records still unprocessed after %d tries", len(left.Keys), len(ids), try)
		}
		req = map[string]types.KeysAndAttributes{s.tables.State: left}
		if err := s.sleep(ctx, wait); err != nil {
			return nil, err
		}
		wait *= 2
	}
}

// OwnerCursor is the position after a page of a listing by owner: a tag of
// the owner's key it was listed for, so a cursor is refused by every other
// caller's listing, and the sort key in ByOwner of the page's last order.
// The tag is a hash, so a cursor does not carry the caller's identity
// around.
type OwnerCursor struct {
	Owner string `json:"w"`
	After string `json:"k"`
}

// ownerTagNamespace separates the tag from any other hash of a principal.
const ownerTagNamespace = "sasflow/statestore/owner-cursor/v1\x00"

// ownerTagLen is the length of an owner tag: 12 bytes of SHA-256 in
// base64url.
const ownerTagLen = 16

// OwnerTag names an owner inside a cursor, by its key (workflow.OwnerKey).
func OwnerTag(ownerKey string) string {
	sum := sha256.Sum256([]byte(ownerTagNamespace + ownerKey))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// EncodeOwnerCursor is the opaque form of c that DecodeOwnerCursor reads.
func EncodeOwnerCursor(c OwnerCursor) string { return encodeCursor(c) }

// DecodeOwnerCursor reads a listing-by-owner cursor a client sent back. It
// is outside input: any failure wraps ErrBadCursor. Whether the cursor is
// the caller's own is OwnerListing's check.
func DecodeOwnerCursor(s string) (OwnerCursor, error) {
	var c OwnerCursor
	if err := decodeCursor(s, &c); err != nil {
		return OwnerCursor{}, err
	}
	if !validOwnerTag(c.Owner) || !ValidSortKey(c.After) {
		return OwnerCursor{}, fmt.Errorf("%w: fields out of range", ErrBadCursor)
	}
	return c, nil
}

func validOwnerTag(s string) bool {
	if len(s) != ownerTagLen {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 12
}
