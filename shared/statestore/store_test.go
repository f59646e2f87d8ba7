package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// newStore creates fresh tables on DynamoDB Local.
func newStore(t testing.TB) *statestore.Store {
	t.Helper()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), db, tables); err != nil {
		t.Fatal(err)
	}
	return statestore.New(db, tables)
}

// seed writes a new order with the default workflow, Pending and to be
// claimed by t0+1m.
func seed(t testing.TB, s *statestore.Store, id string) workflow.State {
	t.Helper()
	order := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}}, TotalCents: 100, RequestHash: "h", CreatedAt: t0}
	st := workflow.NewState(id, workflow.Default(), json.RawMessage(`{"orderId":"`+id+`"}`), t0, t0.Add(time.Minute))
	if err := s.CreateOrder(context.Background(), order, st); err != nil {
		t.Fatal(err)
	}
	return st
}

func claim(s *statestore.Store, id string, step int, owner string, now time.Time) (workflow.State, error) {
	return s.Claim(context.Background(), statestore.Claim{OrderID: id, StepIndex: step, Owner: owner, Now: now, CompleteBy: now.Add(30 * time.Second)})
}

func TestCreateOrderIsAtomicAndUnique(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-1")
	o, err := s.GetOrder(ctx, "o-1")
	if err != nil || o.TotalCents != 100 || o.Items[0].SKU != "A" {
		t.Fatalf("GetOrder = %+v, %v", o, err)
	}
	st, err := s.GetState(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.ProcessState != workflow.Pending || len(st.Steps) != 2 || !st.CompleteBy.Equal(t0.Add(time.Minute)) || string(st.Input) != `{"orderId":"o-1"}` {
		t.Fatalf("GetState = %+v", st)
	}
	// A second create of the same ID writes neither item.
	other := workflow.Order{OrderID: "o-1", CustomerID: "c-2", RequestHash: "other", CreatedAt: t0}
	err = s.CreateOrder(ctx, other, workflow.NewState("o-1", workflow.Default(), nil, t0, t0))
	if !errors.Is(err, workflow.ErrExists) {
		t.Fatalf("second CreateOrder error = %v, want ErrExists", err)
	}
	if o, _ := s.GetOrder(ctx, "o-1"); o.CustomerID != "c-1" {
		t.Fatalf("order overwritten: %+v", o)
	}
	if _, err := s.GetState(ctx, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("GetState(missing) error = %v", err)
	}
	if _, err := s.GetOrder(ctx, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("GetOrder(missing) error = %v", err)
	}
}

func TestClaimHasOneWinner(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	seed(t, s, "o-race")
	const contenders = 16
	var wins, lost atomic.Int32
	var wg sync.WaitGroup
	for i := range contenders {
		wg.Go(func() {
			_, err := claim(s, "o-race", 0, fmt.Sprintf("sched-%d", i), t0)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, workflow.ErrClaimLost):
				lost.Add(1)
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || lost.Load() != contenders-1 {
		t.Fatalf("wins=%d lost=%d, want 1 and %d", wins.Load(), lost.Load(), contenders-1)
	}
	st, _ := s.GetState(context.Background(), "o-race")
	if st.Attempt != 1 || st.ProcessState != workflow.Processing || st.LockedBy == "" || st.Steps[0].Attempts != 1 {
		t.Fatalf("after race: %+v", st)
	}
}

func TestClaimRejectsWrongStepAndLockedRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	seed(t, s, "o-2")
	if _, err := claim(s, "o-2", 1, "a", t0); !errors.Is(err, workflow.ErrClaimLost) {
		t.Fatalf("claim of step 1 while at step 0: %v", err)
	}
	if _, err := claim(s, "missing", 0, "a", t0); !errors.Is(err, workflow.ErrClaimLost) {
		// A conditional update on a missing item fails its condition too.
		t.Fatalf("claim of missing order: %v", err)
	}
	st, err := claim(s, "o-2", 0, "a", t0)
	if err != nil || st.Attempt != 1 || st.LockedBy != "a" || !st.CompleteBy.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("claim = %+v, %v", st, err)
	}
	if _, err := claim(s, "o-2", 0, "b", t0); !errors.Is(err, workflow.ErrClaimLost) {
		t.Fatalf("second claim: %v", err)
	}
}

func TestAdvanceThroughAllSteps(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-3")
	st, err := claim(s, "o-3", 0, "a", t0)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Second)
	st, err = s.Advance(ctx, statestore.Advance{
		OrderID: "o-3", StepIndex: 0, Attempt: st.Attempt, Now: now, Output: json.RawMessage(`{"r":1}`),
		Next: &statestore.NextClaim{Step: "charge-payment", Owner: "b", CompleteBy: now.Add(30 * time.Second)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.StepIndex != 1 || st.Step != "charge-payment" || st.Attempt != 2 || st.LockedBy != "b" || st.ProcessState != workflow.Processing {
		t.Fatalf("after advance: %+v", st)
	}
	if st.Steps[0].State != workflow.StepSucceeded || string(st.Steps[0].Output) != `{"r":1}` || st.Steps[1].State != workflow.StepProcessing {
		t.Fatalf("step history: %+v", st.Steps)
	}
	st, err = s.Advance(ctx, statestore.Advance{OrderID: "o-3", StepIndex: 1, Attempt: 2, Now: now, Output: json.RawMessage(`{"c":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if st.ProcessState != workflow.Processed || st.LockedBy != "" {
		t.Fatalf("final: %+v", st)
	}
	// Processed records leave the in-flight index.
	expired, err := s.Expired(ctx, now.Add(time.Hour), 100)
	if err != nil || len(expired) != 0 {
		t.Fatalf("Expired = %+v, %v; want none", expired, err)
	}
}

func TestCommitIsFenced(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-4")
	first, _ := claim(s, "o-4", 0, "a", t0)
	adv := func(attempt int, now time.Time) error {
		_, err := s.Advance(ctx, statestore.Advance{OrderID: "o-4", StepIndex: 0, Attempt: attempt, Now: now,
			Next: &statestore.NextClaim{Step: "charge-payment", Owner: "x", CompleteBy: now.Add(time.Minute)}})
		return err
	}
	// A reply after CompleteBy is not committed, even for the current attempt.
	if err := adv(first.Attempt, first.CompleteBy); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("late commit: %v", err)
	}
	// The Supervisor hands the step back and a new claim takes Attempt 2.
	r := workflow.DefaultPolicy().Recover(workflow.Definition{}, first, first.CompleteBy)
	if _, err := s.Recover(ctx, first, r, first.CompleteBy); err != nil {
		t.Fatal(err)
	}
	second, err := claim(s, "o-4", 0, "b", first.CompleteBy.Add(time.Second))
	if err != nil || second.Attempt != first.Attempt+1 || second.FailureCount != 1 {
		t.Fatalf("reclaim = %+v, %v", second, err)
	}
	// The zombie reply of attempt 1 arrives in time by its own clock: fenced.
	if err := adv(first.Attempt, second.CompleteBy.Add(-time.Second)); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("zombie commit: %v", err)
	}
	if _, err := s.Fail(ctx, statestore.Failure{OrderID: "o-4", StepIndex: 0, Attempt: first.Attempt, Now: second.CompleteBy.Add(-time.Second), Error: "x"}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("zombie failure: %v", err)
	}
	if err := adv(second.Attempt, second.CompleteBy.Add(-time.Second)); err != nil {
		t.Fatalf("current commit: %v", err)
	}
	// FailureCount restarts for the next step; the history keeps the failure.
	st, _ := s.GetState(ctx, "o-4")
	if st.FailureCount != 0 || st.Steps[0].Failures != 1 || st.Steps[0].Attempts != 2 {
		t.Fatalf("after commit: %+v", st)
	}
}

func TestFailKeepsAlertPendingUntilSent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-5")
	st, _ := claim(s, "o-5", 0, "a", t0)
	now := t0.Add(time.Second)
	st, err := s.Fail(ctx, statestore.Failure{OrderID: "o-5", StepIndex: 0, Attempt: st.Attempt, Now: now, Error: "rejected: no stock", AlertBy: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if st.ProcessState != workflow.Error || !st.AlertPending || st.LastError != "rejected: no stock" || st.Steps[0].State != workflow.StepFailed {
		t.Fatalf("after fail: %+v", st)
	}
	// Unsent, it shows up for the Supervisor once AlertBy passes.
	if got, _ := s.Expired(ctx, now.Add(time.Minute), 10); len(got) != 1 || got[0].ProcessState != workflow.Error {
		t.Fatalf("Expired = %+v", got)
	}
	if err := s.AlertSent(ctx, "o-5", st.Attempt, now); err != nil {
		t.Fatal(err)
	}
	if err := s.AlertSent(ctx, "o-5", st.Attempt, now); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("second AlertSent: %v", err)
	}
	if got, _ := s.Expired(ctx, now.Add(time.Hour), 10); len(got) != 0 {
		t.Fatalf("Expired after alert = %+v", got)
	}
}

func TestExpiredFindsOnlyDueRecordsAcrossShards(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	const n = 40
	shards := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("o-exp-%02d", i)
		shards[statestore.ShardOf(id)] = true
		seed(t, s, id)
		if i%2 == 0 {
			if _, err := claim(s, id, 0, "a", t0); err != nil { // CompleteBy t0+30s
				t.Fatal(err)
			}
		}
	}
	if len(shards) < statestore.Shards/2 {
		t.Fatalf("40 IDs spread over only %d shards", len(shards))
	}
	due, err := s.Expired(ctx, t0.Add(30*time.Second), 100)
	if err != nil || len(due) != n/2 {
		t.Fatalf("Expired(t0+30s) = %d records, %v; want %d", len(due), err, n/2)
	}
	for _, st := range due {
		if st.ProcessState != workflow.Processing || st.Attempt != 1 || st.Step != "reserve-inventory" {
			t.Fatalf("projected record %+v", st)
		}
	}
	all, _ := s.Expired(ctx, t0.Add(time.Minute), 100)
	if len(all) != n {
		t.Fatalf("Expired(t0+1m) = %d, want %d", len(all), n)
	}
	limited, _ := s.Expired(ctx, t0.Add(time.Minute), 1)
	if len(limited) > statestore.Shards {
		t.Fatalf("limit 1 per shard returned %d", len(limited))
	}
}

func TestRecoverHasOneWinner(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-6")
	st, _ := claim(s, "o-6", 0, "a", t0)
	p := workflow.DefaultPolicy()
	now := st.CompleteBy.Add(time.Second)
	// Two Supervisors read the same expired record and both decide to retry.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := s.Recover(ctx, st, p.Recover(workflow.Definition{}, st, now), now)
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, workflow.ErrStale) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _ := s.GetState(ctx, "o-6")
	if wins.Load() != 1 || got.FailureCount != 1 || got.ProcessState != workflow.Pending || got.LockedBy != "" || got.Steps[0].Failures != 1 {
		t.Fatalf("wins=%d state=%+v", wins.Load(), got)
	}
}

func TestRecoverGivesUpAtThreshold(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-7")
	p := workflow.DefaultPolicy()
	now := t0
	var st workflow.State
	for i := range p.MaxFailures {
		var err error
		if st, err = claim(s, "o-7", 0, "a", now); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		now = st.CompleteBy
		r := p.Recover(workflow.Definition{}, st, now)
		if st, err = s.Recover(ctx, st, r, now); err != nil {
			t.Fatalf("recover %d: %v", i, err)
		}
	}
	if st.ProcessState != workflow.Error || st.FailureCount != p.MaxFailures || !st.AlertPending || st.Steps[0].State != workflow.StepFailed {
		t.Fatalf("after %d timeouts: %+v", p.MaxFailures, st)
	}
}

func TestDispatchFailureAndRequeue(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seeded := seed(t, s, "o-8")
	// Requeue an unclaimed Pending record; a second Supervisor with the same
	// view loses.
	p := workflow.DefaultPolicy()
	r := p.Recover(workflow.Definition{}, seeded, seeded.CompleteBy)
	if r.Kind != workflow.Requeue {
		t.Fatalf("decision %v", r.Kind)
	}
	st, err := s.Recover(ctx, seeded, r, seeded.CompleteBy)
	if err != nil || st.Requeues != 1 || !st.CompleteBy.Equal(r.CompleteBy) {
		t.Fatalf("requeue = %+v, %v", st, err)
	}
	if _, err := s.Recover(ctx, seeded, r, seeded.CompleteBy); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("second requeue: %v", err)
	}
	// A claim whose request could not be sent hands the step back with a
	// failure counted and the cause kept, fenced like any recovery.
	claimed, err := claim(s, "o-8", 0, "a", t0)
	if err != nil {
		t.Fatal(err)
	}
	failed := p.DispatchFailed(workflow.Default(), claimed, t0, "AccessDenied")
	back, err := s.Recover(ctx, claimed, failed, t0)
	if err != nil || back.ProcessState != workflow.Pending || back.FailureCount != 1 || back.LockedBy != "" ||
		back.Steps[0].Failures != 1 || back.LastError != failed.Reason {
		t.Fatalf("after a failed dispatch %+v, %v", back, err)
	}
	if _, err := s.Recover(ctx, claimed, failed, t0); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("second hand-back: %v", err)
	}
	again, err := claim(s, "o-8", 0, "b", t0)
	if err != nil || again.Attempt != 2 {
		t.Fatalf("claim after the hand-back = %+v, %v", again, err)
	}
}
