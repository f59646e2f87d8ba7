package simulation

import (
	"context"
	"fmt"
	"time"

	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// store is the state store every actor is given: the in-memory store that
// passes the store's conformance suite, behind the port's faults, feeding
// the state table's stream with every write and keeping the ledger of
// claims and commits.
type store struct {
	*memstore.Store
	w      *World
	f      *faults
	stream *stream
	// last is each record as last written and when, for the stream's old
	// image and for stale reads.
	last map[string]written
	// claimed is the latest Attempt a claim of each order wrote.
	claimed map[string]int
	// staleCommits lists commits of an attempt older than a claim the
	// store had already written; lateCommits, replies committed after
	// their record's CompleteBy; earlyRecoveries, the Supervisor's writes
	// to a record whose CompleteBy had not passed.
	staleCommits, lateCommits, earlyRecoveries []string
	// forgedCommits are commits of a reply its step's Agent did not send.
	forgedCommits []string
	// tolerance is how far apart two clocks may be, plus a call's
	// latency: a commit decided in time may land that much late.
	tolerance time.Duration
	// transitions counts the committed changes by their Transition.
	transitions map[workflow.Transition]int
}

type written struct {
	before, after workflow.State
	at            time.Time
	had           bool
}

func newStore(w *World, f *faults, s *stream) *store {
	inner := memstore.New()
	inner.Clock = worldClock{w}
	return &store{Store: inner, w: w, f: f, stream: s, last: map[string]written{}, claimed: map[string]int{},
		transitions: map[workflow.Transition]int{}}
}

// CreateOrder is the transaction of the order, its record and its key.
func (s *store) CreateOrder(ctx context.Context, o workflow.Order, st workflow.State) error {
	return s.f.call(ctx, "ddb.CreateOrder", o.OrderID, true, func() error {
		if err := s.Store.CreateOrder(ctx, o, st); err != nil {
			return err
		}
		stored, err := s.Store.PeekState(ctx, st.OrderID)
		if err != nil {
			return err
		}
		s.wrote(workflow.State{}, false, stored)
		if stored.Attempt > 0 {
			s.claimed[stored.OrderID] = max(s.claimed[stored.OrderID], stored.Attempt)
		}
		return nil
	})
}

// Apply is one conditional write of a record.
func (s *store) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	var out workflow.State
	err := s.f.call(ctx, "ddb.Apply "+string(c.Transition), c.OrderID, true, func() error {
		before := s.last[c.OrderID].after
		st, err := s.Store.Apply(ctx, c)
		if err != nil {
			return err
		}
		now := s.w.now
		if c.CommitsReply() && now.After(before.CompleteBy.Add(s.tolerance)) {
			s.lateCommits = append(s.lateCommits, fmt.Sprintf("%s %s %v after CompleteBy", c.OrderID, c.Transition, now.Sub(before.CompleteBy)))
		}
		if p := procOf(ctx); p != nil && (p.name == "supervisor" || p.name == "deadline") && c.Transition != "" &&
			before.CompleteBy.After(now.Add(s.tolerance)) {
			s.earlyRecoveries = append(s.earlyRecoveries, fmt.Sprintf("%s %s by %s, %v before CompleteBy", c.OrderID, c.Transition, p.name, before.CompleteBy.Sub(now)))
		}
		if c.CommitsReply() && c.Fence.Attempt != nil && *c.Fence.Attempt < s.claimed[c.OrderID] {
			s.staleCommits = append(s.staleCommits, c.OrderID)
		}
		if c.Dispatch {
			s.claimed[c.OrderID] = max(s.claimed[c.OrderID], st.Attempt)
		}
		if f := forged(c); f != "" {
			s.forgedCommits = append(s.forgedCommits, f)
		}
		s.transitions[c.Transition]++
		prev := s.last[c.OrderID]
		s.wrote(prev.after, prev.had, st)
		out = st
		return nil
	})
	return out, err
}

// wrote feeds the stream and remembers the write.
func (s *store) wrote(before workflow.State, had bool, after workflow.State) {
	s.last[after.OrderID] = written{before: before, after: after, at: s.w.now, had: true}
	s.stream.append(before, had, after)
}

func (s *store) GetKey(ctx context.Context, owner, key string) (use workflow.KeyUse, err error) {
	err = s.f.call(ctx, "ddb.GetKey", key, false, func() error {
		use, err = s.Store.GetKey(ctx, owner, key)
		return err
	})
	return use, err
}

func (s *store) GetOrder(ctx context.Context, orderID string) (o workflow.Order, err error) {
	err = s.f.call(ctx, "ddb.GetOrder", orderID, false, func() error {
		o, err = s.Store.GetOrder(ctx, orderID)
		return err
	})
	return o, err
}

func (s *store) GetState(ctx context.Context, orderID string) (st workflow.State, err error) {
	err = s.f.call(ctx, "ddb.GetState", orderID, false, func() error {
		st, err = s.Store.GetState(ctx, orderID)
		return err
	})
	return st, err
}

// PeekState is eventually consistent: within a second of a write it may
// return the record as it was before (the DynamoDB Developer Guide's "Read
// consistency": an eventually consistent read "might not reflect the
// results of a recently completed write operation").
func (s *store) PeekState(ctx context.Context, orderID string) (st workflow.State, err error) {
	err = s.f.call(ctx, "ddb.PeekState", orderID, false, func() error {
		if l, ok := s.last[orderID]; ok && s.w.now.Sub(l.at) < time.Second && s.f.strike(StaleRead) {
			if !l.before.CreatedAt.IsZero() {
				st = l.before
				return nil
			}
		}
		st, err = s.Store.PeekState(ctx, orderID)
		return err
	})
	return st, err
}

func (s *store) Expired(ctx context.Context, now time.Time, limit int) (out []workflow.State, err error) {
	err = s.f.call(ctx, "ddb.Expired", "", false, func() error {
		out, err = s.Store.Expired(ctx, now, limit)
		return err
	})
	return out, err
}

func (s *store) CountOpen(ctx context.Context, limit int) (out statestore.OpenCount, err error) {
	err = s.f.call(ctx, "ddb.CountOpen", "", false, func() error {
		out, err = s.Store.CountOpen(ctx, limit)
		return err
	})
	return out, err
}

func (s *store) ListByState(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (out statestore.Page, err error) {
	err = s.f.call(ctx, "ddb.ListByState", string(state), false, func() error {
		out, err = s.Store.ListByState(ctx, state, limit, cursor)
		return err
	})
	return out, err
}

func (s *store) ListByOwner(ctx context.Context, owner string, limit int, cursor string) (out statestore.Page, err error) {
	err = s.f.call(ctx, "ddb.ListByOwner", owner, false, func() error {
		out, err = s.Store.ListByOwner(ctx, owner, limit, cursor)
		return err
	})
	return out, err
}

var _ statestore.Port = (*store)(nil)

// worldClock is the simulated time, exactly.
type worldClock struct{ w *World }

func (c worldClock) Now() time.Time { return c.w.now }

// skewed is an actor instance's clock: the simulated time, off by skew.
type skewed struct {
	w    *World
	skew time.Duration
}

func (c skewed) Now() time.Time { return c.w.now.Add(c.skew) }
