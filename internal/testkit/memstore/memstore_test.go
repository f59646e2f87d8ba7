package memstore_test

import (
	"testing"

	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/internal/testkit/storetest"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
)

// TestConformance holds the in-memory store to the state store's contract,
// the same suite the DynamoDB store passes on DynamoDB Local.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(_ *testing.T, clk clock.Clock) statestore.Port {
		s := memstore.New()
		s.Clock = clk
		return s
	})
}

// TestLedgerConformance holds the in-memory ledger to the ledger's
// contract, the same cases the DynamoDB store passes on DynamoDB Local.
func TestLedgerConformance(t *testing.T) {
	t.Parallel()
	storetest.RunLedger(t, func(_ *testing.T, clk *clock.Fake) statestore.LedgerPort {
		s := memstore.New()
		s.Clock = clk
		return s
	})
}
