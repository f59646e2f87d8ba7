// Package storetest is the conformance suite of the state store's contract
// (statestore.Port). It runs the same cases against every implementation:
// the DynamoDB store on DynamoDB Local (shared/statestore's tests) and the
// in-memory store the actors' tests use (internal/testkit/memstore's). Each
// write must leave exactly what the workflow's own meaning of the change
// (workflow.Patch.Apply) says, and be refused exactly when its fence does
// not admit the record.
package storetest

import (
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

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Open returns a fresh, empty store for one test.
type Open func(t *testing.T) statestore.Port

// t0 is when every case's first order is accepted.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// machine runs the shipped workflow under a policy with short, distinct
// timings.
var machine = workflow.Machine{Def: workflow.Default(), Policy: workflow.Policy{
	MaxFailures: 2, ClaimTimeout: time.Minute, BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 2 * time.Minute,
}}

// Run runs every case against the stores open returns.
func Run(t *testing.T, open Open) {
	t.Run("CreateAndRead", func(t *testing.T) { t.Parallel(); createAndRead(t, open(t)) })
	t.Run("LifecyclesApplyTheirPatches", func(t *testing.T) { t.Parallel(); lifecycles(t, open) })
	t.Run("FencesRefuseAndChangeNothing", func(t *testing.T) { t.Parallel(); fences(t, open(t)) })
	t.Run("OneOfManyClaimsWins", func(t *testing.T) { t.Parallel(); oneClaimWins(t, open(t)) })
	t.Run("ExpiredFindsDueRecordsOfTheIndex", func(t *testing.T) { t.Parallel(); expired(t, open(t)) })
	t.Run("ListByStatePages", func(t *testing.T) { t.Parallel(); listByState(t, open(t)) })
	t.Run("ListByOwnerIsolatesOwners", func(t *testing.T) { t.Parallel(); listByOwner(t, open(t)) })
	t.Run("ListingsPageThroughTies", func(t *testing.T) { t.Parallel(); listingTies(t, open(t)) })
}

// newOrder is an order of owner accepted at at, Pending at step 0.
func newOrder(id, owner string, at time.Time) (workflow.Order, workflow.State) {
	o := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Owner: owner,
		Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}}, TotalCents: 100, RequestHash: "h-" + id, CreatedAt: at}
	st := workflow.NewState(id, machine.Def, json.RawMessage(`{"orderId":"`+id+`"}`), at, at.Add(time.Minute))
	st.Owner = owner
	return o, st
}

func create(t *testing.T, s statestore.Port, id, owner string, at time.Time) workflow.State {
	t.Helper()
	o, st := newOrder(id, owner, at)
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return get(t, s, id)
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
	st.CreatedAt, st.UpdatedAt = milli(st.CreatedAt), milli(st.UpdatedAt)
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
		return machine.UndoCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{"undone":true}`), "scheduler/y", now)
	}
	return machine.StepCompleted(s.OrderID, s.StepIndex, s.Attempt, json.RawMessage(`{"step":"`+s.Step+`"}`), "scheduler/y", now)
}

func reject(s workflow.State, now time.Time) workflow.Change {
	if s.ProcessState == workflow.Compensating {
		return machine.UndoRejected(s.OrderID, s.StepIndex, s.Attempt, "compensation rejected", now)
	}
	return machine.StepRejected(s.OrderID, s.StepIndex, s.Attempt, "rejected: no", "scheduler/z", now)
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
	return workflow.AlertSent(s.OrderID, s.Attempt, now)
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
func lifecycles(t *testing.T, open Open) {
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
		{"an undo reply while the step runs", machine.UndoCompleted("o-fence", 0, running.Attempt, nil, "s", t0.Add(2*time.Second))},
		{"a recovery of a deadline that moved", recovery},
		{"an alert confirmation of a record that owes none", workflow.AlertSent("o-fence", running.Attempt, t0.Add(2*time.Second))},
		{"a change of a missing order", machine.Claim("o-missing", 0, false, "s", t0)},
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

func listByState(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("o-list-%d", i)
		create(t, s, id, "owner-a", t0.Add(time.Duration(i)*time.Second))
		want = append([]string{id}, want...) // newest change first
	}
	got := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByState(ctx, workflow.Pending, 3, cursor)
	}, func(st workflow.State) {
		if st.Input != nil || len(st.Steps) != 0 || st.ProcessState != workflow.Pending {
			t.Errorf("listed %+v: want the summary only", st)
		}
	})
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	page, err := s.ListByState(ctx, workflow.Pending, 2, "")
	if err != nil || page.Next == "" {
		t.Fatalf("first page %+v, %v", page, err)
	}
	if _, err := s.ListByState(ctx, workflow.Error, 2, page.Next); !errors.Is(err, statestore.ErrBadCursor) {
		t.Errorf("a cursor of another state's listing: %v", err)
	}
	if _, err := s.ListByState(ctx, workflow.Pending, 2, "not a cursor"); !errors.Is(err, statestore.ErrBadCursor) {
		t.Errorf("a garbled cursor: %v", err)
	}
	if empty, err := s.ListByState(ctx, workflow.Error, 5, ""); err != nil || len(empty.States) != 0 || empty.Next != "" {
		t.Errorf("an empty listing: %+v, %v", empty, err)
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

// listingTies: records whose sort key is the same millisecond, though their
// times differ within it, are each listed once, a page of one at a time.
func listingTies(t *testing.T, s statestore.Port) {
	ctx := context.Background()
	var want []string
	for i := range 4 {
		id := fmt.Sprintf("o-tie-%d", i)
		create(t, s, id, "owner-t", t0.Add(time.Duration(3-i)*100*time.Microsecond))
		want = append(want, id)
	}
	byState := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByState(ctx, workflow.Pending, 1, cursor)
	}, func(workflow.State) {})
	byOwner := listAll(t, func(cursor string) (statestore.Page, error) {
		return s.ListByOwner(ctx, "owner-t", 1, cursor)
	}, func(workflow.State) {})
	// The order of ties is the index's; only the set is the contract.
	for _, got := range [][]string{byState, byOwner} {
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("listed %v, want each of %v once", got, want)
		}
	}
}

// listAll pages through a listing from its first page, checks every record
// it shows, and returns their IDs in order.
func listAll(t *testing.T, list func(cursor string) (statestore.Page, error), check func(workflow.State)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 10 {
		page, err := list(cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range page.States {
			ids = append(ids, st.OrderID)
			check(st)
		}
		if cursor = page.Next; cursor == "" {
			return ids
		}
	}
	t.Fatalf("paging does not end after 10 pages: %v", ids)
	return nil
}

// milli is t at the store's precision; the zero time stays zero.
func milli(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
