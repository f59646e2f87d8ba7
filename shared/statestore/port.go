package statestore

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// Port is the state store's contract: everything the actors ask of it. The
// actors declare the parts they use; Store (DynamoDB) implements all of it,
// and so does the in-memory store the tests run the actors on
// (internal/testkit/memstore). One conformance suite
// (internal/testkit/storetest) holds both to the same behaviour, so the
// double cannot drift from DynamoDB.
type Port interface {
	// CreateOrder writes the order and its state record in one
	// transaction, with the key item of its Idempotency-Key if it has one;
	// workflow.ErrKeyUsed when the key made an order the store still
	// remembers, workflow.ErrExists when the ID is taken.
	CreateOrder(ctx context.Context, o workflow.Order, st workflow.State) error
	// GetKey reads what an owner's Idempotency-Key made, the owner named by
	// its key (workflow.OwnerKey);
	// workflow.ErrNotFound when nothing, or when the key is forgotten (past
	// its Order.KeyExpiresAt).
	GetKey(ctx context.Context, ownerKey, key string) (workflow.KeyUse, error)
	// GetOrder and GetState read one item; workflow.ErrNotFound when it is
	// missing or past its ExpiresAt (DynamoDB's TTL deletes it later).
	GetOrder(ctx context.Context, orderID string) (workflow.Order, error)
	GetState(ctx context.Context, orderID string) (workflow.State, error)
	// PeekHead is GetState without the record's steps (Steps is nil),
	// eventually consistent, at half the read units: for a reader that
	// only asks whether a record is still in a phase (the Supervisor's
	// fast path), and reads the whole record when it is.
	PeekHead(ctx context.Context, orderID string) (workflow.State, error)
	// Apply writes a change when its fence admits the record, and returns
	// the record as written, exactly as workflow.Patch.Apply leaves it;
	// workflow.ErrStale when the fence does not admit it. A change that
	// moves its orders item's TTL (Change.MovesOrder) writes it in the
	// same transaction, if the orders item exists.
	Apply(ctx context.Context, c workflow.Change) (workflow.State, error)
	// Expired returns the records the Supervisor watches whose CompleteBy
	// is at or before now, at most limit per shard, whole. A read that
	// failed (a shard of the index, a batch of records) is in the error,
	// and what was read is returned with it: one throttled call of a
	// sweep's many must not stop the recovery of what the rest found.
	Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error)
	// ListByState pages through the records in a listed state
	// (workflow.ProcessState.Listed), newest entry into the state first;
	// any other state wraps ErrNotListed. ListByOwner pages through the
	// orders of the owner whose key (workflow.OwnerKey) it is given,
	// newest first. Records carry SummaryAttrs only
	// (Summary); a record past its ExpiresAt is left out of its page, whose
	// cursor still follows the index. A cursor that is not the listing's
	// own wraps ErrBadCursor.
	ListByState(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (Page, error)
	ListByOwner(ctx context.Context, ownerKey string, limit int, cursor string) (Page, error)
	// CountOpen counts the open orders of each workflow version, from the
	// in-flight index and ByState's OpenStates, each order once, none past
	// its ExpiresAt; it reads at most limit (1..MaxOpenLimit) index
	// entries, and says Truncated when there were more.
	CountOpen(ctx context.Context, limit int) (OpenCount, error)
}

var _ Port = (*Store)(nil)

// Summary returns st as a listing shows it: SummaryAttrs, nothing else. An
// in-memory store answers its listings with it, as the store's
// BatchGetItem does.
func Summary(st workflow.State) (workflow.State, error) { return only(st, SummaryAttrs) }

// only returns st with the attributes keep, as stored, and no others.
func only(st workflow.State, keep []string) (workflow.State, error) {
	item, err := encodeState(st)
	if err != nil {
		return workflow.State{}, err
	}
	out := make(map[string]types.AttributeValue, len(keep))
	for name, v := range item {
		if slices.Contains(keep, name) {
			out[name] = v
		}
	}
	return DecodeState(out)
}
