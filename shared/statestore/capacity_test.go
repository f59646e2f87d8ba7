package statestore_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// indexMeter asks every UpdateItem and transaction for the capacity each
// index consumed, and keeps the last answer's.
type indexMeter struct {
	*dynamodb.Client
	mu   sync.Mutex
	last map[string]float64
}

func (m *indexMeter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	out, err := m.Client.UpdateItem(ctx, in, opts...)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = map[string]float64{}
	if err == nil && out.ConsumedCapacity != nil {
		for name, c := range out.ConsumedCapacity.GlobalSecondaryIndexes {
			m.last[name] = aws.ToFloat64(c.CapacityUnits)
		}
	}
	return out, err
}

// TransactWriteItems is metered as UpdateItem is: the rare changes that
// move the orders item's TTL too are transactions.
func (m *indexMeter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	out, err := m.Client.TransactWriteItems(ctx, in, opts...)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = map[string]float64{}
	if err == nil {
		for _, cc := range out.ConsumedCapacity {
			for name, c := range cc.GlobalSecondaryIndexes {
				m.last[name] += aws.ToFloat64(c.CapacityUnits)
			}
		}
	}
	return out, err
}

// used is what ByState consumed in the last UpdateItem or transaction.
func (m *indexMeter) used() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[statestore.ByStateIndex]
}

// TestOnlyAStateChangeWritesByState: ByState costs a write only when a
// record enters or leaves a listed state. Claims and commits in flight,
// and the writes that keep a listed state (an alert confirmed, an alert
// owed again), consume none of its capacity, so the index no longer costs a
// delete and a put on every write.
func TestOnlyAStateChangeWritesByState(t *testing.T) {
	t.Parallel()
	meter := &indexMeter{}
	s, _, _ := openStore(t, func(c *dynamodb.Client) statestore.Client { meter.Client = c; return meter })
	// One step without an undo: its rejection leaves the order in Error.
	plain := workflow.Machine{Def: workflow.Definition{Name: "plain", Steps: []workflow.Step{{Name: "notify", Budget: time.Minute}}},
		Policy: workflow.DefaultPolicy()}
	order := workflow.Order{OrderID: "c-1", CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}},
		TotalCents: 100, RequestHash: "h", CreatedAt: t0}
	st := workflow.NewState("c-1", plain.Def, json.RawMessage(`{}`), t0, t0.Add(time.Minute))
	if err := s.CreateOrder(context.Background(), order, st); err != nil {
		t.Fatal(err)
	}
	now := t0
	steps := []struct {
		name   string
		change func(workflow.State) workflow.Change
		writes bool
	}{
		{"claimed: Pending to Processing", func(st workflow.State) workflow.Change {
			return plain.Claim(st.OrderID, 0, false, "s", now)
		}, false},
		{"rejected: into Error", func(st workflow.State) workflow.Change {
			return plain.StepRejected(st.OrderID, 0, st.Attempt, "rejected: no", false, "s", now)
		}, true},
		{"its alert owed again: Error still", func(st workflow.State) workflow.Change {
			c, _ := plain.Expired(st, st.CompleteBy)
			return c
		}, false},
		{"its alert sent: Error still", func(st workflow.State) workflow.Change {
			return workflow.Machine{}.AlertSent(st.OrderID, st.Attempt, st.ProcessState, now)
		}, false},
		{"retried: out of Error", func(st workflow.State) workflow.Change {
			c, _ := plain.Resubmit(st, now)
			return c
		}, true},
		{"claimed again", func(st workflow.State) workflow.Change {
			return plain.Claim(st.OrderID, 0, false, "s", now)
		}, false},
	}
	for _, step := range steps {
		now = now.Add(time.Second)
		c := step.change(st)
		if c.OrderID == "" {
			t.Fatalf("%s: no change", step.name)
		}
		var err error
		if st, err = s.Apply(context.Background(), c); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if used := meter.used(); (used > 0) != step.writes {
			t.Errorf("%s: ByState consumed %v write units, want some: %v", step.name, used, step.writes)
		}
	}
}
