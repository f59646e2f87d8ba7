package statestore_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sasflow/sas/internal/localstack/lossy"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	updateItem         = "DynamoDB_20120810.UpdateItem"
	transactWriteItems = "DynamoDB_20120810.TransactWriteItems"
)

// lossyStore is a store on the same tables as s whose client loses the
// answer of the next request of op it sends (the write itself commits);
// the SDK's retryer sends it again, which then fails its condition against
// the write it made itself, or for a transaction is answered as the one
// its idempotency token already committed.
func lossyStore(t *testing.T, tables statestore.Tables, op string) (*statestore.Store, *lossy.Transport) {
	t.Helper()
	lose := &lossy.Transport{Lose: lossy.First(op, 1)}
	db := enginetest.DynamoDB(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: lose} })
	return statestore.New(db, tables), lose
}

// TestWriteWhoseAnswerWasLostIsOwnWrite: every state write whose answer was
// lost after it committed is recognized as the caller's own when the SDK's
// retry fails the condition, instead of being reported as a lost race.
func TestWriteWhoseAnswerWasLostIsOwnWrite(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Second)
	for _, tc := range []struct {
		name string
		// before brings the record to where the change applies, on a
		// reliable store.
		before func(t *testing.T, s *statestore.Store, id string) workflow.State
		change func(seen workflow.State) workflow.Change
		check  func(t *testing.T, got workflow.State)
		// op is the request whose answer is lost; UpdateItem when empty.
		op string
	}{{
		name: "claim",
		change: func(seen workflow.State) workflow.Change {
			return machine.Claim(seen.OrderID, 0, false, "scheduler/a", now)
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Processing || got.LockedBy != "scheduler/a" || got.Attempt != 1 {
				t.Fatalf("claim returned %+v", got)
			}
		},
	}, {
		name:   "commit and claim the next step",
		before: claimed,
		change: func(seen workflow.State) workflow.Change {
			return machine.StepCompleted(seen.OrderID, 0, seen.Attempt, []byte(`{"ok":true}`), "scheduler/b", now)
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Processing || got.StepIndex != 1 || got.LockedBy != "scheduler/b" || got.Attempt != 2 {
				t.Fatalf("commit returned %+v", got)
			}
		},
	}, {
		name:   "permanent failure that starts the compensation",
		before: claimed,
		change: func(seen workflow.State) workflow.Change {
			return machine.StepRejected(seen.OrderID, 0, seen.Attempt, "rejected", false, "scheduler/b", now)
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Compensating || got.LockedBy != "scheduler/b" {
				t.Fatalf("failure returned %+v", got)
			}
		},
	}, {
		name: "operator cancel",
		change: func(seen workflow.State) workflow.Change {
			c, err := machine.Cancel(seen, now, now.Add(time.Minute))
			if err != nil {
				panic(err)
			}
			return c
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Cancelled || !got.Cancelled {
				t.Fatalf("cancel returned %+v", got)
			}
		},
	}, {
		name:   "supervisor retry",
		before: claimed,
		change: func(seen workflow.State) workflow.Change {
			c, _ := machine.Expired(seen, seen.CompleteBy.Add(time.Second))
			return c
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Pending || got.FailureCount != 1 {
				t.Fatalf("recovery returned %+v", got)
			}
		},
	}, {
		name: "operator retry, with the orders item's TTL",
		before: func(t *testing.T, s *statestore.Store, id string) workflow.State {
			st := claimed(t, s, id)
			st, err := s.Apply(context.Background(), machine.StepRejected(id, 0, st.Attempt, "rejected", false, "scheduler/b", now))
			if err == nil {
				st, err = s.Apply(context.Background(), machine.UndoRejected(id, 0, st.Attempt, "compensation rejected", false, workflow.State{}, now))
			}
			if err != nil || st.ProcessState != workflow.CompensationFailed {
				t.Fatalf("into CompensationFailed: %s, %v", st.ProcessState, err)
			}
			return st
		},
		change: func(seen workflow.State) workflow.Change {
			c, err := machine.Resubmit(seen, now.Add(time.Second))
			if err != nil || !c.MovesOrder() {
				panic(fmt.Sprintf("resubmit %+v, %v", c, err))
			}
			return c
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.CompensationPending || got.Resubmits != 1 {
				t.Fatalf("retry returned %+v", got)
			}
		},
		op: transactWriteItems,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reliable, _, tables := openStore(t, nil)
			seen := seed(t, reliable, "o-lost")
			if tc.before != nil {
				seen = tc.before(t, reliable, "o-lost")
			}
			lossy, lose := lossyStore(t, tables, cmp.Or(tc.op, updateItem))
			got, err := lossy.Apply(context.Background(), tc.change(seen))
			if lose.Lost() != 1 {
				t.Fatalf("%d answers lost, want 1", lose.Lost())
			}
			if err != nil {
				t.Fatalf("a write that committed reported %v", err)
			}
			tc.check(t, got)
			// What it returned is what the table holds.
			stored, err := reliable.GetState(context.Background(), "o-lost")
			if err != nil {
				t.Fatal(err)
			}
			if stored.ProcessState != got.ProcessState || stored.Attempt != got.Attempt || stored.LockedBy != got.LockedBy {
				t.Fatalf("returned %+v, stored %+v", got, stored)
			}
		})
	}
}

// claimed claims step 0 on a reliable store: the record most writes apply
// to.
func claimed(t *testing.T, s *statestore.Store, id string) workflow.State {
	st, err := claim(s, id, 0, "scheduler/a", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSomebodyElsesWriteIsStillStale: a retried write that finds another
// writer's change is refused as before.
func TestSomebodyElsesWriteIsStillStale(t *testing.T) {
	t.Parallel()
	reliable, _, tables := openStore(t, nil)
	seed(t, reliable, "o-other")
	now := t0.Add(time.Second)
	if _, err := claim(reliable, "o-other", 0, "scheduler/a", now); err != nil {
		t.Fatal(err)
	}
	lossy, _ := lossyStore(t, tables, updateItem)
	if _, err := claim(lossy, "o-other", 0, "scheduler/b", now); err == nil {
		t.Fatal("a second claim won")
	}
}
