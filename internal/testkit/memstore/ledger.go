package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The ledger in memory: each method decides as the DynamoDB store's
// condition does, on the entry as it is at the store's time, and writes all
// or nothing.

// entryAt is the live entry of key at now: absent, or past its ExpiresAt
// (which the DynamoDB store's conditions and reads take for gone), is
// false. The caller holds mu.
func (s *Store) entryAt(key string, now time.Time) (statestore.LedgerEntry, bool) {
	e, ok := s.ledger[key]
	if !ok || pastTTL(e.ExpiresAt, now) {
		return statestore.LedgerEntry{}, false
	}
	return e, true
}

// Begin claims key for owner when it is absent, expired, or running with
// its lease ended; otherwise it answers the entry as it is, claimed when
// it is owner's own.
func (s *Store) Begin(_ context.Context, key, owner string, leaseUntil time.Time) (statestore.LedgerEntry, bool, error) {
	if err := s.fault("Begin", workflow.Change{OrderID: key}); err != nil {
		return statestore.LedgerEntry{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.entryAt(key, now); ok && !(e.State == statestore.LedgerRunning && !now.Before(e.LeaseUntil)) {
		// The owner's own claim, as the DynamoDB store recognizes a retry
		// whose answer was lost; what it displaced is not known.
		own := e.State == statestore.LedgerRunning && e.Owner == owner
		e = cloneEntry(e)
		e.TookOver = own
		return e, own, nil
	}
	_, took := s.ledger[key]
	e := statestore.LedgerEntry{Key: key, State: statestore.LedgerRunning, Owner: owner, LeaseUntil: milli(leaseUntil)}
	s.ledger[key] = e
	s.writes++
	e.TookOver = took
	return cloneEntry(e), true, nil
}

// Entry reads an entry; an absent or expired one is workflow.ErrNotFound.
func (s *Store) Entry(_ context.Context, key string) (statestore.LedgerEntry, error) {
	if err := s.fault("Entry", workflow.Change{OrderID: key}); err != nil {
		return statestore.LedgerEntry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entryAt(key, s.now())
	if !ok {
		return statestore.LedgerEntry{}, fmt.Errorf("get ledger entry %s: %w", key, workflow.ErrNotFound)
	}
	return cloneEntry(e), nil
}

// Finish ends owner's claim with its outcome; workflow.ErrStale when key
// is not running under owner, unless owner finished it so already. Like the DynamoDB store's condition, it does
// not look at the lease: a claim whose lease ended is still the owner's
// until another try takes it over.
func (s *Store) Finish(_ context.Context, key, owner string, out statestore.Outcome) error {
	if err := s.fault("Finish", workflow.Change{OrderID: key}); err != nil {
		return err
	}
	if err := statestore.CheckOutcome(out); err != nil {
		return fmt.Errorf("finish %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ledger[key]
	if ok && e.Owner == owner && e.State == finished(out) {
		// Its own write, as the DynamoDB store recognizes a retry whose
		// answer was lost.
		return nil
	}
	if !ok || e.State != statestore.LedgerRunning || e.Owner != owner {
		return fmt.Errorf("finish %s: %w", key, workflow.ErrStale)
	}
	e.State, e.LeaseUntil = statestore.LedgerDone, time.Time{}
	if out.Fault != nil {
		f := *out.Fault
		e.State, e.Fault = statestore.LedgerRejected, &f
	} else if len(out.Output) > 0 {
		e.Output = json.RawMessage(slices.Clone(out.Output))
	}
	s.ledger[key] = e
	s.writes++
	return nil
}

// Release ends owner's claim at once, keeping the entry with its lease
// ended; nil when key is absent.
func (s *Store) Release(_ context.Context, key, owner string) error {
	if err := s.fault("Release", workflow.Change{OrderID: key}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ledger[key]
	switch {
	case !ok:
		return nil
	case e.State != statestore.LedgerRunning || e.Owner != owner:
		return fmt.Errorf("release %s: %w", key, workflow.ErrStale)
	}
	e.LeaseUntil = time.Time{} // as a stored 0 reads back
	s.ledger[key] = e
	s.writes++
	return nil
}

// Tombstone marks key undone where no effect is on record; done, or
// running under a live lease, is workflow.ErrStale with the entry as it is.
func (s *Store) Tombstone(_ context.Context, key string) (statestore.LedgerEntry, error) {
	if err := s.fault("Tombstone", workflow.Change{OrderID: key}); err != nil {
		return statestore.LedgerEntry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.entryAt(key, now); ok && (e.State == statestore.LedgerDone || e.Live(now)) {
		return cloneEntry(e), fmt.Errorf("tombstone %s, %s: %w", key, e.State, workflow.ErrStale)
	}
	e := statestore.LedgerEntry{Key: key, State: statestore.LedgerUndone}
	s.ledger[key] = e
	s.writes++
	return cloneEntry(e), nil
}

// FinishUndo marks the effect undone and ends the undo's claim done, both
// or neither.
func (s *Store) FinishUndo(_ context.Context, effectKey, undoKey, owner string, output json.RawMessage) error {
	if err := s.fault("FinishUndo", workflow.Change{OrderID: undoKey}); err != nil {
		return err
	}
	if err := statestore.CheckOutcome(statestore.Outcome{Output: output}); err != nil {
		return fmt.Errorf("finish the undo %s: %w", undoKey, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	effect, eok := s.ledger[effectKey]
	undo, uok := s.ledger[undoKey]
	if !eok || effect.State != statestore.LedgerDone && effect.State != statestore.LedgerUndone ||
		!uok || undo.State != statestore.LedgerRunning || undo.Owner != owner {
		return fmt.Errorf("finish the undo %s of %s: %w", undoKey, effectKey, workflow.ErrStale)
	}
	effect.State, effect.LeaseUntil, effect.Output = statestore.LedgerUndone, time.Time{}, nil
	undo.State, undo.LeaseUntil = statestore.LedgerDone, time.Time{}
	if len(output) > 0 {
		undo.Output = json.RawMessage(slices.Clone(output))
	}
	s.ledger[effectKey], s.ledger[undoKey] = effect, undo
	s.writes++
	return nil
}

// Expire gives key's entry its TTL; nil, writing nothing, when it has
// none.
func (s *Store) Expire(_ context.Context, key string, at time.Time) error {
	if err := s.fault("Expire", workflow.Change{OrderID: key}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ledger[key]
	if !ok {
		return nil
	}
	e.ExpiresAt = seconds(at)
	s.ledger[key] = e
	s.writes++
	return nil
}

// finished is the state an outcome leaves.
func finished(out statestore.Outcome) statestore.LedgerState {
	if out.Fault != nil {
		return statestore.LedgerRejected
	}
	return statestore.LedgerDone
}

// seconds is a TTL as DynamoDB keeps it: Unix seconds.
func seconds(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0).UTC()
}

// cloneEntry copies e so the caller cannot change what the store holds.
func cloneEntry(e statestore.LedgerEntry) statestore.LedgerEntry {
	if len(e.Output) > 0 {
		e.Output = json.RawMessage(slices.Clone(e.Output))
	}
	if e.Fault != nil {
		f := *e.Fault
		e.Fault = &f
	}
	return e
}
