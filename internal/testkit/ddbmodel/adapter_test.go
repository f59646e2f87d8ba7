package ddbmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/ddbmodel"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

var machine = workflow.Machine{Def: workflow.Reference(), Policy: workflow.DefaultPolicy()}

// losing is a Call hook that loses the answer of the writes lose picks,
// as the network does: the write took effect, and the SDK sends the same
// request again, whose answer the store gets.
func losing(lose func(c ddbmodel.Call) bool, lost *atomic.Int64) func(context.Context, ddbmodel.Call) error {
	return func(_ context.Context, c ddbmodel.Call) error {
		if err := c.Attempt(); err != nil || !c.Write || !lose(c) {
			return err
		}
		lost.Add(1)
		return c.Attempt()
	}
}

func order(id string, at time.Time) (workflow.Order, workflow.State) {
	o := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}},
		TotalCents: 100, RequestHash: "h", CreatedAt: at, IdempotencyKey: "k-" + id, Owner: "arn:aws:iam::1:user/u"}
	return o, workflow.NewState(id, workflow.Reference(), json.RawMessage(`{"orderId":"`+id+`"}`), at, at.Add(time.Minute))
}

// TestTheStoreKnowsItsOwnWriteWhoseAnswerWasLost runs the real store on
// the model with every answer of a write lost once: the creation's
// transaction is answered by its ClientRequestToken, a conditional update
// by its own WriteToken in the item its failed condition returns; so each
// call answers as if nothing was lost. Another writer's change is still
// refused as stale.
func TestTheStoreKnowsItsOwnWriteWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	var lost atomic.Int64
	m := open(t, ddbmodel.Options{Clock: clk, Call: losing(func(ddbmodel.Call) bool { return true }, &lost)})
	s := statestore.New(m, tables, statestore.WithClock(clk))
	ctx := context.Background()
	o, st := order("o1", t0)
	if err := s.CreateOrder(ctx, o, st); err != nil {
		t.Fatalf("a creation whose answer was lost: %v", err)
	}
	now := t0.Add(time.Second)
	claimed, err := s.Apply(ctx, machine.Claim("o1", 0, false, "scheduler/a", now))
	if err != nil || claimed.ProcessState != workflow.Processing || claimed.Attempt != 1 {
		t.Fatalf("a claim whose answer was lost: %+v, %v", claimed, err)
	}
	done, err := s.Apply(ctx, machine.StepCompleted("o1", 0, claimed.Attempt, []byte(`{"ok":true}`), "scheduler/b", now))
	if err != nil || done.StepIndex != 1 || done.Attempt != 2 {
		t.Fatalf("a commit whose answer was lost: %+v, %v", done, err)
	}
	stored, err := s.GetState(ctx, "o1")
	if err != nil || stored.Attempt != done.Attempt || stored.LockedBy != done.LockedBy {
		t.Fatalf("stored %+v, %v; returned %+v", stored, err, done)
	}
	if lost.Load() != 3 {
		t.Fatalf("%d answers lost, want 3", lost.Load())
	}
	// A claim of the step another Scheduler has is stale, lost answer or
	// not.
	if _, err := s.Apply(ctx, machine.Claim("o1", 1, false, "scheduler/c", now)); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("a second claim: %v", err)
	}
	// The key made the order, once.
	o2, st2 := order("o2", t0)
	o2.IdempotencyKey = o.IdempotencyKey
	if err := s.CreateOrder(ctx, o2, st2); !errors.Is(err, workflow.ErrKeyUsed) {
		t.Fatalf("the key again: %v", err)
	}
}

// TestPeekHeadReadsAsAWSMayAnswer: the store's eventually consistent read
// of a record written within the lag may be the record as it was; its
// strongly consistent read is the latest.
func TestPeekHeadReadsAsAWSMayAnswer(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	m := open(t, ddbmodel.Options{Clock: clk, Stale: func(n int) int { return n - 1 }})
	s := statestore.New(m, tables, statestore.WithClock(clk))
	ctx := context.Background()
	o, st := order("o1", t0)
	if err := s.CreateOrder(ctx, o, st); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PeekHead(ctx, "o1"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("created within the lag: %v, may be absent", err)
	}
	clk.Advance(2 * time.Second)
	if _, err := s.Apply(ctx, machine.Claim("o1", 0, false, "scheduler/a", clk.Now())); err != nil {
		t.Fatal(err)
	}
	peek, err := s.PeekHead(ctx, "o1")
	if err != nil || peek.ProcessState != workflow.Pending {
		t.Fatalf("PeekHead within the lag: %s, %v, want the record before the claim", peek.ProcessState, err)
	}
	got, err := s.GetState(ctx, "o1")
	if err != nil || got.ProcessState != workflow.Processing {
		t.Fatalf("GetState: %s, %v", got.ProcessState, err)
	}
}

// TestUnprocessedKeysAreAskedForAgainAfterTheStoresSleep: the keys a
// BatchGetItem left unprocessed are asked for again, after the wait the
// store's sleep (statestore.WithSleep) takes, doubling.
func TestUnprocessedKeysAreAskedForAgainAfterTheStoresSleep(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	refusals := map[string]int{"o2": 2, "o3": 1}
	m := open(t, ddbmodel.Options{Clock: clk, Unprocessed: func(_, k string) bool {
		refusals[k]--
		return refusals[k] >= 0
	}})
	var waits []time.Duration
	s := statestore.New(m, tables, statestore.WithClock(clk), statestore.WithSerialReads(),
		statestore.WithSleep(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }))
	ctx := context.Background()
	for i, id := range []string{"o1", "o2", "o3"} {
		o, st := order(id, t0.Add(time.Duration(i)*time.Second))
		if err := s.CreateOrder(ctx, o, st); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	p, err := s.ListByOwner(ctx, "arn:aws:iam::1:user/u", 10, "")
	var got []string
	for _, st := range p.States {
		got = append(got, st.OrderID)
	}
	if err != nil || len(got) != 3 || got[0] != "o3" || len(waits) != 2 || waits[1] != 2*waits[0] {
		t.Fatalf("listed %v, %v, after waits %v", got, err, waits)
	}
}

// TestApplyReturnsItsOwnWrite: a change that moves the orders item's TTL
// is a transaction, which returns no item. Another writer may write the
// record right after it (the Scheduler's claim of the undo an operator's
// retry hands back) or between the store's read and its transaction (the
// alert's confirmation); Apply still returns the record as its own write
// left it, which the caller's follow-up (its log, its alert) is about.
func TestApplyReturnsItsOwnWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// after: the other write comes after the store's call op.
		op string
	}{
		{"a claim right after the retry", "TransactWriteItems"},
		{"a confirmation between the read and the retry", "GetItem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			ctx := context.Background()
			var armed atomic.Bool
			var other func() error
			m := open(t, ddbmodel.Options{Clock: clk, Call: func(_ context.Context, c ddbmodel.Call) error {
				err := c.Attempt()
				if err == nil && c.Op == tc.op && c.Table == tables.State && armed.CompareAndSwap(true, false) {
					if oerr := other(); oerr != nil {
						t.Errorf("the other write: %v", oerr)
					}
				}
				return err
			}})
			s := statestore.New(m, tables, statestore.WithClock(clk))
			o, st := order("o1", t0)
			if err := s.CreateOrder(ctx, o, st); err != nil {
				t.Fatal(err)
			}
			now := t0
			tick := func() time.Time { now = now.Add(time.Second); return now }
			step := func(c workflow.Change) workflow.State {
				t.Helper()
				got, err := s.Apply(ctx, c)
				if err != nil {
					t.Fatalf("%s: %v", c.Transition, err)
				}
				return got
			}
			claimed := step(machine.Claim("o1", 0, false, "scheduler/a", tick()))
			done := step(machine.StepCompleted("o1", 0, claimed.Attempt, []byte(`{}`), "scheduler/a", tick()))
			refused := step(machine.StepRejected("o1", 1, done.Attempt, "declined", false, "scheduler/a", tick()))
			undoing := refused
			if refused.ProcessState == workflow.CompensationPending {
				undoing = step(machine.Claim("o1", 0, true, "scheduler/a", tick()))
			}
			failed := step(machine.UndoRejected("o1", undoing.StepIndex, undoing.Attempt, "legal_hold", false, undoing, tick()))
			if undoing.ProcessState != workflow.Compensating || failed.ProcessState != workflow.CompensationFailed {
				t.Fatalf("set up: %s then %s", undoing.ProcessState, failed.ProcessState)
			}
			retry, err := machine.Resubmit(failed, now.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			switch tc.op {
			case "TransactWriteItems":
				other = func() error {
					_, err := s.Apply(ctx, machine.Claim("o1", failed.StepIndex, true, "scheduler/c", now.Add(2*time.Second)))
					return err
				}
			default:
				other = func() error {
					_, err := s.Apply(ctx, workflow.Machine{}.AlertSent("o1", failed.Attempt, failed.ProcessState, now.Add(time.Second)))
					return err
				}
			}
			armed.Store(true)
			got, err := s.Apply(ctx, retry)
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if armed.Load() {
				t.Fatal("the other write never came")
			}
			if got.ProcessState != workflow.CompensationPending || got.Attempt != failed.Attempt+1 || got.LockedBy != "" {
				t.Errorf("the retry returned %s, attempt %d, locked by %q; want its own write: CompensationPending, attempt %d, unlocked",
					got.ProcessState, got.Attempt, got.LockedBy, failed.Attempt+1)
			}
			stored, err := s.GetState(ctx, "o1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.op == "GetItem" && (stored.ProcessState != got.ProcessState || stored.Attempt != got.Attempt || stored.AlertPending) {
				t.Errorf("stored %s attempt %d alert pending %v; want the retry's write on the confirmed record", stored.ProcessState, stored.Attempt, stored.AlertPending)
			}
			if tc.op == "TransactWriteItems" && stored.ProcessState != workflow.Compensating {
				t.Errorf("stored %s; want the claim that came after", stored.ProcessState)
			}
		})
	}
}

// TestExpiredReturnsWhatItReadWithWhatFailed: one shard of the in-flight
// index refuses its query (throttled past the SDK's retries); the listing
// returns the due records of every other shard, and the error.
func TestExpiredReturnsWhatItReadWithWhatFailed(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	ctx := context.Background()
	var queries atomic.Int64
	throttled := errors.New("ThrottlingException: rate exceeded")
	m := open(t, ddbmodel.Options{Clock: clk, Call: func(_ context.Context, c ddbmodel.Call) error {
		if c.Op == "Query" && queries.Add(1) == 1 {
			return throttled
		}
		return c.Attempt()
	}})
	s := statestore.New(m, tables, statestore.WithClock(clk), statestore.WithSerialReads())
	const orders = 200
	for i := range orders {
		o, st := order(fmt.Sprintf("o%d", i), t0)
		if err := s.CreateOrder(ctx, o, st); err != nil {
			t.Fatal(err)
		}
	}
	due, err := s.Expired(ctx, t0.Add(time.Hour), 1000)
	if !errors.Is(err, throttled) {
		t.Fatalf("Expired: %v, want the failed query's error", err)
	}
	// The first shard's records are missing, every other shard's are there.
	if len(due) == 0 || len(due) >= orders {
		t.Fatalf("%d of %d due records returned, want all but the first shard's", len(due), orders)
	}
	first := statestore.ShardNames()[0]
	for _, st := range due {
		if statestore.ShardOf(st.OrderID) == first {
			t.Errorf("%s of the failed shard %s returned", st.OrderID, first)
		}
	}
	want := 0
	for i := range orders {
		if statestore.ShardOf(fmt.Sprintf("o%d", i)) != first {
			want++
		}
	}
	if len(due) != want {
		t.Errorf("%d due records returned, want %d", len(due), want)
	}
}
