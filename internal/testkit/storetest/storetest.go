// Package storetest is the conformance suite of the state store's contract
// (statestore.Port). It runs the same cases against every implementation:
// the DynamoDB store on DynamoDB Local (shared/statestore's tests) and the
// in-memory store the actors' tests use (internal/testkit/memstore's). Each
// write must leave exactly what the workflow's own meaning of the change
// (workflow.Patch.Apply) says, and be refused exactly when its fence does
// not admit the record.
package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Open returns a fresh, empty store for one test, whose reads take the
// time from clk (an item past its ExpiresAt at clk's time is gone).
type Open func(t *testing.T, clk clock.Clock) statestore.Port

// t0 is when every case's first order is accepted.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// machine runs the shipped workflow under a policy with short, distinct
// timings.
var machine = workflow.Machine{Def: workflow.Reference(), Policy: workflow.Policy{
	MaxFailures: 2, ClaimTimeout: time.Minute, BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 2 * time.Minute,
	Retention: 30 * 24 * time.Hour,
}}

// Run runs every case against the stores open returns. Every case but
// those of retention reads at t0, long before anything expires.
func Run(t *testing.T, openAt Open) {
	open := func(t *testing.T) statestore.Port { return openAt(t, clock.NewFake(t0)) }
	t.Run("CreateAndRead", func(t *testing.T) { t.Parallel(); createAndRead(t, open(t)) })
	t.Run("LifecyclesApplyTheirPatches", func(t *testing.T) { t.Parallel(); lifecycles(t, open) })
	t.Run("FencesRefuseAndChangeNothing", func(t *testing.T) { t.Parallel(); fences(t, open(t)) })
	t.Run("OneOfManyClaimsWins", func(t *testing.T) { t.Parallel(); oneClaimWins(t, open(t)) })
	t.Run("ExpiredFindsDueRecordsOfTheIndex", func(t *testing.T) { t.Parallel(); expired(t, open(t)) })
	t.Run("ListByStatePages", func(t *testing.T) { t.Parallel(); listByState(t, open(t)) })
	t.Run("ListByStatePagesEveryShardExactly", func(t *testing.T) { t.Parallel(); listByStateShards(t, open(t)) })
	t.Run("ListByStateFollowsTheState", func(t *testing.T) { t.Parallel(); listFollowsState(t, open(t)) })
	t.Run("WaitingIsListedAndFoundDue", func(t *testing.T) { t.Parallel(); waiting(t, open(t)) })
	t.Run("ListByOwnerIsolatesOwners", func(t *testing.T) { t.Parallel(); listByOwner(t, open(t)) })
	t.Run("ListByOwnerPagesEveryShardExactly", func(t *testing.T) { t.Parallel(); listByOwnerShards(t, open(t)) })
	t.Run("OwnersAreMatchedOnTheirUniqueID", func(t *testing.T) { t.Parallel(); ownersByUniqueID(t, open(t)) })
	t.Run("ListingsPageThroughTies", func(t *testing.T) { t.Parallel(); listingTies(t, open(t)) })
	t.Run("RetentionIsWrittenWithTheChanges", func(t *testing.T) { t.Parallel(); retentionWritten(t, open(t)) })
	t.Run("OrdersItemMovesWithTheRecord", func(t *testing.T) { t.Parallel(); ordersItemMovesWithTheRecord(t, open(t)) })
	t.Run("KeysNameTheirOrderUntilForgotten", func(t *testing.T) { t.Parallel(); keys(t, openAt) })
	t.Run("ExpiredItemsReadAsGone", func(t *testing.T) { t.Parallel(); expiredGone(t, openAt) })
	t.Run("CountOpenPerVersionOncePerOrder", func(t *testing.T) { t.Parallel(); countOpen(t, openAt) })
	t.Run("CountOpenIsBounded", func(t *testing.T) { t.Parallel(); countOpenBound(t, open(t)) })
}

// otherVersion is the shipped workflow's next version: the same first
// step, so only the pin tells its changes apart.
var otherVersion = func() workflow.Machine {
	m := machine
	m.Def.Version++
	return m
}()

// plain runs a workflow of one step without an undo: a rejection leaves
// its order in Error, the state operators list most.
var plain = workflow.Machine{
	Def:    workflow.Definition{Name: "plain", Steps: []workflow.Step{{Name: "notify", Budget: 30 * time.Second}}},
	Policy: machine.Policy,
}

// newOrder is an order of owner accepted at at, Pending at step 0.
func newOrder(id, owner string, at time.Time) (workflow.Order, workflow.State) {
	return newOrderOf(machine.Def, id, owner, at)
}

func newOrderOf(def workflow.Definition, id, owner string, at time.Time) (workflow.Order, workflow.State) {
	o := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Owner: owner,
		Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}}, TotalCents: 100, RequestHash: "h-" + id, CreatedAt: at}
	st := workflow.NewState(id, def, json.RawMessage(`{"orderId":"`+id+`"}`), at, at.Add(time.Minute))
	st.Owner = owner
	return o, st
}

func create(t *testing.T, s statestore.Port, id, owner string, at time.Time) workflow.State {
	t.Helper()
	return createOf(t, s, machine.Def, id, owner, at)
}

func createOf(t *testing.T, s statestore.Port, def workflow.Definition, id, owner string, at time.Time) workflow.State {
	t.Helper()
	o, st := newOrderOf(def, id, owner, at)
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return get(t, s, id)
}

// add creates an order as createOf does, for the many orders of a case,
// without reading it back: it returns the record as created.
func add(t *testing.T, s statestore.Port, def workflow.Definition, id, owner string, at time.Time) workflow.State {
	o, st := newOrderOf(def, id, owner, at)
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Errorf("create %s: %v", id, err)
	}
	return st
}

// apply writes the changes events make of the record of id, in turn, each
// at its time, and returns the record as written last.
func apply(t *testing.T, s statestore.Port, id string, events ...timed) workflow.State {
	t.Helper()
	st := get(t, s, id)
	for _, e := range events {
		c := e.event(st, e.at)
		var err error
		if st, err = s.Apply(context.Background(), c); err != nil {
			t.Fatalf("%s of %s at %s: %v", c.Transition, id, e.at.Format(time.RFC3339Nano), err)
		}
	}
	return st
}

// timed is an event and the time it happens.
type timed struct {
	event event
	at    time.Time
}

func get(t *testing.T, s statestore.Port, id string) workflow.State {
	t.Helper()
	st, err := s.GetState(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return st
}

// Normal is st as a store keeps it: every time in Unix milliseconds, in
// UTC.
func Normal(st workflow.State) workflow.State {
	st.Steps = slices.Clone(st.Steps)
	st.CompleteBy = time.UnixMilli(st.CompleteBy.UnixMilli()).UTC()
	st.CreatedAt, st.UpdatedAt, st.OpenUntil = milli(st.CreatedAt), milli(st.UpdatedAt), milli(st.OpenUntil)
	if !st.ExpiresAt.IsZero() {
		st.ExpiresAt = time.Unix(st.ExpiresAt.Unix(), 0).UTC()
	}
	for i := range st.Steps {
		r := &st.Steps[i]
		for _, tp := range []**time.Time{&r.StartedAt, &r.FinishedAt, &r.CompensatedAt} {
			if *tp != nil {
				u := milli(**tp)
				*tp = &u
			}
		}
	}
	return st
}

func same(t *testing.T, what string, got, want workflow.State) {
	t.Helper()
	if g, w := Normal(got), Normal(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func createAndRead(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	o, st := newOrder("o-create", "owner-a", t0)
	if err := s.CreateOrder(ctx, o, st); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOrder(ctx, "o-create")
	if err != nil || !reflect.DeepEqual(got.Items, o.Items) || got.Owner != "owner-a" || !got.CreatedAt.Equal(t0) || got.RequestHash != o.RequestHash {
		t.Fatalf("GetOrder = %+v, %v", got, err)
	}
	same(t, "the state as created", get(t, s, "o-create"), st)
	other, otherState := newOrder("o-create", "owner-b", t0.Add(time.Second))
	if err := s.CreateOrder(ctx, other, otherState); !errors.Is(err, workflow.ErrExists) {
		t.Fatalf("a second create of the ID: %v, want ErrExists", err)
	}
	if got, _ := s.GetOrder(ctx, "o-create"); got.Owner != "owner-a" {
		t.Fatal("the order was overwritten")
	}
	if _, err := s.GetState(ctx, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("GetState of a missing order: %v", err)
	}
	if peeked, err := s.PeekHead(ctx, "o-create"); err != nil {
		t.Fatalf("PeekHead: %v", err)
	} else {
		head := st
		head.Steps = nil
		same(t, "the state as peeked", peeked, head)
	}
	if _, err := s.PeekHead(ctx, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("PeekHead of a missing order: %v", err)
	}
	if _, err := s.GetOrder(ctx, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("GetOrder of a missing order: %v", err)
	}
}

// event makes the next change of a record at now.
type event func(s workflow.State, now time.Time) workflow.Change

func claim(s workflow.State, now time.Time) workflow.Change {
	return machine.Claim(s.OrderID, s.StepIndex, s.ProcessState == workflow.CompensationPending, "scheduler/x", now)
}

func complete(s workflow.State, now time.Time) workflow.Change {
	if s.ProcessState == workflow.Compensating {
		return machine.UndoCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{"undone":true}`), workflow.State{}, "scheduler/y", now)
	}
	return machine.StepCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{"step":"`+s.Step+`"}`), "scheduler/y", now)
}

func reject(s workflow.State, now time.Time) workflow.Change {
	if s.ProcessState == workflow.Compensating {
		return machine.UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "compensation rejected", false, workflow.State{}, now)
	}
	return machine.StepRejected(s.OrderID, s.StepIndex, s.Attempt, "rejected: no", false, "scheduler/z", now)
}

func expire(s workflow.State, _ time.Time) workflow.Change {
	c, ok := machine.Expired(s, s.CompleteBy)
	if !ok {
		panic(fmt.Sprintf("%s is not due", s.ProcessState))
	}
	return c
}

func refuseDispatch(s workflow.State, now time.Time) workflow.Change {
	return machine.DispatchFailed(s, now, "AccessDenied")
}

func alertSent(s workflow.State, now time.Time) workflow.Change {
	return workflow.Machine{}.AlertSent(s.OrderID, s.Attempt, s.ProcessState, now)
}

func cancel(s workflow.State, now time.Time) workflow.Change {
	c, err := machine.Cancel(s, now, now.Add(time.Minute))
	if err != nil {
		panic(err)
	}
	return c
}

func resubmit(s workflow.State, now time.Time) workflow.Change {
	c, err := machine.Resubmit(s, now)
	if err != nil {
		panic(err)
	}
	return c
}

// lifecycles drives orders through every kind of change; after each write
// the store's answer and a fresh read equal the patch applied to the record
// before.
func lifecycles(t *testing.T, open func(*testing.T) statestore.Port) {
	for _, tc := range []struct {
		name   string
		events []event
		final  workflow.ProcessState
	}{
		{"processed", []event{claim, complete, complete}, workflow.Processed},
		{"rejected, undone", []event{claim, complete, reject, complete, complete}, workflow.Compensated},
		{"undo rejected, alert sent, resubmitted, undone", []event{claim, reject, reject, alertSent, resubmit, claim, complete}, workflow.Compensated},
		{"timed out, retried, given up, undone", []event{claim, expire, claim, expire, claim, complete}, workflow.Compensated},
		{"unclaimed, requeued", []event{expire, expire, claim, complete, complete}, workflow.Processed},
		{"dispatch refused, then given up", []event{claim, refuseDispatch, claim, refuseDispatch, claim, complete}, workflow.Compensated},
		{"cancelled while running", []event{claim, cancel, claim, complete}, workflow.Compensated},
		{"cancelled before a claim", []event{cancel}, workflow.Cancelled},
		{"rejected at the last step, its undo timed out", []event{claim, complete, reject, expire, claim, complete, complete}, workflow.Compensated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			before := create(t, s, "o-life", "owner-a", t0)
			now := t0
			for i, e := range tc.events {
				now = now.Add(time.Second)
				c := e(before, now)
				got, err := s.Apply(ctx, c)
				if err != nil {
					t.Fatalf("event %d (%s): %v", i, c.Transition, err)
				}
				want := c.Patch.Apply(before)
				same(t, fmt.Sprintf("event %d (%s) as returned", i, c.Transition), got, want)
				same(t, fmt.Sprintf("event %d (%s) as read", i, c.Transition), get(t, s, "o-life"), want)
				before = get(t, s, "o-life")
				if now.Before(before.UpdatedAt) {
					now = before.UpdatedAt
				}
			}
			if before.ProcessState != tc.final {
				t.Fatalf("ended %s, want %s", before.ProcessState, tc.final)
			}
		})
	}
}

// fences: every change a fence refuses fails with ErrStale and writes
// nothing.
func fences(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	create(t, s, "o-fence", "owner-a", t0)
	running, err := s.Apply(ctx, claim(get(t, s, "o-fence"), t0.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	expiredView := running
	expiredView.CompleteBy = running.CompleteBy.Add(-time.Second)
	recovery, _ := machine.Expired(expiredView, running.CompleteBy)
	for _, tc := range []struct {
		name string
		c    workflow.Change
	}{
		{"a reply of an older attempt", machine.StepCompleted("o-fence", 0, running.Attempt-1, nil, "s", t0.Add(2*time.Second))},
		{"a reply after CompleteBy", machine.StepCompleted("o-fence", 0, running.Attempt, nil, "s", running.CompleteBy)},
		{"a reply for another step", machine.StepCompleted("o-fence", 1, running.Attempt, nil, "s", t0.Add(2*time.Second))},
		{"a claim of a claimed step", machine.Claim("o-fence", 0, false, "other", t0.Add(2*time.Second))},
		{"an undo reply while the step runs", machine.UndoCompleted("o-fence", 0, running.Attempt, nil, workflow.State{}, "s", t0.Add(2*time.Second))},
		{"a recovery of a deadline that moved", recovery},
		{"an alert confirmation of a record that owes none", workflow.Machine{}.AlertSent("o-fence", running.Attempt, running.ProcessState, t0.Add(2*time.Second))},
		{"a change of a missing order", machine.Claim("o-missing", 0, false, "s", t0)},
		// A message naming another version than the order's: its decision
		// was made by the wrong definition.
		{"a reply decided by another workflow version", otherVersion.StepCompleted("o-fence", 0, running.Attempt, nil, "s", t0.Add(2*time.Second))},
		// No fence at all still needs the record: a store must never create
		// a partial one.
		{"an unfenced change of a missing order", workflow.Change{OrderID: "o-missing", Patch: workflow.Patch{Now: t0, NextAttempt: true}}},
	} {
		if tc.c.Fence.Admits(running) && tc.c.OrderID == "o-fence" {
			t.Fatalf("%s: the test is wrong, its fence admits the record", tc.name)
		}
		if _, err := s.Apply(ctx, tc.c); !errors.Is(err, workflow.ErrStale) {
			t.Errorf("%s: %v, want ErrStale", tc.name, err)
		}
	}
	// A patch naming a step the record lacks, or one step twice, is a bug:
	// an error that is not ErrStale, and nothing written.
	for _, steps := range [][]workflow.StepPatch{
		{{Index: len(running.Steps), Failed: true}},
		{{Index: -1, Failed: true}},
		{{Index: 0, Failed: true}, {Index: 0, Claimed: true}},
	} {
		c := workflow.Change{OrderID: "o-fence", Patch: workflow.Patch{Now: t0, Steps: steps}}
		if _, err := s.Apply(ctx, c); err == nil || errors.Is(err, workflow.ErrStale) {
			t.Errorf("a patch of steps %+v: %v, want a refusal that is not ErrStale", steps, err)
		}
	}
	// So is a state set under a fence that does not tell whether the
	// record is in it already: the store could not tell whether its
	// listing entry moves.
	for _, in := range [][]workflow.ProcessState{nil, {workflow.Processing, workflow.Error}} {
		c := workflow.Change{OrderID: "o-fence", Fence: workflow.Fence{In: in}, Patch: workflow.Patch{Now: t0, State: workflow.Error}}
		if _, err := s.Apply(ctx, c); !errors.Is(err, workflow.ErrBadPatch) {
			t.Errorf("state Error under a fence of %v: %v, want ErrBadPatch", in, err)
		}
	}
	same(t, "the record after the refused changes", get(t, s, "o-fence"), running)
	if _, err := s.GetState(ctx, "o-missing"); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("the missing order after the refused changes: %v, want ErrNotFound", err)
	}
}

// oneClaimWins: of many Schedulers claiming one step at once, one wins.
func oneClaimWins(t *testing.T, s statestore.Port) {
	create(t, s, "o-race", "owner-a", t0)
	seen := get(t, s, "o-race")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := machine.Claim("o-race", 0, false, fmt.Sprintf("scheduler/%d", i), t0.Add(time.Second))
			_, err := s.Apply(context.Background(), c)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, workflow.ErrStale):
				t.Errorf("claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := get(t, s, "o-race"); wins.Load() != 1 || got.Attempt != seen.Attempt+1 {
		t.Fatalf("%d claims won, attempt %d", wins.Load(), got.Attempt)
	}
}

// expired: the due records the Supervisor watches, whole, and no others.
func expired(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	for i := range 12 {
		create(t, s, fmt.Sprintf("o-due-%02d", i), "owner-a", t0.Add(time.Duration(i)*time.Second))
	}
	// One not yet due, one Processed (out of the index).
	create(t, s, "o-later", "owner-a", t0.Add(time.Hour))
	done := create(t, s, "o-done", "owner-a", t0)
	for _, e := range []event{claim, complete, complete} {
		c := e(done, done.UpdatedAt.Add(time.Second))
		var err error
		if done, err = s.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(2 * time.Minute)
	due, err := s.Expired(ctx, now, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range due {
		ids = append(ids, st.OrderID)
		if st.CompleteBy.After(now) || !st.InFlight || st.ProcessState != workflow.Pending || len(st.Steps) == 0 || st.Input == nil {
			t.Errorf("due record %+v: want Pending, in flight, whole (steps, input)", st)
		}
	}
	slices.Sort(ids)
	if len(ids) != 12 || ids[0] != "o-due-00" || ids[11] != "o-due-11" {
		t.Fatalf("due %v", ids)
	}
	// At most limit per shard.
	one, err := s.Expired(ctx, now, 1)
	if err != nil || len(one) == 0 || len(one) > statestore.Shards {
		t.Fatalf("limit 1 per shard gave %d records, %v", len(one), err)
	}
}

// listByState: a listing of a listed state, by the time its records
// entered it, in pages; a cursor of another listing and a state that is not
// listed are refused.
func listByState(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("o-list-%d", i)
		// Created in the reverse order they are cancelled: the listing is by
		// the time they entered the state.
		create(t, s, id, "owner-a", t0.Add(time.Duration(7-i)*time.Second))
		apply(t, s, id, timed{cancel, t0.Add(time.Minute + time.Duration(i)*time.Second)})
		want = append([]string{id}, want...) // newest entry first
	}
	create(t, s, "o-list-pending", "owner-a", t0)
	got := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByState(ctx, workflow.Cancelled, 3, cursor)
	}, func(st workflow.State) {
		if st.Input != nil || len(st.Steps) != 0 || st.ProcessState != workflow.Cancelled || st.Owner != "" {
			t.Errorf("listed %+v: want the summary only", st)
		}
	})
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	page, err := s.ListByState(ctx, workflow.Cancelled, 2, "")
	if err != nil || page.Next == "" {
		t.Fatalf("first page %+v, %v", page, err)
	}
	if _, err := s.ListByState(ctx, workflow.Error, 2, page.Next); !errors.Is(err, statestore.ErrBadCursor) {
		t.Errorf("a cursor of another state's listing: %v", err)
	}
	if _, err := s.ListByState(ctx, workflow.Cancelled, 2, "not a cursor"); !errors.Is(err, statestore.ErrBadCursor) {
		t.Errorf("a garbled cursor: %v", err)
	}
	if empty, err := s.ListByState(ctx, workflow.Error, 5, ""); err != nil || len(empty.States) != 0 || empty.Next != "" {
		t.Errorf("an empty listing: %+v, %v", empty, err)
	}
	for _, st := range workflow.ProcessStates() {
		if _, err := s.ListByState(ctx, st, 5, ""); st.Listed() == errors.Is(err, statestore.ErrNotListed) {
			t.Errorf("a listing of %s: %v", st, err)
		}
	}
}

// many is n records of a listing, ten to a millisecond at different
// microseconds within it, from start: their IDs, and when each was listed.
func many(prefix string, n int, start time.Time) (ids []string, at []time.Time) {
	for i := range n {
		ids = append(ids, fmt.Sprintf("%s-%03d", prefix, i))
		at = append(at, start.Add(time.Duration(i/10)*time.Millisecond+time.Duration(i%10)*70*time.Microsecond))
	}
	return ids, at
}

// newestFirst is the order of a listing of ids listed at at: newest
// millisecond first, ties by order ID descending (the sort key's order).
func newestFirst(ids []string, at []time.Time) []string {
	i := make([]int, len(ids))
	for k := range i {
		i[k] = k
	}
	slices.SortFunc(i, func(a, b int) int {
		return cmp.Or(cmp.Compare(at[b].UnixMilli(), at[a].UnixMilli()), cmp.Compare(ids[b], ids[a]))
	})
	out := make([]string, len(i))
	for k, j := range i {
		out[k] = ids[j]
	}
	return out
}

// listByStateShards: 250 records in Error, in every shard, ten to a
// millisecond, paged seven at a time: each once, newest entry first.
func listByStateShards(t *testing.T, s statestore.Port) {
	// They enter Error within the budget of their claim at t0+1s.
	ids, at := many("o-err", 250, t0.Add(2*time.Second))
	parallel(t, len(ids), func(i int) {
		st := add(t, s, plain.Def, ids[i], "owner-a", t0)
		for _, e := range []timed{{plainClaim, t0.Add(time.Second)}, {rejectPlain, at[i]}} {
			var err error
			if st, err = s.Apply(context.Background(), e.event(st, e.at)); err != nil {
				t.Errorf("order %s: %v", ids[i], err)
				return
			}
		}
	})
	shards := map[int]bool{}
	for _, id := range ids {
		shards[statestore.ListShardOf(id)] = true
	}
	if len(shards) != statestore.ListShards {
		t.Fatalf("the records are in %d of %d shards", len(shards), statestore.ListShards)
	}
	got := listPages(t, 7, func(cursor string) (statestore.Page, error) {
		return s.ListByState(context.Background(), workflow.Error, 7, cursor)
	}, func(st workflow.State) {
		if st.ProcessState != workflow.Error {
			t.Errorf("listed %s in %s", st.OrderID, st.ProcessState)
		}
	})
	if want := newestFirst(ids, at); !slices.Equal(got, want) {
		t.Fatalf("listed %d records %v,\nwant %d %v", len(got), got, len(want), want)
	}
}

func rejectPlain(s workflow.State, now time.Time) workflow.Change {
	return plain.StepRejected(s.OrderID, s.StepIndex, s.Attempt, "rejected: no", false, "scheduler/z", now)
}

func resubmitPlain(s workflow.State, now time.Time) workflow.Change {
	c, err := plain.Resubmit(s, now)
	if err != nil {
		panic(err)
	}
	return c
}

// listFollowsState: a record is listed by the time it entered its state;
// a write that keeps the state does not move it, an operator's retry takes
// it out of the listing, and failing again puts it back, under its new
// time. A record created in a listed state is listed from the start.
func listFollowsState(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	for i, id := range []string{"o-a", "o-b", "o-c"} {
		createOf(t, s, plain.Def, id, "owner-a", t0)
		apply(t, s, id, timed{plainClaim, t0.Add(time.Second)}, timed{rejectPlain, t0.Add(time.Duration(2+i) * time.Second)})
	}
	errors := func() []string {
		return listAll(t, func(cursor string) (statestore.Page, error) {
			return s.ListByState(ctx, workflow.Error, 2, cursor)
		}, func(workflow.State) {})
	}
	check := func(what string, want ...string) {
		t.Helper()
		if got := errors(); !slices.Equal(got, want) {
			t.Fatalf("%s: Error lists %v, want %v", what, got, want)
		}
	}
	check("failed in turn", "o-c", "o-b", "o-a")
	apply(t, s, "o-a", timed{alertSent, t0.Add(time.Minute)})
	check("o-a's alert confirmed later, in Error still", "o-c", "o-b", "o-a")
	apply(t, s, "o-a", timed{resubmitPlain, t0.Add(2 * time.Minute)})
	check("o-a retried", "o-c", "o-b")
	apply(t, s, "o-a", timed{plainClaim, t0.Add(3 * time.Minute)}, timed{rejectPlain, t0.Add(3*time.Minute + time.Second)})
	check("o-a failed again", "o-a", "o-c", "o-b")

	o, st := newOrderOf(plain.Def, "o-born", "owner-a", t0.Add(time.Hour))
	st.ProcessState = workflow.Error
	if err := s.CreateOrder(ctx, o, st); err != nil {
		t.Fatal(err)
	}
	check("o-born created in Error", "o-born", "o-a", "o-c", "o-b")
}

// waits runs a workflow whose first step waits an hour, once, after its
// first failure.
var waits = workflow.Machine{Policy: machine.Policy, Def: workflow.Definition{Name: "waits", Version: 1, Steps: []workflow.Step{
	{Name: "reserve-inventory", Budget: 30 * time.Second, Compensable: true, Retry: &workflow.Retry{MaxFailures: ptr(1),
		OnExhausted: workflow.ExhaustedWait, Wait: time.Hour, WaitRounds: 1}},
	{Name: "charge-payment", Budget: 30 * time.Second, Compensable: true},
}}}

func ptr[T any](v T) *T { return &v }

// waiting: a step that waits writes exactly what its changes say (its
// WaitRound, and removes it at the next step), is listed under Waiting
// while it waits, is found due by the Supervisor's query when its wait is
// over, and leaves the listing when it is handed back.
func waiting(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	before := createOf(t, s, waits.Def, "o-wait", "owner-a", t0)
	at := t0
	step := func(c workflow.Change, ok bool) workflow.State {
		t.Helper()
		if !ok {
			t.Fatalf("%s record not due", before.ProcessState)
		}
		got, err := s.Apply(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Transition, err)
		}
		same(t, string(c.Transition), got, c.Patch.Apply(before))
		same(t, string(c.Transition)+" as read", get(t, s, "o-wait"), c.Patch.Apply(before))
		before = got
		return got
	}
	listed := func() []string {
		return listAll(t, func(cursor string) (statestore.Page, error) { return s.ListByState(ctx, workflow.Waiting, 5, cursor) }, func(workflow.State) {})
	}
	st := step(waits.Claim("o-wait", 0, false, "scheduler/x", at.Add(time.Second)), true)
	st = step(waits.Expired(st, st.CompleteBy))
	if st.ProcessState != workflow.Waiting || st.WaitRound != 1 || !st.CompleteBy.Equal(before.UpdatedAt.Add(time.Hour)) {
		t.Fatalf("after the first failure: %+v", st)
	}
	if got := listed(); !slices.Equal(got, []string{"o-wait"}) {
		t.Fatalf("Waiting lists %v", got)
	}
	due := func(now time.Time) bool {
		found, err := s.Expired(ctx, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(found, func(f workflow.State) bool { return f.OrderID == "o-wait" })
	}
	if due(st.CompleteBy.Add(-time.Millisecond)) || !due(st.CompleteBy) {
		t.Fatal("the waiting record is not found due exactly when its wait is over")
	}
	st = step(waits.Expired(st, st.CompleteBy))
	if st.ProcessState != workflow.Pending || len(listed()) != 0 {
		t.Fatalf("after the wait: %s, listed %v", st.ProcessState, listed())
	}
	st = step(waits.Claim("o-wait", 0, false, "scheduler/x", st.UpdatedAt.Add(time.Second)), true)
	st = step(waits.StepCompleted("o-wait", 0, st.Attempt, json.RawMessage(`{}`), "scheduler/x", st.UpdatedAt.Add(time.Second)), true)
	if st.WaitRound != 0 || st.StepIndex != 1 {
		t.Fatalf("at the next step: %+v", st)
	}
}

func listByOwner(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	for i := range 5 {
		create(t, s, fmt.Sprintf("o-a-%d", i), "owner-a", t0.Add(time.Duration(i)*time.Second))
		create(t, s, fmt.Sprintf("o-b-%d", i), "owner-b", t0.Add(time.Duration(i)*time.Second+time.Millisecond))
	}
	got := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByOwner(ctx, "owner-a", 2, cursor)
	}, func(st workflow.State) {
		if st.Owner != "" && st.Owner != "owner-a" {
			t.Errorf("owner-a's listing shows %s of %s", st.OrderID, st.Owner)
		}
	})
	if want := []string{"o-a-4", "o-a-3", "o-a-2", "o-a-1", "o-a-0"}; !slices.Equal(got, want) {
		t.Fatalf("owner-a lists %v, want %v", got, want)
	}
	page, err := s.ListByOwner(ctx, "owner-a", 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListByOwner(ctx, "owner-b", 2, page.Next); !errors.Is(err, statestore.ErrBadCursor) {
		t.Errorf("owner-a's cursor used by owner-b: %v", err)
	}
	if none, err := s.ListByOwner(ctx, "owner-c", 5, ""); err != nil || len(none.States) != 0 {
		t.Errorf("a caller with no orders lists %+v, %v", none, err)
	}
}

// ownersByUniqueID: two principals of one ARN, the second created anew
// under the first one's name, and an order of that ARN written before
// unique IDs were recorded, are three owners: each lists only its orders,
// refuses the others' cursors, and has keys of its own, while the orders
// and records keep the ARN and the ID as written.
func ownersByUniqueID(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	const arn, before, after = "arn:aws:iam::123456789012:user/re", "AIDAPREDECESSOR00001", "AIDASUCCESSOR0000001"
	keyed := func(id, ownerID, key string, at time.Time) {
		t.Helper()
		o, st := newOrder(id, arn, at)
		o.OwnerID, st.OwnerID = ownerID, ownerID
		if key != "" {
			o.IdempotencyKey, o.KeyExpiresAt = key, at.Add(machine.Policy.Retention)
		}
		if err := s.CreateOrder(ctx, o, st); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	keyed("o-u-old-0", before, "k", t0)
	keyed("o-u-old-1", before, "", t0.Add(time.Second))
	keyed("o-u-new-0", after, "k", t0.Add(2*time.Second))
	keyed("o-u-legacy", "", "k", t0.Add(3*time.Second))
	if o, err := s.GetOrder(ctx, "o-u-old-0"); err != nil || o.Owner != arn || o.OwnerID != before {
		t.Fatalf("GetOrder = %+v, %v; want owner %s, %s", o, err, arn, before)
	}
	if st := get(t, s, "o-u-new-0"); st.Owner != arn || st.OwnerID != after || st.OwnerKey() != after {
		t.Fatalf("the record's owner %q, %q", st.Owner, st.OwnerID)
	}
	for key, want := range map[string][]string{before: {"o-u-old-1", "o-u-old-0"}, after: {"o-u-new-0"}, arn: {"o-u-legacy"}} {
		got := listAll(t, func(cursor string) (statestore.Page, error) { return s.ListByOwner(ctx, key, 1, cursor) }, func(workflow.State) {})
		if !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want %v", key, got, want)
		}
		if k, err := s.GetKey(ctx, key, "k"); err != nil || k.OrderID != want[len(want)-1] || k.Owner != arn || k.OwnerKey() != key {
			t.Errorf("%s's key names %+v, %v", key, k, err)
		}
	}
	page, err := s.ListByOwner(ctx, before, 1, "")
	if err != nil || page.Next == "" {
		t.Fatalf("the first page of %s: %+v, %v", before, page, err)
	}
	for _, other := range []string{after, arn} {
		if _, err := s.ListByOwner(ctx, other, 1, page.Next); !errors.Is(err, statestore.ErrBadCursor) {
			t.Errorf("%s's cursor used by %s: %v", before, other, err)
		}
	}
}

// listByOwnerShards: 250 orders of one owner, ten to a millisecond, among
// another owner's, paged seven at a time: each once, newest first.
func listByOwnerShards(t *testing.T, s statestore.Port) {
	ids, at := many("o-own", 250, t0)
	parallel(t, len(ids), func(i int) {
		add(t, s, machine.Def, ids[i], "owner-s", at[i])
		if i%5 == 0 {
			add(t, s, machine.Def, fmt.Sprintf("o-else-%03d", i), "owner-else", at[i])
		}
	})
	got := listPages(t, 7, func(cursor string) (statestore.Page, error) {
		return s.ListByOwner(context.Background(), "owner-s", 7, cursor)
	}, func(workflow.State) {})
	if want := newestFirst(ids, at); !slices.Equal(got, want) {
		t.Fatalf("listed %d orders %v,\nwant %d %v", len(got), got, len(want), want)
	}
}

// listingTies: records whose sort key is the same millisecond, though their
// times differ within it, are each listed once, a page of one at a time,
// by order ID descending.
func listingTies(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	var want []string
	for i := range 4 {
		id := fmt.Sprintf("o-tie-%d", i)
		at := t0.Add(time.Duration(3-i) * 100 * time.Microsecond)
		create(t, s, id, "owner-t", at)
		apply(t, s, id, timed{cancel, at.Add(time.Second)})
		want = append([]string{id}, want...)
	}
	byState := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByState(ctx, workflow.Cancelled, 1, cursor)
	}, func(workflow.State) {})
	byOwner := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByOwner(ctx, "owner-t", 1, cursor)
	}, func(workflow.State) {})
	for _, got := range [][]string{byState, byOwner} {
		if !slices.Equal(got, want) {
			t.Errorf("listed %v, want %v", got, want)
		}
	}
}

// parallel runs f(0..n-1), a few at a time: the many records of a case are
// written faster than one by one, and not all at once.
func parallel(t *testing.T, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			f(i)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// listAll pages through a short listing from its first page, checks every
// record it shows, and returns their IDs in order.
func listAll(t *testing.T, list func(cursor string) (statestore.Page, error), check func(workflow.State)) []string {
	t.Helper()
	return listPages(t, statestore.MaxPage, list, check)
}

// listPages pages through a listing of pages of at most limit records, as
// listAll does. A listing of n records ends within n/limit + 2 pages: every
// page but the last two is full (a shard answering its limit exactly says
// more may follow, so an empty page may end the listing).
func listPages(t *testing.T, limit int, list func(cursor string) (statestore.Page, error), check func(workflow.State)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		page, err := list(cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.States) > limit {
			t.Fatalf("a page of %d records, over its limit of %d", len(page.States), limit)
		}
		for _, st := range page.States {
			ids = append(ids, st.OrderID)
			check(st)
		}
		if cursor = page.Next; cursor == "" {
			return ids
		}
	}
	t.Fatalf("paging does not end after 100 pages: %v", ids)
	return nil
}

// milli is t at the store's precision; the zero time stays zero.
func milli(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// accept creates an order as the Submission does (workflow.Machine.Accept,
// Machine.OrderExpiresAt) with m at at, and returns its record as read.
func accept(t *testing.T, s statestore.Port, m workflow.Machine, id, owner string, at time.Time) workflow.State {
	t.Helper()
	o, _ := newOrderOf(m.Def, id, owner, at)
	o.ExpiresAt = m.OrderExpiresAt(at)
	st := m.Accept(id, json.RawMessage(`{"orderId":"`+id+`"}`), "submission/x", at)
	st.Owner = owner
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	got := get(t, s, id)
	same(t, "the accepted record", got, st)
	return got
}

// retentionWritten: the order keeps its ExpiresAt and the record its
// OpenUntil from the creation; an order in Error does not expire; its
// alert confirmed keeps its orders item for good; a resubmission long after
// gives the record a new OpenUntil and the orders item a new TTL in the
// same write; and the write that ends the order for good sets the record's
// ExpiresAt (its answer shows it, so it is that one write), before the
// orders item's.
func retentionWritten(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	st := accept(t, s, plain, "o-ttl", "owner-a", t0.Add(123*time.Millisecond))
	orderTTL := func(want time.Time) {
		t.Helper()
		o, err := s.GetOrder(ctx, "o-ttl")
		if err != nil || !o.ExpiresAt.Equal(want) {
			t.Fatalf("order ExpiresAt %v, %v; want %v", o.ExpiresAt, err, want)
		}
	}
	orderTTL(plain.OrderExpiresAt(t0))
	if want := t0.Add(plain.Policy.Retention - plain.Def.LongestRun()); !st.OpenUntil.Equal(want) || !st.ExpiresAt.IsZero() {
		t.Fatalf("record OpenUntil %v, ExpiresAt %v; want %v and none", st.OpenUntil, st.ExpiresAt, want)
	}
	check := func(what string, c workflow.Change, want time.Time) workflow.State {
		t.Helper()
		written, err := s.Apply(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		same(t, what+": the answer", written, c.Patch.Apply(st))
		if !written.ExpiresAt.Equal(want) {
			t.Fatalf("%s: ExpiresAt %v, want %v", what, written.ExpiresAt, want)
		}
		same(t, what+": a fresh read", get(t, s, "o-ttl"), written)
		return written
	}
	failedAt := t0.Add(1500 * time.Millisecond)
	st = check("into Error", rejectPlain(st, failedAt), time.Time{})
	orderTTL(plain.OrderExpiresAt(t0))
	st = check("alert confirmed", alertSent(st, failedAt.Add(time.Second)), time.Time{})
	orderTTL(time.Time{})
	if !st.OpenUntil.IsZero() {
		t.Fatalf("alert confirmed: OpenUntil %v, want none", st.OpenUntil)
	}
	resumed := t0.Add(3 * plain.Policy.Retention)
	st = check("resubmitted long after", resubmitPlain(st, resumed), time.Time{})
	orderTTL(plain.OrderExpiresAt(resumed))
	if want := milli(resumed.Add(plain.Policy.Retention).Truncate(time.Second).Add(-plain.Def.LongestRun())); !st.OpenUntil.Equal(want) {
		t.Fatalf("resubmitted: OpenUntil %v, want %v", st.OpenUntil, want)
	}
	st = check("claimed", plainClaim(st, resumed.Add(time.Second)), time.Time{})
	ended := check("processed", plainDone(st, resumed.Add(2*time.Second)), resumed.Add(2*time.Second+plain.Policy.Retention).Truncate(time.Second))
	orderTTL(plain.OrderExpiresAt(resumed))
	if !plain.OrderExpiresAt(resumed).After(ended.ExpiresAt) {
		t.Fatalf("the orders item expires at %v, before its record at %v", plain.OrderExpiresAt(resumed), ended.ExpiresAt)
	}
}

// ordersItemMovesWithTheRecord: a change that moves the orders item's TTL
// writes both or neither: a stale one changes neither.
func ordersItemMovesWithTheRecord(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	st := accept(t, s, plain, "o-both", "owner-a", t0)
	st = apply(t, s, st.OrderID, timed{rejectPlain, t0.Add(time.Second)})
	stale := workflow.Machine{}.AlertSent(st.OrderID, st.Attempt+1, st.ProcessState, t0.Add(2*time.Second))
	if _, err := s.Apply(ctx, stale); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("a stale alert confirmed: %v, want ErrStale", err)
	}
	if o, err := s.GetOrder(ctx, "o-both"); err != nil || !o.ExpiresAt.Equal(plain.OrderExpiresAt(t0)) {
		t.Fatalf("after a stale change the order expires at %v, %v; want %v", o.ExpiresAt, err, plain.OrderExpiresAt(t0))
	}
	same(t, "after a stale change", get(t, s, "o-both"), st)
	written, err := s.Apply(ctx, workflow.Machine{}.AlertSent(st.OrderID, st.Attempt, st.ProcessState, t0.Add(3*time.Second)))
	if err != nil || written.AlertPending || !written.OpenUntil.IsZero() {
		t.Fatalf("alert confirmed: %+v, %v", written, err)
	}
	if o, err := s.GetOrder(ctx, "o-both"); err != nil || !o.ExpiresAt.IsZero() {
		t.Fatalf("the order of a record waiting for an operator expires at %v, %v; want never", o.ExpiresAt, err)
	}
}

// keys: an Idempotency-Key's key item names the order it made until its
// ExpiresAt, and a second order with the key is refused meanwhile (ErrKeyUsed,
// nothing written); another owner's same key is its own; once forgotten, the
// key makes a new order, while the old one stays; an orders item an older
// release keyed by the key's slot counts as the key's.
func keys(t *testing.T, open Open) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s := open(t, clk)
	keyed := func(id, owner, key, hash string, at time.Time) error {
		o, st := newOrder(id, owner, at)
		o.IdempotencyKey, o.RequestHash, o.KeyExpiresAt = key, hash, at.Add(machine.Policy.Retention)
		return s.CreateOrder(ctx, o, st)
	}
	if _, err := s.GetKey(ctx, "owner-a", "k1"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("an unused key: %v, want ErrNotFound", err)
	}
	if err := keyed("o-k-a", "owner-a", "k1", "h1", t0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetKey(ctx, "owner-a", "k1"); err != nil || got != (workflow.KeyUse{OrderID: "o-k-a", Owner: "owner-a", RequestHash: "h1"}) {
		t.Fatalf("GetKey = %+v, %v", got, err)
	}
	if err := keyed("o-k-b", "owner-a", "k1", "h2", t0.Add(time.Second)); !errors.Is(err, workflow.ErrKeyUsed) {
		t.Fatalf("a second order with the key: %v, want ErrKeyUsed", err)
	}
	if _, err := s.GetState(ctx, "o-k-b"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("the refused order was written: %v", err)
	}
	if err := keyed("o-k-other", "owner-b", "k1", "h1", t0); err != nil {
		t.Fatalf("another owner's same key: %v", err)
	}
	if got, _ := s.GetKey(ctx, "owner-b", "k1"); got.OrderID != "o-k-other" {
		t.Fatalf("owner-b's key names %q", got.OrderID)
	}
	// Forgotten at its ExpiresAt, whether or not the TTL deleted it yet.
	clk.Set(t0.Add(machine.Policy.Retention))
	if _, err := s.GetKey(ctx, "owner-a", "k1"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("a forgotten key: %v, want ErrNotFound", err)
	}
	if err := keyed("o-k-c", "owner-a", "k1", "h1", clk.Now()); err != nil {
		t.Fatalf("a new order with a forgotten key: %v", err)
	}
	if got, _ := s.GetKey(ctx, "owner-a", "k1"); got.OrderID != "o-k-c" {
		t.Fatalf("the key names %q, want the new order", got.OrderID)
	}
	if _, err := s.GetState(ctx, "o-k-a"); err != nil {
		t.Fatalf("the key's old order: %v", err)
	}
	// An order an older release made with a key has the slot for its ID.
	slot := statestore.KeySlot("owner-a", "old-key")
	o, st := newOrder(slot, "owner-a", t0)
	o.IdempotencyKey = ""
	if err := s.CreateOrder(ctx, o, st); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetKey(ctx, "owner-a", "old-key"); err != nil || got != (workflow.KeyUse{OrderID: slot, Owner: "owner-a", RequestHash: o.RequestHash}) {
		t.Fatalf("the key of an order an older release made: %+v, %v", got, err)
	}
	if err := keyed("o-k-d", "owner-a", "old-key", o.RequestHash, clk.Now()); !errors.Is(err, workflow.ErrKeyUsed) {
		t.Fatalf("a new order with the key of an order an older release made: %v, want ErrKeyUsed", err)
	}
}

// olderRelease is the change an older release made of an order it stopped
// in Error: it set ExpiresAt, the retention after.
func olderRelease(id string, now time.Time) workflow.Change {
	return workflow.Change{OrderID: id, Patch: workflow.Patch{Now: now, ExpiresAt: now.Add(plain.Policy.Retention).Truncate(time.Second)}}
}

func plainClaim(s workflow.State, now time.Time) workflow.Change {
	return plain.Claim(s.OrderID, s.StepIndex, false, "scheduler/x", now)
}

func plainDone(s workflow.State, now time.Time) workflow.Change {
	return plain.StepCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{}`), "scheduler/y", now)
}

// expiredGone: from its ExpiresAt on, a record reads as missing (GetState,
// PeekHead), leaves the listings (whose pages still reach every other
// record exactly once) and the Supervisor's sweep, and its order reads as
// missing from the order's own ExpiresAt on; DynamoDB's TTL deletes them
// only later, so this is the store's doing.
func expiredGone(t *testing.T, open Open) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s := open(t, clk)
	// Seven orders of one owner end in Error a second apart, each with an
	// ExpiresAt as an older release wrote on entering Error (an order in
	// Error no longer expires, but records stored then do); o-exp-0
	// first, so it expires first.
	var ids []string
	for i := range 7 {
		id := fmt.Sprintf("o-exp-%d", i)
		ids = append(ids, id)
		st := accept(t, s, plain, id, "owner-x", t0.Add(time.Duration(i)*time.Second))
		failedAt := t0.Add(time.Duration(i)*time.Second + 10*time.Second)
		if _, err := s.Apply(ctx, rejectPlain(st, failedAt)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, olderRelease(id, failedAt)); err != nil {
			t.Fatal(err)
		}
	}
	accept(t, s, plain, "o-open", "owner-x", t0)
	first := get(t, s, ids[0]).ExpiresAt
	if first.IsZero() {
		t.Fatal("an order in Error has no ExpiresAt")
	}
	listed := func(what string, want []string) {
		t.Helper()
		byState := listPages(t, 2, func(cursor string) (statestore.Page, error) {
			return s.ListByState(ctx, workflow.Error, 2, cursor)
		}, func(workflow.State) {})
		if !slices.Equal(byState, want) {
			t.Errorf("%s: Error lists %v, want %v", what, byState, want)
		}
		byOwner := listPages(t, 2, func(cursor string) (statestore.Page, error) {
			return s.ListByOwner(ctx, "owner-x", 2, cursor)
		}, func(workflow.State) {})
		if wantOwn := append([]string{"o-open"}, want...); !sameSet(byOwner, wantOwn) {
			t.Errorf("%s: owner-x lists %v, want %v", what, byOwner, wantOwn)
		}
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)

	clk.Set(first.Add(-time.Second))
	listed("a second before the first expires", newest)
	if _, err := s.GetState(ctx, ids[0]); err != nil {
		t.Fatalf("GetState a second before it expires: %v", err)
	}

	clk.Set(first.Add(2 * time.Second)) // o-exp-0..2 expired
	if _, err := s.GetState(ctx, ids[0]); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("GetState of an expired record: %v, want ErrNotFound", err)
	}
	if _, err := s.PeekHead(ctx, ids[2]); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("PeekHead of an expired record: %v, want ErrNotFound", err)
	}
	if _, err := s.GetState(ctx, ids[3]); err != nil {
		t.Errorf("GetState of one not yet expired: %v", err)
	}
	listed("three expired", newest[:4])
	// Their alerts are still pending: the sweep would find all seven but
	// for their expiry.
	due, err := s.Expired(ctx, clk.Now(), 100)
	var found []string
	for _, st := range due {
		found = append(found, st.OrderID)
	}
	if err != nil || slices.ContainsFunc(found, func(id string) bool { return slices.Contains(ids[:3], id) }) || !slices.Contains(found, ids[3]) {
		t.Errorf("the sweep finds %v, %v: want o-exp-3 but no expired record", found, err)
	}
	if _, err := s.GetOrder(ctx, ids[0]); err != nil {
		t.Errorf("GetOrder before the order's own ExpiresAt: %v", err)
	}

	clk.Set(plain.OrderExpiresAt(t0))
	if _, err := s.GetOrder(ctx, ids[0]); !errors.Is(err, workflow.ErrNotFound) {
		t.Errorf("GetOrder of an expired order: %v, want ErrNotFound", err)
	}
	if _, err := s.GetOrder(ctx, ids[1]); err != nil {
		t.Errorf("GetOrder of an order created a second later: %v", err)
	}
}

// sameSet reports whether a and b hold the same IDs, each once.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// countOpen: the open orders of each version, from both indexes, each once:
// in flight (Pending, Processing), waiting for an operator (Error or
// CompensationFailed, its alert confirmed or not, so in ByState alone or in
// both indexes); finished ones (Processed, Cancelled) and expired ones do
// not count.
func countOpen(t *testing.T, openAt Open) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s := openAt(t, clk)
	v1, v2, p := machine.Def.ID(), otherVersion.Def.ID(), plain.Def.ID()
	for i := range 3 {
		create(t, s, fmt.Sprintf("o-v1-pending-%d", i), "owner-a", t0)
	}
	apply(t, s, create(t, s, "o-v1-claimed", "owner-a", t0).OrderID, timed{claim, t0.Add(time.Second)})
	undo := apply(t, s, create(t, s, "o-v1-undo-failed", "owner-a", t0).OrderID,
		timed{claim, t0.Add(time.Second)}, timed{reject, t0.Add(2 * time.Second)}, timed{reject, t0.Add(3 * time.Second)})
	if undo.ProcessState != workflow.CompensationFailed || !undo.InFlight {
		t.Fatalf("the test is wrong: o-v1-undo-failed is %s, in flight %v; want CompensationFailed owing its alert", undo.ProcessState, undo.InFlight)
	}
	done := apply(t, s, create(t, s, "o-v1-done", "owner-a", t0).OrderID,
		timed{claim, t0.Add(time.Second)}, timed{complete, t0.Add(2 * time.Second)}, timed{complete, t0.Add(3 * time.Second)})
	createOf(t, s, otherVersion.Def, "o-v2-pending", "owner-a", t0)
	createOf(t, s, otherVersion.Def, "o-v2-cancelled", "owner-a", t0)
	apply(t, s, "o-v2-cancelled", timed{func(st workflow.State, now time.Time) workflow.Change {
		c, err := otherVersion.Cancel(st, now, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, t0.Add(time.Second)})
	// An hour later, two plain orders stop in Error: one owes its alert
	// (both indexes), one had it sent (ByState alone).
	later := t0.Add(time.Hour)
	for _, id := range []string{"o-plain-alert", "o-plain-quiet"} {
		createOf(t, s, plain.Def, id, "owner-a", later)
		apply(t, s, id, timed{plainClaim, later.Add(time.Second)}, timed{rejectPlain, later.Add(2 * time.Second)})
	}
	apply(t, s, "o-plain-quiet", timed{alertSent, later.Add(3 * time.Second)})
	// One stopped at once, and expires as an older release had it (an
	// order in Error no longer expires, but records stored then do).
	old := apply(t, s, createOf(t, s, plain.Def, "o-plain-old", "owner-a", t0).OrderID,
		timed{plainClaim, t0.Add(time.Second)}, timed{rejectPlain, t0.Add(2 * time.Second)}, timed{alertSent, t0.Add(3 * time.Second)},
		timed{func(st workflow.State, now time.Time) workflow.Change { return olderRelease(st.OrderID, now) }, t0.Add(4 * time.Second)})
	if done.ProcessState != workflow.Processed || old.ExpiresAt.IsZero() {
		t.Fatalf("the test is wrong: o-v1-done is %s, o-plain-old expires at %v", done.ProcessState, old.ExpiresAt)
	}
	check := func(what string, want map[string]statestore.VersionCount) {
		t.Helper()
		got, err := s.CountOpen(ctx, 1000)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Truncated || !reflect.DeepEqual(got.Versions, want) {
			t.Errorf("%s: counted %+v, truncated %v; want %+v", what, got.Versions, got.Truncated, want)
		}
	}
	check("before any expires", map[string]statestore.VersionCount{
		v1: {InFlight: 4, NeedsOperator: 1}, v2: {InFlight: 1}, p: {NeedsOperator: 3},
	})
	clk.Set(old.ExpiresAt)
	check("after o-plain-old expired", map[string]statestore.VersionCount{
		v1: {InFlight: 4, NeedsOperator: 1}, v2: {InFlight: 1}, p: {NeedsOperator: 2},
	})
}

// countOpenBound: 130 orders in flight, over every shard and two versions,
// counted in full with a limit of at least 130 (more than one BatchGetItem
// of MaxPage keys), and truncated below; a limit out of range is refused.
func countOpenBound(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	const n = 130
	parallel(t, n, func(i int) {
		def := machine.Def
		if i%2 == 1 {
			def = otherVersion.Def
		}
		add(t, s, def, fmt.Sprintf("o-bound-%03d", i), "owner-a", t0)
	})
	want := map[string]statestore.VersionCount{machine.Def.ID(): {InFlight: n / 2}, otherVersion.Def.ID(): {InFlight: n / 2}}
	for _, limit := range []int{n, statestore.MaxOpenLimit} {
		got, err := s.CountOpen(ctx, limit)
		if err != nil || got.Truncated || !reflect.DeepEqual(got.Versions, want) {
			t.Errorf("limit %d: counted %+v, truncated %v, %v; want %+v", limit, got.Versions, got.Truncated, err, want)
		}
	}
	for _, limit := range []int{n - 1, 7, 1} {
		got, err := s.CountOpen(ctx, limit)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		sum := 0
		for _, v := range got.Versions {
			sum += v.InFlight + v.NeedsOperator
		}
		if !got.Truncated || sum > limit || sum == 0 {
			t.Errorf("limit %d: counted %d orders (%+v), truncated %v; want at most the limit, truncated", limit, sum, got.Versions, got.Truncated)
		}
	}
	for _, limit := range []int{0, -1, statestore.MaxOpenLimit + 1} {
		if _, err := s.CountOpen(ctx, limit); err == nil {
			t.Errorf("limit %d: no error", limit)
		}
	}
}
