package costrun_test

import (
	"context"
	"maps"
	"testing"

	"github.com/sasflow/sas/internal/cost"
	"github.com/sasflow/sas/internal/localstack/costrun"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// TestWriteUnitsPerOrder pins the DynamoDB write units of a two-step order
// on the happy path, per table and index, as DynamoDB Local reports them:
// a change that adds write units (a bigger item, an index entry that moves)
// fails here, and `make cost` shows what it costs.
func TestWriteUnitsPerOrder(t *testing.T) {
	t.Parallel()
	ddb, aws := enginetest.Endpoints(t)
	const orders = 5
	u, err := costrun.Run(context.Background(), costrun.Options{DynamoDBURL: ddb, AWSURL: aws, Orders: orders, Scenario: costrun.Happy, Workflow: workflow.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		// The transaction writes both items, each at most 1 KB, at twice
		// the units, and the index entries it creates at twice too.
		"orders":         2,
		"orders/ByOwner": 2,
		// Transaction 2 (the first step claimed in it), then two updates
		// of 1 each (commit and claim next; commit): the record stays
		// under 1 KB.
		"state": 4,
		// Entered in the transaction (2), left at Processed (1); a claim's
		// new CompleteBy does not move it.
		"state/InFlightByDeadline": 3,
		// No "state/ByState": a Processed order is never listed, and no
		// write on its way there is in a listed state.
	}
	got := map[string]float64{}
	for k, v := range u.WRU {
		if v != 0 {
			got[k] = v / orders
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("WRU per order = %v, want %v", got, want)
	}
	if total := u.WRUPerOrder(); total != 11 {
		t.Errorf("WRU per order %v in all, want 11", total)
	}
	// The transaction's index entries, as DynamoDB Local counts them.
	txn := map[string]float64{"orders/ByOwner": 2 * orders, "state/InFlightByDeadline": 2 * orders}
	if !maps.Equal(u.TransactionIndexWRU, txn) {
		t.Errorf("transactions' index WRU = %v, want %v", u.TransactionIndexWRU, txn)
	}
	// Run refuses a run whose orders are not one trace each; the count
	// here holds the segments to the order's path: the Submission, the
	// Scheduler's three records (dispatch reply, second dispatch... see
	// below) and the two Agents.
	if tr := u.Tracing; tr.RecordedOrders != orders || tr.Traces != orders || tr.Segments < 4*orders || tr.Requests == 0 {
		t.Errorf("tracing %+v: want %d orders in %d traces of at least 4 segments each", tr, orders, orders)
	}
}

// TestCodeStepUsageIsMeasuredApart: on the current catalog's workflow
// (order v3, whose third step, ship-order, is a code step) the run
// measures each step's Agent apart: the code step's ledger reads and
// writes and its S3 PutObject are its own, an HTTP step has neither.
func TestCodeStepUsageIsMeasuredApart(t *testing.T) {
	t.Parallel()
	ddb, aws := enginetest.Endpoints(t)
	const orders = 5
	u, err := costrun.Run(context.Background(), costrun.Options{DynamoDBURL: ddb, AWSURL: aws, Orders: orders, Scenario: costrun.Happy})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]cost.StepUsage{}
	for _, s := range u.Steps {
		byName[s.Name] = s
	}
	ship, charge := byName["ship-order"], byName["charge-payment"]
	if len(u.Steps) != 3 || !ship.Code || charge.Code {
		t.Fatalf("steps %+v: want order v3's three, ship-order the code step", u.Steps)
	}
	// One shipment object per order, on the happy path.
	if got := ship.Requests["S3 PutObject"]; got != orders {
		t.Errorf("ship-order made %d S3 PutObject for %d orders (requests %v)", got, orders, ship.Requests)
	}
	if u.Requests["S3 PutObject"] != orders {
		t.Errorf("the run's S3 PutObject %d, want %d", u.Requests["S3 PutObject"], orders)
	}
	// The ledger: a claim and a finish, each a write of a small item.
	if got := ship.WRU["ledger"] / orders; got != 2 {
		t.Errorf("ship-order's ledger WRU per order = %v, want 2 (claim, finish); requests %v", got, ship.Requests)
	}
	// Besides the step's own, one write an order: the Timer gives the
	// entry its order's TTL once the order ended.
	if u.WRU["ledger"] != ship.WRU["ledger"]+float64(orders) || u.RRU["ledger"] != ship.RRU["ledger"] {
		t.Errorf("ledger units outside ship-order's Agent: run %v/%v, step %v/%v, want the step's and one write an order", u.WRU["ledger"], u.RRU["ledger"], ship.WRU["ledger"], ship.RRU["ledger"])
	}
	if charge.WRU["ledger"] != 0 || charge.Requests["S3 PutObject"] != 0 || charge.RemoteCalls != orders || ship.RemoteCalls != 0 {
		t.Errorf("charge-payment %+v, ship-order %+v: want the remote calls on the HTTP step, the ledger and S3 on the code step", charge, ship)
	}
	for _, s := range u.Steps {
		if s.Records != orders || s.HandlerTime <= 0 || s.Requests["SQS SendMessage"] != orders {
			t.Errorf("step %s: %d records in %v, requests %v: want one record and one reply per order", s.Name, s.Records, s.HandlerTime, s.Requests)
		}
	}
	t.Logf("ship-order: requests %v, WRU %v, RRU %v", ship.Requests, ship.WRU, ship.RRU)
}

// TestARecoveredOrderIsStillOneTrace: the Retried scenario's recoveries
// (the fast path's, from the order's record) join the order's trace; Run
// fails if any order's segments form more than one trace or a broken path.
func TestARecoveredOrderIsStillOneTrace(t *testing.T) {
	t.Parallel()
	ddb, aws := enginetest.Endpoints(t)
	const orders = 3
	u, err := costrun.Run(context.Background(), costrun.Options{DynamoDBURL: ddb, AWSURL: aws, Orders: orders, Scenario: costrun.Retried})
	if err != nil {
		t.Fatal(err)
	}
	if u.Tracing.Traces != orders {
		t.Errorf("%d traces for %d orders", u.Tracing.Traces, orders)
	}
}

// TestWriteUnitsPerKeyedOrder: an order with an Idempotency-Key writes its
// key item in the creating transaction too, a small item at twice the
// units, and nothing else.
func TestWriteUnitsPerKeyedOrder(t *testing.T) {
	t.Parallel()
	ddb, aws := enginetest.Endpoints(t)
	const orders = 5
	u, err := costrun.Run(context.Background(), costrun.Options{DynamoDBURL: ddb, AWSURL: aws, Orders: orders, Scenario: costrun.Happy, Keyed: true, Workflow: workflow.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"orders": 4, "orders/ByOwner": 2, "state": 4, "state/InFlightByDeadline": 3}
	got := map[string]float64{}
	for k, v := range u.WRU {
		if v != 0 {
			got[k] = v / orders
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("WRU per keyed order = %v, want %v", got, want)
	}
}

// TestSweepReadsOnlyInFlightRecords: one sweep's read units do not grow
// with the finished records in the table (make cost -sweep measures it at
// 100,000).
func TestSweepReadsOnlyInFlightRecords(t *testing.T) {
	t.Parallel()
	ddb, _ := enginetest.Endpoints(t)
	reads, err := costrun.Sweep(context.Background(), ddb, 40, []int{100, 2000})
	if err != nil {
		t.Fatal(err)
	}
	if reads[0].RRU == 0 || reads[1].RRU != reads[0].RRU {
		t.Errorf("sweep read units: %+v, want the same with 100 and 2,000 finished records", reads)
	}
}
