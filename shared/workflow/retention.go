package workflow

import (
	"fmt"
	"slices"
	"time"
)

// Retention: a terminal order is deleted Retention after it ended, by
// DynamoDB's TTL on both tables, set inside writes that happen anyway (an
// extra write per order would cost more than the storage it saves).
//
// The state record's ExpiresAt is set by the write that ends the order
// and removed by one that reopens it (retain). The orders item is written
// once, at submission, so its TTL is fixed then: OrderExpiresAt, twice
// Retention after its creation. It must outlive every open state record,
// so the record carries OpenUntil, Retention after its creation, and a
// change that would reopen the order (Resubmit, a Cancel of Error that
// starts a compensation) is refused from then on. An order then ends at
// most its run's length after OpenUntil, and its record expires Retention
// later, before its orders item: the Supervisor gives a step up after
// MaxFailures timeouts, so only an order left open for more than Retention
// (at least a day) after its last reopening could outlive its orders item.

// ErrPastRetention is returned for an operator's change that would reopen
// an order past its OpenUntil; the API answers it with 409.
var ErrPastRetention = fmt.Errorf("order is past the time it can be reopened: %w", ErrConflict)

// expiry is the ExpiresAt of a record that ends at now: Retention later,
// in whole seconds (a TTL attribute holds Unix seconds, so the store keeps
// exactly this).
func (p Policy) expiry(now time.Time) time.Time {
	return now.Add(p.Retention).Truncate(time.Second)
}

// OrderExpiresAt is the TTL of the orders item of an order created at
// createdAt: twice Retention later, Retention after its record's OpenUntil
// (see the top of this file for why it outlives every open record).
func (m Machine) OrderExpiresAt(createdAt time.Time) time.Time {
	return m.Policy.expiry(m.openUntil(createdAt))
}

// openUntil is the OpenUntil of a record created at createdAt.
func (m Machine) openUntil(createdAt time.Time) time.Time {
	return m.Policy.expiry(createdAt)
}

// retain adds to c what the change does to the record's TTL: a change
// into a terminal state from one that is not sets ExpiresAt; a change out
// of a terminal state removes it. A change from one terminal state to
// another (a Cancel of Error) keeps it: the order's retention runs from
// when it first stopped. A change into a state no operator can reopen
// also removes OpenUntil (Seal). Every public method of the Machine that returns
// a Change runs it last.
func (m Machine) retain(c *Change) {
	if c.OrderID != "" {
		// Run last in every public method, it also pins the change to the
		// version that decided it (Fence.Workflow).
		c.Fence.Workflow = m.Def.ID()
	}
	m.Policy.retain(c)
}

// retain is Machine.retain's part that needs no definition.
func (p Policy) retain(c *Change) {
	to := c.Patch.State
	if to == "" {
		return
	}
	from := slices.ContainsFunc(c.Fence.In, ProcessState.Terminal)
	switch {
	case to.Terminal() && !from:
		c.Patch.ExpiresAt = p.expiry(c.Patch.Now)
	case !to.Terminal() && from:
		c.Patch.Unexpire = true
	}
	// Processed, Compensated and Cancelled are never reopened: the
	// bound on reopening goes.
	c.Patch.Seal = to.Terminal() && !to.NeedsOperator()
}

// reopenable refuses a change that would reopen seen at now once its
// OpenUntil has come. A record without OpenUntil (written before
// retention) has an orders item that never expires, so nothing bounds it.
func reopenable(seen State, now time.Time) error {
	if seen.OpenUntil.IsZero() || now.Before(seen.OpenUntil) {
		return nil
	}
	return fmt.Errorf("order %s was created at %s and could be reopened until %s: %w", seen.OrderID,
		seen.CreatedAt.UTC().Format(time.RFC3339), seen.OpenUntil.UTC().Format(time.RFC3339), ErrPastRetention)
}
