package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/storetest"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// openStore creates fresh tables on DynamoDB Local, and a store on them
// whose client wrap may wrap the engine's (nil: the engine's itself).
func openStore(t testing.TB, wrap func(*dynamodb.Client) statestore.Client) (*statestore.Store, *dynamodb.Client, statestore.Tables) {
	t.Helper()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), db, tables); err != nil {
		t.Fatal(err)
	}
	var c statestore.Client = db
	if wrap != nil {
		c = wrap(db)
	}
	return statestore.New(c, tables), db, tables
}

// newStore is a store on fresh tables.
func newStore(t testing.TB) *statestore.Store {
	t.Helper()
	s, _, _ := openStore(t, nil)
	return s
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

// machine runs the shipped workflow under the default policy.
var machine = workflow.Machine{Def: workflow.Default(), Policy: workflow.DefaultPolicy()}

// claim takes step of id for owner at now.
func claim(s *statestore.Store, id string, step int, owner string, now time.Time) (workflow.State, error) {
	return s.Apply(context.Background(), machine.Claim(id, step, false, owner, now))
}

// TestConformance holds the DynamoDB store to the state store's contract on
// DynamoDB Local: the suite the in-memory double passes too.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Port { return newStore(t) })
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
	st := workflow.NewState("o-1", workflow.Default(), nil, t0, t0)
	err := s.CreateOrder(ctx, workflow.Order{OrderID: "o-1", RequestHash: "other", CreatedAt: t0}, st)
	if !errors.Is(err, workflow.ErrExists) {
		t.Fatalf("CreateOrder = %v, want ErrExists", err)
	}
	if o, _ := s.GetOrder(ctx, "o-1"); o.RequestHash != "h" {
		t.Fatalf("the order was overwritten: %+v", o)
	}
}
