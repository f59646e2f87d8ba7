package workflow

import "errors"

// Domain errors the state store returns when a conditional write's condition
// fails or an item is missing. Callers test them with errors.Is.
var (
	// ErrNotFound: no such order or state record.
	ErrNotFound = errors.New("not found")
	// ErrExists: an order with this ID already exists.
	ErrExists = errors.New("already exists")
	// ErrKeyUsed: the order's Idempotency-Key already made an order, which
	// the store still remembers (Order.KeyExpiresAt); the caller reads it
	// with the store's GetKey.
	ErrKeyUsed = errors.New("idempotency key already used")
	// ErrStale: the record moved on since the caller read it (another
	// Scheduler claimed it, another Attempt, state or CompleteBy), so the
	// caller's write was fenced off. Normal and quiet for a lost claim.
	ErrStale = errors.New("stale write fenced off")
)

// ErrConflict marks a request the record's current state does not allow,
// such as cancelling a processed order; the API answers it with 409.
var ErrConflict = errors.New("conflict with the order's state")
