package ddbmodel_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sasflow/sas/internal/testkit/ddbmodel"
	"github.com/sasflow/sas/internal/testkit/storetest"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
)

// tables are the tables every test creates, as the stack declares them.
var tables = statestore.Tables{Orders: "orders", State: "state", Ledger: "ledger"}

// open is a model with the tables created, its time clk's.
func open(t testing.TB, o ddbmodel.Options) *ddbmodel.Model {
	t.Helper()
	m := ddbmodel.New(o)
	if err := statestore.CreateTables(context.Background(), m, tables); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConformance holds the real store on the model to the state store's
// contract: the suite DynamoDB Local and memstore pass.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clk clock.Clock) statestore.Port {
		return statestore.New(open(t, ddbmodel.Options{Clock: clk}), tables, statestore.WithClock(clk))
	})
}

// TestLedgerConformance holds the real store's ledger on the model to the
// ledger's contract.
func TestLedgerConformance(t *testing.T) {
	t.Parallel()
	storetest.RunLedger(t, func(t *testing.T, clk *clock.Fake) statestore.LedgerPort {
		return statestore.New(open(t, ddbmodel.Options{Clock: clk}), tables, statestore.WithClock(clk))
	})
}

// TestConformanceWithLostAnswers holds the real store to the state store's
// contract when the answer of every write it makes is lost once, after the
// write took effect: the SDK's retry is answered by a condition failing
// against the write itself, or by the transaction's ClientRequestToken,
// and the store must still answer as if nothing was lost. Its reads run
// one after the other (statestore.WithSerialReads), as in the simulation.
func TestConformanceWithLostAnswers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clk clock.Clock) statestore.Port {
		var lost atomic.Int64
		m := open(t, ddbmodel.Options{Clock: clk, Call: losing(func(ddbmodel.Call) bool { return true }, &lost)})
		return statestore.New(m, tables, statestore.WithClock(clk), statestore.WithSerialReads())
	})
}
