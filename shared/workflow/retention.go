package workflow

import (
	"slices"
	"time"
)

// Retention: an order that ended for good (ProcessState.Ended: Processed,
// Compensated, Cancelled) is deleted Retention after it ended, by
// DynamoDB's TTL on both tables, set inside writes that happen anyway (an
// extra write per order would cost more than the storage it saves). An
// order that is open, or waits for an operator (Error,
// CompensationFailed), never expires: it can always be resumed or
// cancelled.
//
// The state record's ExpiresAt is set by the write that ends the order
// for good (Policy.retain). The orders item must live as long as its record (the
// owner's listing reads it), but it is written once, at submission, with a
// TTL fixed then: OrderExpiresAt, twice Retention after the creation. So
// the record carries OpenUntil, Retention after the creation less the
// workflow's LongestRun: an order still moving on by the Scheduler's
// commits then ends by Retention after its creation, so it expires by
// OrderExpiresAt (Definition.Validate keeps LongestRun within the shortest
// Retention). The rare changes that keep
// an order open longer move the orders item's TTL in the same transaction
// as the record (Patch.OrderExpiresAt, Patch.KeepOrder):
//
//   - confirming the alert of an order that waits for an operator keeps
//     its orders item for good (AlertSent): neither expires while a person
//     has to decide;
//   - an operator's reopening (Resubmit, a Cancel of Error) gives the order
//     a new OpenUntil and its orders item a new TTL, as a new order gets;
//   - a change the Supervisor or an operator decides past OpenUntil (an
//     order stuck in flight, or whose alert is still unsent, for longer
//     than Retention) moves both on the same way.
//
// Between two such changes an order moves only by the Scheduler's commits,
// which LongestRun bounds, so it ends, or stops and waits for one of them,
// before its orders item expires.

// expiry is the ExpiresAt of a record that ends at now: Retention later,
// in whole seconds (a TTL attribute holds Unix seconds, so the store keeps
// exactly this).
func (p Policy) expiry(now time.Time) time.Time {
	return now.Add(p.Retention).Truncate(time.Second)
}

// OrderExpiresAt is the TTL of the orders item of an order created (or
// reopened) at createdAt: twice Retention later, Retention after its
// record's OpenUntil (see the top of this file).
func (m Machine) OrderExpiresAt(createdAt time.Time) time.Time {
	return m.Policy.orderExpiry(createdAt)
}

func (p Policy) orderExpiry(at time.Time) time.Time { return p.expiry(p.expiry(at)) }

// openUntil is the OpenUntil of a record created or reopened at at, whose
// workflow runs at most run by the Scheduler alone (LongestRun).
func (p Policy) openUntil(at time.Time, run time.Duration) time.Time { return p.expiry(at).Add(-run) }

// KeyExpiresAt is when the store forgets the Idempotency-Key of an order
// created at createdAt: Retention later. Until then a request with the key
// lands on that order; from then on the key makes a new order, with a new
// ID, so no two orders share an ID, a remote idempotency key or an event
// stream, whatever the retention.
func (m Machine) KeyExpiresAt(createdAt time.Time) time.Time { return m.Policy.expiry(createdAt) }

// retain adds to c what the change does to the record's and the orders
// item's TTLs. Every Machine method that returns a Change runs it last
// (Machine.decided; Stranded directly); seen is the record the change was
// decided on, when there was one, and run the longest run of its
// workflow's orders (Definition.LongestRun).
func (p Policy) retain(c *Change, seen State, run time.Duration) {
	if c.OrderID == "" {
		return
	}
	to, now := c.Patch.State, c.Patch.Now
	fromEnded := slices.ContainsFunc(c.Fence.In, ProcessState.Ended)
	fromOperator := slices.ContainsFunc(c.Fence.In, ProcessState.NeedsOperator)
	switch {
	case to.Ended() && !fromEnded:
		c.Patch.ExpiresAt = p.expiry(now)
	case to != "" && !to.Terminal() && fromOperator:
		// A record stored by an older release may carry one.
		c.Patch.Unexpire = true
	}
	switch {
	case fromOperator && to != "":
		// An operator moves an order that waits for one: its orders item
		// may have been kept for good (AlertSent), and gets the TTL of a
		// new order's; the record's bound starts anew unless it ends.
		c.Patch.OrderExpiresAt = p.orderExpiry(now)
		if !to.Ended() {
			c.Patch.OpenUntil = p.openUntil(now, run)
		}
	case !seen.OpenUntil.IsZero() && !now.Before(seen.OpenUntil):
		// Open past its bound: both move on.
		c.Patch.OrderExpiresAt = p.orderExpiry(now)
		if !to.Ended() {
			c.Patch.OpenUntil = p.openUntil(now, run)
		}
	}
	// An order that ended for good is never reopened: the bound goes.
	if to.Ended() {
		c.Patch.Seal, c.Patch.OpenUntil = true, time.Time{}
	}
}
