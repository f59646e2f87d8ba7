package statestore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The ledger is a table of its own, declared with the others: keyed by
// "k" alone, on demand, no index and no stream (nothing reads its
// changes), TTL on "expiresAt". Only the tables named are declared.
func TestTheLedgerTableIsDeclaredWithTheOthers(t *testing.T) {
	t.Parallel()
	all := statestore.CreateTableInputs(statestore.Tables{Orders: "o", State: "s", Ledger: "l"})
	if len(all) != 3 || aws.ToString(all[2].TableName) != "l" {
		t.Fatalf("declared %d tables, want orders, state and ledger", len(all))
	}
	l := all[2]
	if len(l.KeySchema) != 1 || aws.ToString(l.KeySchema[0].AttributeName) != statestore.LedgerKeyAttr || l.KeySchema[0].KeyType != types.KeyTypeHash ||
		l.BillingMode != types.BillingModePayPerRequest || len(l.GlobalSecondaryIndexes) != 0 || l.StreamSpecification != nil {
		t.Fatalf("the ledger's table: %+v", l)
	}
	if got := statestore.CreateTableInputs(statestore.Tables{Orders: "o", State: "s"}); len(got) != 2 {
		t.Fatalf("without a ledger, %d tables, want the two", len(got))
	}
	if got := statestore.CreateTableInputs(statestore.Tables{Ledger: "l"}); len(got) != 1 || aws.ToString(got[0].TableName) != "l" {
		t.Fatalf("a code step's tables: %d, want the ledger alone", len(got))
	}
	ttl := statestore.TimeToLiveInputs(statestore.Tables{Orders: "o", State: "s", Ledger: "l"})
	if len(ttl) != 3 || aws.ToString(ttl[2].TimeToLiveSpecification.AttributeName) != statestore.LedgerExpiresAtAttr {
		t.Fatalf("TTL requests %+v, want the ledger's on %s", ttl, statestore.LedgerExpiresAtAttr)
	}
}

// An entry holds its output and a bounded rest; the largest output the
// ledger keeps leaves that rest's room in a DynamoDB item.
func TestTheLedgerBoundsAnOutputUnderTheItemLimit(t *testing.T) {
	t.Parallel()
	if statestore.MaxLedgerOutputBytes >= workflow.MaxItemBytes || workflow.MaxItemBytes-statestore.MaxLedgerOutputBytes < 2<<10 {
		t.Fatalf("MaxLedgerOutputBytes %d leaves %d bytes of a %d-byte item", statestore.MaxLedgerOutputBytes,
			workflow.MaxItemBytes-statestore.MaxLedgerOutputBytes, workflow.MaxItemBytes)
	}
	if got := statestore.LedgerKey("ship-order", "o-1/ship-order"); got != "ship-order#o-1/ship-order" {
		t.Fatalf("LedgerKey = %q", got)
	}
}
