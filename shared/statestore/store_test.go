package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/storetest"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// openStore creates fresh tables on DynamoDB Local, and a store on them
// whose client wrap may wrap the engine's (nil: the engine's itself).
func openStore(t testing.TB, wrap func(*dynamodb.Client) statestore.Client, opts ...statestore.Option) (*statestore.Store, *dynamodb.Client, statestore.Tables) {
	t.Helper()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), db, tables, statestore.WithoutTTL()); err != nil {
		t.Fatal(err)
	}
	var c statestore.Client = db
	if wrap != nil {
		c = wrap(db)
	}
	return statestore.New(c, tables, opts...), db, tables
}

// newStore is a store on fresh tables.
func newStore(t testing.TB) *statestore.Store {
	t.Helper()
	s, _, _ := openStore(t, nil)
	return s
}

// newStoreAt is a store on fresh tables that reads the time from clk.
func newStoreAt(t testing.TB, clk clock.Clock) *statestore.Store {
	t.Helper()
	s, _, _ := openStore(t, nil, statestore.WithClock(clk))
	return s
}

// seed writes a new order with the default workflow, Pending and to be
// claimed by t0+1m.
func seed(t testing.TB, s *statestore.Store, id string) workflow.State {
	t.Helper()
	order := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}}, TotalCents: 100, RequestHash: "h", CreatedAt: t0}
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{"orderId":"`+id+`"}`), t0, t0.Add(time.Minute))
	if err := s.CreateOrder(context.Background(), order, st); err != nil {
		t.Fatal(err)
	}
	return st
}

// machine runs the shipped workflow under the default policy.
var machine = workflow.Machine{Def: workflow.Reference(), Policy: workflow.DefaultPolicy()}

// claim takes step of id for owner at now.
func claim(s *statestore.Store, id string, step int, owner string, now time.Time) (workflow.State, error) {
	return s.Apply(context.Background(), machine.Claim(id, step, false, owner, now))
}

// TestConformance holds the DynamoDB store to the state store's contract on
// DynamoDB Local: the suite the in-memory double passes too.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clk clock.Clock) statestore.Port { return newStoreAt(t, clk) })
}

// TestCreateOrderWritesBothOrNeither: the transaction leaves no half an
// order when its second item's condition fails.
func TestCreateOrderWritesBothOrNeither(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	seed(t, s, "o-1")
	// The state record exists, the order does not: the order must not be
	// written either.
	st := workflow.NewState("o-1", workflow.Reference(), nil, t0, t0)
	err := s.CreateOrder(ctx, workflow.Order{OrderID: "o-1", RequestHash: "other", CreatedAt: t0}, st)
	if !errors.Is(err, workflow.ErrExists) {
		t.Fatalf("CreateOrder = %v, want ErrExists", err)
	}
	if o, _ := s.GetOrder(ctx, "o-1"); o.RequestHash != "h" {
		t.Fatalf("the order was overwritten: %+v", o)
	}
}

// TestTablesExpireOnExpiresAt: CreateTables turns TTL on for both tables on
// ExpiresAtAttr, and the items carry it as TTL wants it: a Number of Unix
// seconds, the order's from its creation, the record's from the write that
// ended it. TTL deletes lazily (in AWS within days), which is why the
// store's reads filter expired items (the conformance suite's
// ExpiredItemsReadAsGone). DynamoDB Local deletes expired items by wall
// time, so the other tests, whose clocks are fake, create their tables
// without TTL (statestore.WithoutTTL).
func TestTablesExpireOnExpiresAt(t *testing.T) {
	t.Parallel()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), db, tables); err != nil {
		t.Fatal(err)
	}
	s := statestore.New(db, tables, statestore.WithClock(clock.NewFake(t0)))
	ctx := context.Background()
	for _, table := range []string{tables.Orders, tables.State} {
		out, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		d := out.TimeToLiveDescription
		if d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != statestore.ExpiresAtAttr {
			t.Errorf("table %s: TTL %+v, want enabled on %s", table, d, statestore.ExpiresAtAttr)
		}
	}

	id := "o-ttl-raw"
	order := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}},
		TotalCents: 100, RequestHash: "h", CreatedAt: t0, ExpiresAt: machine.OrderExpiresAt(t0)}
	st := machine.Accept(id, json.RawMessage(`{"orderId":"`+id+`"}`), "submission/x", t0)
	if err := s.CreateOrder(ctx, order, st); err != nil {
		t.Fatal(err)
	}
	raw := func(table string) map[string]types.AttributeValue {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
			statestore.KeyOrderID: &types.AttributeValueMemberS{Value: id}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	seconds := func(what string, item map[string]types.AttributeValue, want time.Time) {
		t.Helper()
		n, ok := item[statestore.ExpiresAtAttr].(*types.AttributeValueMemberN)
		if !ok || n.Value != strconv.FormatInt(want.Unix(), 10) {
			t.Errorf("%s: %s = %#v, want the Number %d", what, statestore.ExpiresAtAttr, item[statestore.ExpiresAtAttr], want.Unix())
		}
	}
	seconds("the order", raw(tables.Orders), t0.Add(2*machine.Policy.Retention))
	if _, ok := raw(tables.State)[statestore.ExpiresAtAttr]; ok {
		t.Error("an open record has an ExpiresAt")
	}
	ended := t0.Add(10*time.Second + 700*time.Millisecond)
	written, err := s.Apply(ctx, machine.StepRejected(id, 0, st.Attempt, "no", false, "scheduler/x", ended))
	if err != nil {
		t.Fatal(err)
	}
	if written.ProcessState.Terminal() {
		t.Fatalf("the default workflow's rejection at step 0 left %s, want its compensation", written.ProcessState)
	}
	written, err = s.Apply(ctx, machine.UndoCompleted(id, 0, written.Attempt, json.RawMessage(`{}`), workflow.State{}, "scheduler/x", ended))
	if err != nil || written.ProcessState != workflow.Compensated {
		t.Fatalf("undo: %s, %v", written.ProcessState, err)
	}
	seconds("the Compensated record", raw(tables.State), t0.Add(10*time.Second+machine.Policy.Retention))
}

// TestAChangeOfAnOrderWithoutItsOrdersItemIsWrittenAlone: a change that
// moves the orders item's TTL, of a record whose orders item is gone
// (deleted by hand, or by an older release's TTL), writes the record alone:
// there is nothing to keep, and the order can still be resumed.
func TestAChangeOfAnOrderWithoutItsOrdersItemIsWrittenAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db, tables := openStore(t, nil)
	seed(t, s, "o-orphan")
	st := claimed(t, s, "o-orphan")
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tables.Orders),
		Key: map[string]types.AttributeValue{statestore.KeyOrderID: &types.AttributeValueMemberS{Value: "o-orphan"}}}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Second)
	st, err := s.Apply(ctx, machine.StepRejected("o-orphan", 0, st.Attempt, "no", false, "scheduler/x", now))
	if err == nil {
		st, err = s.Apply(ctx, machine.UndoRejected("o-orphan", 0, st.Attempt, "compensation no", false, workflow.State{}, now))
	}
	if err != nil {
		t.Fatal(err)
	}
	c := workflow.Machine{}.AlertSent("o-orphan", st.Attempt, st.ProcessState, now.Add(time.Second))
	got, err := s.Apply(ctx, c)
	if err != nil || got.AlertPending || got.InFlight {
		t.Fatalf("alert confirmed without an orders item: %+v, %v", got, err)
	}
	if _, err := s.GetOrder(ctx, "o-orphan"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("the orders item came back: %v", err)
	}
	resubmit, err := machine.Resubmit(got, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Apply(ctx, resubmit); err != nil || got.ProcessState != workflow.CompensationPending {
		t.Fatalf("resumed without an orders item: %s, %v", got.ProcessState, err)
	}
}

// TestLedgerConformance holds the DynamoDB ledger to the ledger's contract
// on DynamoDB Local: the cases the in-memory double passes too.
func TestLedgerConformance(t *testing.T) {
	t.Parallel()
	storetest.RunLedger(t, func(t *testing.T, clk *clock.Fake) statestore.LedgerPort {
		db := enginetest.DynamoDB(t)
		tables := statestore.Tables{Ledger: enginetest.UniqueName(t, "ledger")}
		if err := statestore.CreateTables(context.Background(), db, tables, statestore.WithoutTTL()); err != nil {
			t.Fatal(err)
		}
		return statestore.New(db, tables, statestore.WithClock(clk))
	})
}
