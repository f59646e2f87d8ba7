// Package memstore is the state store in memory: statestore.Port without
// DynamoDB, for the tests of the actors, and the code steps' ledger
// (statestore.LedgerPort), for the tests of shared/codestep. Its writes are the workflow's own
// meaning of a change (Fence.Admits, Patch.Apply), its listings answer with
// what the real store reads (statestore.Summary) and keep the real
// store's index entries and read them through the real store's
// shards, merge and cursors (statestore.Listing), and the conformance
// suite of internal/testkit/storetest runs against it and against DynamoDB
// Local alike, so it cannot drift from the real store.
package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Store keeps orders and state records in memory. It is safe for concurrent
// use.
type Store struct {
	// Fault, when set, sees every call (the method's name, and for Apply
	// the change) before the store does, and fails it with the error it
	// returns: how a test makes DynamoDB throttle or time out.
	Fault func(method string, c workflow.Change) error
	// Clock, when set, is the time its reads take an item past its
	// ExpiresAt for gone at, as the real store's (statestore.WithClock);
	// nil is the system's.
	Clock clock.Clock

	mu     sync.Mutex
	orders map[string]workflow.Order
	states map[string]workflow.State
	// keys are the key items, by statestore.KeySlot.
	keys map[string]keyItem
	// listed is the ByState index: the entry of each record in a listed
	// state, keyed by when it entered the state.
	listed map[string]entry
	// ledger is the code steps' ledger, by statestore.LedgerKey.
	ledger map[string]statestore.LedgerEntry
	writes int
}

// keyItem is what the store keeps of an Idempotency-Key.
type keyItem struct {
	use       workflow.KeyUse
	expiresAt time.Time
}

// entry is a record's entry in a listing's index: its partition and its
// place in it.
type entry struct {
	part string
	statestore.Entry
}

var (
	_ statestore.Port       = (*Store)(nil)
	_ statestore.LedgerPort = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{orders: map[string]workflow.Order{}, states: map[string]workflow.State{}, listed: map[string]entry{}, keys: map[string]keyItem{},
		ledger: map[string]statestore.LedgerEntry{}}
}

func (s *Store) fault(method string, c workflow.Change) error {
	if s.Fault == nil {
		return nil
	}
	return s.Fault(method, c)
}

// CreateOrder writes all or nothing: the order, its record and its key.
func (s *Store) CreateOrder(_ context.Context, o workflow.Order, st workflow.State) error {
	if err := s.fault("CreateOrder", workflow.Change{OrderID: o.OrderID}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := ""
	if o.IdempotencyKey != "" {
		slot = statestore.KeySlot(o.OwnerKey(), o.IdempotencyKey)
		if _, ok := s.key(slot); ok {
			return fmt.Errorf("create order %s: %w", o.OrderID, workflow.ErrKeyUsed)
		}
	}
	_, order := s.orders[o.OrderID]
	_, state := s.states[st.OrderID]
	if order || state {
		return fmt.Errorf("create order %s: %w", o.OrderID, workflow.ErrExists)
	}
	if slot != "" {
		s.keys[slot] = keyItem{workflow.KeyUse{OrderID: o.OrderID, Owner: o.Owner, OwnerID: o.OwnerID, RequestHash: o.RequestHash},
			o.KeyExpiresAt.Truncate(time.Second)}
	}
	o.ExpiresAt = o.ExpiresAt.Truncate(time.Second) // as a TTL is stored
	o.KeyExpiresAt = time.Time{}                    // kept in the key item only
	s.orders[o.OrderID] = o
	s.states[st.OrderID] = normalize(st)
	s.list(st, st.UpdatedAt)
	s.writes++
	return nil
}

// list keeps the ByState entry of st, which entered its state at: it is in
// the index while in a listed state, under the time it entered it. The
// caller holds mu.
func (s *Store) list(st workflow.State, at time.Time) {
	if !st.ProcessState.Listed() {
		delete(s.listed, st.OrderID)
		return
	}
	s.listed[st.OrderID] = entry{statestore.ByStateKey(st.ProcessState, st.OrderID),
		statestore.Entry{OrderID: st.OrderID, Sort: statestore.SortKey(at, st.OrderID)}}
}

// now is the time of the store's reads.
func (s *Store) now() time.Time {
	if s.Clock == nil {
		return time.Now().UTC()
	}
	return s.Clock.Now()
}

// pastTTL reports whether a TTL (zero: none) has come at now.
func pastTTL(at, now time.Time) bool { return !at.IsZero() && !now.Before(at) }

// GetKey reads what the key of the owner matched on ownerKey made; a
// forgotten key made nothing.
func (s *Store) GetKey(_ context.Context, ownerKey, key string) (workflow.KeyUse, error) {
	slot := statestore.KeySlot(ownerKey, key)
	if err := s.fault("GetKey", workflow.Change{OrderID: slot}); err != nil {
		return workflow.KeyUse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.key(slot)
	if !ok {
		return workflow.KeyUse{}, fmt.Errorf("get key %s: %w", slot, workflow.ErrNotFound)
	}
	return k.use, nil
}

// key is what the orders table holds at a key's slot and still remembers:
// its key item, or the orders item an older release keyed by the slot
// (statestore's key.go). The caller holds mu.
func (s *Store) key(slot string) (keyItem, bool) {
	k, ok := s.keys[slot]
	if o, legacy := s.orders[slot]; !ok && legacy {
		k, ok = keyItem{workflow.KeyUse{OrderID: o.OrderID, Owner: o.Owner, OwnerID: o.OwnerID, RequestHash: o.RequestHash}, o.ExpiresAt}, true
	}
	return k, ok && !pastTTL(k.expiresAt, s.now())
}

// GetOrder reads an order; one past its ExpiresAt is gone.
func (s *Store) GetOrder(_ context.Context, orderID string) (workflow.Order, error) {
	o, err := get(s, "GetOrder", "order", s.orders, orderID)
	if err == nil && o.Expired(s.now()) {
		return workflow.Order{}, fmt.Errorf("get order %s: expired: %w", orderID, workflow.ErrNotFound)
	}
	return o, err
}

// GetState reads a state record; one past its ExpiresAt is gone.
func (s *Store) GetState(_ context.Context, orderID string) (workflow.State, error) {
	return s.state("GetState", orderID)
}

// PeekHead reads a state record without its steps; the store is never
// stale.
func (s *Store) PeekHead(_ context.Context, orderID string) (workflow.State, error) {
	st, err := s.state("PeekHead", orderID)
	st.Steps = nil
	return st, err
}

func (s *Store) state(method, orderID string) (workflow.State, error) {
	st, err := get(s, method, "state", s.states, orderID)
	if err == nil && st.Expired(s.now()) {
		return workflow.State{}, fmt.Errorf("get state %s: expired: %w", orderID, workflow.ErrNotFound)
	}
	return clone(st), err
}

// get reads one item of items, as GetItem does, after the fault of method.
func get[T any](s *Store, method, what string, items map[string]T, orderID string) (T, error) {
	var none T
	if err := s.fault(method, workflow.Change{OrderID: orderID}); err != nil {
		return none, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := items[orderID]
	if !ok {
		return none, fmt.Errorf("get %s %s: %w", what, orderID, workflow.ErrNotFound)
	}
	return v, nil
}

// Apply writes c when its fence admits the record: a missing record, like
// any the fence refuses, is workflow.ErrStale (DynamoDB's condition fails on
// a missing item too).
func (s *Store) Apply(_ context.Context, c workflow.Change) (workflow.State, error) {
	if err := s.fault("Apply", c); err != nil {
		return workflow.State{}, err
	}
	// The DynamoDB store needs to tell a change of state from the change
	// alone; it refuses one that cannot tell before it writes anything.
	if _, err := c.Moves(); err != nil {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before, ok := s.states[c.OrderID]
	if !ok || !c.Fence.Admits(before) {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, workflow.ErrStale)
	}
	if err := c.Patch.CheckSteps(len(before.Steps)); err != nil {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, err)
	}
	st := normalize(c.Patch.Apply(before))
	s.states[c.OrderID] = st
	// The orders item's TTL moves with the record, if it has one.
	if o, ok := s.orders[c.OrderID]; ok && c.MovesOrder() {
		o.ExpiresAt = c.Patch.OrderExpiresAt.Truncate(time.Second)
		if c.Patch.KeepOrder {
			o.ExpiresAt = time.Time{}
		}
		s.orders[c.OrderID] = o
	}
	if st.ProcessState != before.ProcessState {
		s.list(st, c.Patch.Now)
	}
	s.writes++
	return clone(st), nil
}

// Expired returns the due records of the Supervisor's index, whole,
// earliest deadline first, at most limit per shard.
func (s *Store) Expired(_ context.Context, now time.Time, limit int) ([]workflow.State, error) {
	if err := s.fault("Expired", workflow.Change{}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	perShard := map[string]int{}
	var out []workflow.State
	for _, st := range s.sorted(func(a, b workflow.State) int {
		return cmp.Or(a.CompleteBy.Compare(b.CompleteBy), cmp.Compare(a.OrderID, b.OrderID))
	}) {
		shard := statestore.ShardOf(st.OrderID)
		if !st.InFlight || st.CompleteBy.After(now) || st.Expired(s.now()) || perShard[shard] >= limit {
			continue
		}
		perShard[shard]++
		out = append(out, clone(st))
	}
	return out, nil
}

// CountOpen counts the open orders of each version from the entries of the
// two indexes the real store reads: the in-flight index (every record with
// InFlight) and ByState's entries under statestore.OpenStates. An order in
// both is one entry in each: the limit bounds entries, as the real store's
// does, and the counts take each order once.
func (s *Store) CountOpen(_ context.Context, limit int) (statestore.OpenCount, error) {
	if err := s.fault("CountOpen", workflow.Change{}); err != nil {
		return statestore.OpenCount{}, err
	}
	if limit < 1 || limit > statestore.MaxOpenLimit {
		return statestore.OpenCount{}, fmt.Errorf("count open orders: limit %d outside 1..%d", limit, statestore.MaxOpenLimit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var entries []string
	for id, st := range s.states {
		if st.InFlight {
			entries = append(entries, id)
		}
	}
	for id, e := range s.listed {
		for _, st := range statestore.OpenStates() {
			if e.part == statestore.ByStateKey(st, id) {
				entries = append(entries, id)
			}
		}
	}
	out := statestore.OpenCount{Versions: map[string]statestore.VersionCount{}, Truncated: len(entries) > limit}
	// Which entries a truncated read reaches is DynamoDB's to say; any
	// limit of them will do.
	slices.Sort(entries)
	ids := slices.Compact(entries[:min(len(entries), limit)])
	for _, id := range ids {
		if st := s.states[id]; !st.Expired(s.now()) {
			out.Add(st)
		}
	}
	return out, nil
}

// ListByState pages through the records in a listed state, newest entry
// into the state first, with the real store's shards, merge and cursors.
func (s *Store) ListByState(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
	return s.page(ctx, statestore.StateListing(state), limit, cursor, func() []entry {
		return slices.Collect(maps.Values(s.listed))
	})
}

// ListByOwner pages through the orders of the owner matched on ownerKey
// (workflow.OwnerKey), newest first.
func (s *Store) ListByOwner(ctx context.Context, ownerKey string, limit int, cursor string) (statestore.Page, error) {
	return s.page(ctx, statestore.OwnerListing(ownerKey), limit, cursor, func() (index []entry) {
		for id, o := range s.orders {
			if o.Owner != "" {
				index = append(index, entry{statestore.OwnerShard(o.OwnerKey(), id),
					statestore.Entry{OrderID: id, Sort: statestore.SortKey(o.CreatedAt, id)}})
			}
		}
		return index
	})
}

// page answers a listing from the entries of its index (index runs under
// mu): the listing queries each of its shards, as the real store queries
// DynamoDB, and the page shows the records as listed, in the index's order.
func (s *Store) page(ctx context.Context, l statestore.Listing, limit int, cursor string, index func() []entry) (statestore.Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := map[string][]statestore.Entry{}
	for _, e := range index() {
		parts[e.part] = append(parts[e.part], e.Entry)
	}
	for _, p := range parts {
		slices.SortFunc(p, func(a, b statestore.Entry) int { return cmp.Compare(b.Sort, a.Sort) })
	}
	ids, next, err := l.Read(ctx, limit, cursor, func(_ context.Context, part, after string, limit int) (statestore.Shard, error) {
		return query(parts[part], after, limit), nil
	})
	if err != nil {
		return statestore.Page{}, err
	}
	p := statestore.Page{Next: next}
	for _, id := range ids {
		if st, ok := s.states[id]; ok && !st.Expired(s.now()) {
			sum, err := statestore.Summary(st)
			if err != nil {
				return statestore.Page{}, err
			}
			p.States = append(p.States, sum)
		}
	}
	return p, nil
}

// query answers the query of a partition's entries (newest first) as
// DynamoDB does: those below after, at most limit, and more to come
// whenever the limit was reached, even if nothing follows (DynamoDB answers
// a LastEvaluatedKey then too).
func query(entries []statestore.Entry, after string, limit int) statestore.Shard {
	var sh statestore.Shard
	for _, e := range entries {
		if after != "" && e.Sort >= after {
			continue
		}
		if len(sh.Entries) == limit {
			break
		}
		sh.Entries = append(sh.Entries, e)
	}
	sh.More = len(sh.Entries) == limit
	return sh
}

// Writes counts the writes that took effect, for tests that check a
// refused request wrote nothing.
func (s *Store) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Put stores st as it is, for a test that starts from a given record; in
// a listed state, it is listed as having entered it at its UpdatedAt.
func (s *Store) Put(st workflow.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[st.OrderID] = normalize(st)
	s.list(st, st.UpdatedAt)
}

// sorted lists the records in the order cmp gives; the caller holds mu.
func (s *Store) sorted(order func(a, b workflow.State) int) []workflow.State {
	out := make([]workflow.State, 0, len(s.states))
	for _, st := range s.states {
		out = append(out, st)
	}
	slices.SortFunc(out, order)
	return out
}

// normalize keeps what DynamoDB keeps: times at the precision the store
// writes them (Unix milliseconds, in UTC), and JSON outputs as text.
func normalize(st workflow.State) workflow.State {
	st = clone(st)
	st.CompleteBy = time.UnixMilli(st.CompleteBy.UnixMilli()).UTC()
	st.CreatedAt, st.UpdatedAt, st.OpenUntil = milli(st.CreatedAt), milli(st.UpdatedAt), milli(st.OpenUntil)
	if !st.ExpiresAt.IsZero() {
		st.ExpiresAt = st.ExpiresAt.Truncate(time.Second).UTC() // a TTL is Unix seconds
	}
	for i := range st.Steps {
		r := &st.Steps[i]
		r.StartedAt, r.FinishedAt, r.CompensatedAt = milliPtr(r.StartedAt), milliPtr(r.FinishedAt), milliPtr(r.CompensatedAt)
	}
	return st
}

func milli(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

func milliPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := milli(*t)
	return &u
}

// clone copies st deeply enough that the caller cannot change what the
// store holds.
func clone(st workflow.State) workflow.State {
	st.Steps = slices.Clone(st.Steps)
	st.Input = slices.Clone(st.Input)
	for i := range st.Steps {
		st.Steps[i].Output = json.RawMessage(slices.Clone(st.Steps[i].Output))
		st.Steps[i].CompensationOutput = json.RawMessage(slices.Clone(st.Steps[i].CompensationOutput))
	}
	return st
}
