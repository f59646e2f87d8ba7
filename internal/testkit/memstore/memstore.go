// Package memstore is the state store in memory: statestore.Port without
// DynamoDB, for the tests of the actors. Its writes are the workflow's own
// meaning of a change (Fence.Admits, Patch.Apply), its queries answer with
// the indexes' projections (statestore.Projected), its listings take the
// real store's limits and cursors (statestore.Listing), and the conformance
// suite of internal/testkit/storetest runs against it and against DynamoDB
// Local alike, so it cannot drift from the real store.
package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

	mu     sync.Mutex
	orders map[string]workflow.Order
	states map[string]workflow.State
	writes int
}

var _ statestore.Port = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{orders: map[string]workflow.Order{}, states: map[string]workflow.State{}}
}

func (s *Store) fault(method string, c workflow.Change) error {
	if s.Fault == nil {
		return nil
	}
	return s.Fault(method, c)
}

// CreateOrder writes both or neither.
func (s *Store) CreateOrder(_ context.Context, o workflow.Order, st workflow.State) error {
	if err := s.fault("CreateOrder", workflow.Change{OrderID: o.OrderID}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, order := s.orders[o.OrderID]
	_, state := s.states[st.OrderID]
	if order || state {
		return fmt.Errorf("create order %s: %w", o.OrderID, workflow.ErrExists)
	}
	s.orders[o.OrderID] = o
	s.states[st.OrderID] = normalize(st)
	s.writes++
	return nil
}

// GetOrder reads an order.
func (s *Store) GetOrder(_ context.Context, orderID string) (workflow.Order, error) {
	return get(s, "GetOrder", "order", s.orders, orderID)
}

// GetState reads a state record.
func (s *Store) GetState(_ context.Context, orderID string) (workflow.State, error) {
	st, err := get(s, "GetState", "state", s.states, orderID)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[c.OrderID]
	if !ok || !c.Fence.Admits(st) {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, workflow.ErrStale)
	}
	if err := c.Patch.CheckSteps(len(st.Steps)); err != nil {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, err)
	}
	st = normalize(c.Patch.Apply(st))
	s.states[c.OrderID] = st
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
		if !st.InFlight || st.CompleteBy.After(now) || perShard[shard] >= limit {
			continue
		}
		perShard[shard]++
		out = append(out, clone(st))
	}
	return out, nil
}

// ListByState pages through the records in state, most recently changed
// first, with the real store's cursors.
func (s *Store) ListByState(_ context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
	return s.list(statestore.StateListing(state), limit, cursor, func() (rows []row) {
		for _, st := range s.states {
			if st.ProcessState == state {
				rows = append(rows, row{statestore.Position{OrderID: st.OrderID, Sort: st.UpdatedAt.UnixMilli()}, st, true})
			}
		}
		return rows
	})
}

// ListByOwner pages through the orders owner submitted, newest first.
func (s *Store) ListByOwner(_ context.Context, owner string, limit int, cursor string) (statestore.Page, error) {
	if owner == "" {
		return statestore.Page{}, errors.New("list by owner: no owner")
	}
	return s.list(statestore.OwnerListing(owner), limit, cursor, func() (rows []row) {
		for _, o := range s.orders {
			if o.Owner == owner {
				st, ok := s.states[o.OrderID]
				rows = append(rows, row{statestore.Position{OrderID: o.OrderID, Sort: o.CreatedAt.UnixMilli()}, st, ok})
			}
		}
		return rows
	})
}

// row is an entry of a listing's index: its position, and the state record
// the listing shows (ok false when there is none).
type row struct {
	pos statestore.Position
	st  workflow.State
	ok  bool
}

// list answers a listing as DynamoDB's query of its index does, over the
// rows of its partition (rows runs under mu): newest first, ties by
// descending ID, from after the cursor's position, at most limit records as
// ByState projects them; a full page has a next one, maybe empty.
func (s *Store) list(l statestore.Listing, limit int, cursor string, rows func() []row) (statestore.Page, error) {
	after, err := l.Start(limit, cursor)
	if err != nil {
		return statestore.Page{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := rows()
	slices.SortFunc(all, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.pos.Sort, a.pos.Sort), cmp.Compare(b.pos.OrderID, a.pos.OrderID))
	})
	var p statestore.Page
	for _, r := range all {
		if after != nil && !listedAfter(r.pos, *after) {
			continue
		}
		if len(p.States) == limit {
			break
		}
		if r.ok {
			st, err := statestore.Projected(r.st, statestore.ByStateIndex)
			if err != nil {
				return statestore.Page{}, err
			}
			p.States = append(p.States, st)
		}
		if len(p.States) == limit {
			p.Next = l.Next(r.pos)
		}
	}
	return p, nil
}

// listedAfter reports whether pos comes after c in a listing: older, or as
// old with a smaller ID.
func listedAfter(pos, c statestore.Position) bool {
	return pos.Sort < c.Sort || pos.Sort == c.Sort && pos.OrderID < c.OrderID
}

// Writes counts the writes that took effect, for tests that check a
// refused request wrote nothing.
func (s *Store) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Put stores st as it is, for a test that starts from a given record.
func (s *Store) Put(st workflow.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[st.OrderID] = normalize(st)
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
	st.CreatedAt, st.UpdatedAt = milli(st.CreatedAt), milli(st.UpdatedAt)
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
