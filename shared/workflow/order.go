package workflow

import (
	"strconv"
	"time"
)

// Item is one order line.
type Item struct {
	SKU            string `json:"sku" dynamodbav:"sku"`
	Quantity       int    `json:"quantity" dynamodbav:"quantity"`
	UnitPriceCents int64  `json:"unitPriceCents" dynamodbav:"unitPriceCents"`
}

// Order is the business record kept in the orders table.
type Order struct {
	OrderID    string `json:"orderId" dynamodbav:"OrderID"`
	CustomerID string `json:"customerId" dynamodbav:"CustomerID"`
	// ClientID, when set, names the client application to notify of the
	// order's progress on the order-events topic.
	ClientID string `json:"clientId,omitempty" dynamodbav:"ClientID,omitempty"`
	// Owner is the caller who submitted the order, as operators read it:
	// the IAM principal API Gateway authenticated (its ARN, every session
	// of one role being the role), or a Cognito identity. Only its owner
	// reads or lists an order, matched on OwnerKey.
	Owner string `json:"-" dynamodbav:"Owner,omitempty"`
	// OwnerID is the unique ID IAM gave Owner's principal, an IAM user's
	// (AIDA…) or a role's (AROA…): IAM never gives it again, not even to
	// a principal created anew under the same name, which has Owner's ARN.
	// Empty where Owner is unique by itself (the root user, a federated
	// user, a Cognito identity), and on an order of a user or role written
	// before unique IDs were recorded, until an operator stamps it
	// (`sasctl owners stamp`).
	OwnerID string `json:"-" dynamodbav:"OwnerID,omitempty"`
	// Priority is the order's class (see Priority), empty for normal: it
	// decides only whether the order was admitted, so the agents' input
	// leaves it out.
	Priority   Priority `json:"-" dynamodbav:"Priority,omitempty"`
	Currency   string   `json:"currency" dynamodbav:"Currency"`
	Items      []Item   `json:"items" dynamodbav:"Items"`
	TotalCents int64    `json:"totalCents" dynamodbav:"TotalCents"`
	// IdempotencyKey is the client's Idempotency-Key header, if it sent one.
	IdempotencyKey string `json:"-" dynamodbav:"IdempotencyKey,omitempty"`
	// RequestHash fingerprints the request body so a replay with the same key
	// but another body is told apart from a true retry.
	RequestHash string    `json:"-" dynamodbav:"RequestHash"`
	CreatedAt   time.Time `json:"createdAt" dynamodbav:"CreatedAt"`
	// ExpiresAt is when the order is deleted (Machine.OrderExpiresAt): the
	// orders table's TTL, in whole seconds; zero for an order written
	// before retention existed, which never expires. The store writes it,
	// and moves it with the rare changes that keep the order open longer
	// (Patch.OrderExpiresAt, Patch.KeepOrder), so it outlives its record.
	ExpiresAt time.Time `json:"-" dynamodbav:"-"`
	// KeyExpiresAt is when the store forgets IdempotencyKey
	// (Machine.KeyExpiresAt): until then a request with the key is
	// answered with this order; from then on it makes a new one.
	KeyExpiresAt time.Time `json:"-" dynamodbav:"-"`
}

// KeyUse is what the store remembers of an Idempotency-Key: the order it
// made, its owner, and the fingerprint of the request that made it.
type KeyUse struct {
	OrderID, Owner, OwnerID, RequestHash string
}

// OwnerKey is what an owner is matched on (see OwnerKey).
func (k KeyUse) OwnerKey() string { return OwnerKey(k.Owner, k.OwnerID) }

// OwnerKey is what an owner is matched on: the order's reads, its place in
// its owner's listing, its listing's cursors and its Idempotency-Key's
// scope all follow it. It is the owner's unique ID where it has one, so a
// principal created anew with an old one's ARN is another owner; else the
// owner itself, which is then unique by itself. IDs are word characters
// (AIDA…, AROA…), owners an ARN ("arn:…") or a Cognito identity
// ("cognito-identity:…"), so no ID is ever another owner's key. An order
// of a user or role written before unique IDs were recorded has its ARN
// for key, which no caller has any more: no client reads it until it is
// stamped with its ID.
func OwnerKey(owner, ownerID string) string {
	if ownerID != "" {
		return ownerID
	}
	return owner
}

// OwnerKey is what the order's owner is matched on (see OwnerKey).
func (o Order) OwnerKey() string { return OwnerKey(o.Owner, o.OwnerID) }

// Expired reports whether the order is past its ExpiresAt at now: gone,
// whether or not DynamoDB's TTL has deleted it yet.
func (o Order) Expired(now time.Time) bool { return pastTTL(o.ExpiresAt, now) }

// pastTTL reports whether at, a TTL (zero: none), has come at now.
func pastTTL(at, now time.Time) bool { return !at.IsZero() && !now.Before(at) }

// IdempotencyKey is the key an Agent passes to the remote service for a step:
// the same for every retry of that step of that order, so the remote service
// applies the effect at most once. It is the key of the step's first round;
// StepKey names every round.
func IdempotencyKey(orderID, step string) string { return orderID + "/" + step }

// CompensationKey is the key of the compensation of a step: its own, stable
// for every retry of the compensation, so the remote undoes at most once.
// It is the key of the undo's first round; UndoKey names every round.
func CompensationKey(orderID, step string) string { return orderID + "/" + step + "/undo" }

// StepKey is the key of round round of a step: IdempotencyKey for round 0,
// then "<orderId>/<step>/r<round>". A round begins only where an operator
// retries a step whose last outcome was a certain rejection (see
// Machine.Resubmit): the service remembers that rejection under the old key
// and never applies it, so a new key is the only way to run the step again,
// and the effect is still applied at most once, under the one key that ran.
// Order IDs and step names hold no "/", so no two rounds, steps, undos or
// orders share a key.
func StepKey(orderID, step string, round int) string {
	if round <= 0 {
		return IdempotencyKey(orderID, step)
	}
	return IdempotencyKey(orderID, step) + "/r" + strconv.Itoa(round)
}

// UndoKey is the key of round round of a step's undo, as StepKey is of the
// step: CompensationKey, then "<orderId>/<step>/undo/r<round>".
func UndoKey(orderID, step string, round int) string {
	if round <= 0 {
		return CompensationKey(orderID, step)
	}
	return CompensationKey(orderID, step) + "/r" + strconv.Itoa(round)
}

// StepKeys are the keys step i of s has run under, round 0 first, and its
// undo's, as far as its history says each was claimed: a store of
// idempotency keys (the code steps' ledger) holds an entry for each of them
// at most.
func StepKeys(s State, i int) (step, undo []string) {
	if i < 0 || i >= len(s.Steps) {
		return nil, nil
	}
	r := s.Steps[i]
	if r.Attempts > 0 || r.KeyRound > 0 || r.Compensation != "" {
		// An undo refuses the step's key before it runs, so an undo
		// claimed means an entry under the step's key too.
		for n := 0; n <= r.KeyRound; n++ {
			step = append(step, StepKey(s.OrderID, r.Name, n))
		}
	}
	if r.CompensationAttempts > 0 || r.UndoKeyRound > 0 {
		for n := 0; n <= r.UndoKeyRound; n++ {
			undo = append(undo, UndoKey(s.OrderID, r.Name, n))
		}
	}
	return step, undo
}
