package statestore_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sasflow/sas/internal/localstack/lossy"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

const updateItem = "DynamoDB_20120810.UpdateItem"

// lossyStore is a store on the same tables as s whose client loses the
// answer of the next UpdateItem it sends (the write itself commits); the
// SDK's retryer sends it again, which then fails its condition against the
// write it made itself.
func lossyStore(t *testing.T, tables statestore.Tables) (*statestore.Store, *lossy.Transport) {
	t.Helper()
	lose := &lossy.Transport{Lose: lossy.First(updateItem, 1)}
	db := enginetest.DynamoDB(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: lose} })
	return statestore.New(db, tables), lose
}

func newTables(t *testing.T) (*statestore.Store, statestore.Tables) {
	t.Helper()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), db, tables); err != nil {
		t.Fatal(err)
	}
	return statestore.New(db, tables), tables
}

// TestWriteWhoseAnswerWasLostIsOwnWrite: every state write whose answer was
// lost after it committed is recognized as the caller's own when the SDK's
// retry fails the condition, instead of being reported as a lost race.
func TestWriteWhoseAnswerWasLostIsOwnWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	def := workflow.Default()
	now := t0.Add(time.Second)
	// claimed claims step 0, the record most writes apply to.
	claimed := func(t *testing.T, s *statestore.Store, id string) workflow.State {
		st, err := claim(s, id, 0, "scheduler/a", now)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tc := range []struct {
		name string
		// before brings the record to where the write applies, on a
		// reliable store.
		before func(t *testing.T, s *statestore.Store, id string) workflow.State
		write  func(s *statestore.Store, seen workflow.State) (workflow.State, error)
		check  func(t *testing.T, got workflow.State)
	}{{
		name: "claim",
		write: func(s *statestore.Store, _ workflow.State) (workflow.State, error) {
			return claim(s, "o-lost", 0, "scheduler/a", now)
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Processing || got.LockedBy != "scheduler/a" || got.Attempt != 1 {
				t.Fatalf("claim returned %+v", got)
			}
		},
	}, {
		name:   "advance and claim the next step",
		before: claimed,
		write: func(s *statestore.Store, seen workflow.State) (workflow.State, error) {
			return s.Advance(ctx, statestore.Advance{OrderID: seen.OrderID, StepIndex: 0, Attempt: seen.Attempt, Now: now,
				Output: []byte(`{"ok":true}`), Next: &statestore.NextClaim{Step: def.Steps[1].Name, Owner: "scheduler/b", CompleteBy: now.Add(time.Minute)}})
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Processing || got.StepIndex != 1 || got.LockedBy != "scheduler/b" || got.Attempt != 2 {
				t.Fatalf("advance returned %+v", got)
			}
		},
	}, {
		name:   "permanent failure that starts the compensation",
		before: claimed,
		write: func(s *statestore.Store, seen workflow.State) (workflow.State, error) {
			return s.Fail(ctx, statestore.Failure{OrderID: seen.OrderID, StepIndex: 0, Attempt: seen.Attempt, Now: now, Error: "rejected",
				AlertBy: now.Add(time.Minute), Undo: &statestore.UndoClaim{StepIndex: 0, Step: def.Steps[0].Name, Owner: "scheduler/b", CompleteBy: now.Add(time.Minute)}})
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Compensating || got.LockedBy != "scheduler/b" {
				t.Fatalf("fail returned %+v", got)
			}
		},
	}, {
		name: "operator cancel",
		write: func(s *statestore.Store, seen workflow.State) (workflow.State, error) {
			return s.Cancel(ctx, seen, def.StopAt(seen, workflow.StopCancel), now, now.Add(time.Minute))
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Cancelled || !got.Cancelled {
				t.Fatalf("cancel returned %+v", got)
			}
		},
	}, {
		name:   "supervisor retry",
		before: claimed,
		write: func(s *statestore.Store, seen workflow.State) (workflow.State, error) {
			late := seen.CompleteBy.Add(time.Second)
			return s.Recover(ctx, seen, workflow.DefaultPolicy().Recover(def, seen, late), late)
		},
		check: func(t *testing.T, got workflow.State) {
			if got.ProcessState != workflow.Pending || got.FailureCount != 1 {
				t.Fatalf("recover returned %+v", got)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reliable, tables := newTables(t)
			seen := seed(t, reliable, "o-lost")
			if tc.before != nil {
				seen = tc.before(t, reliable, "o-lost")
			}
			lossy, lose := lossyStore(t, tables)
			got, err := tc.write(lossy, seen)
			if lose.Lost() != 1 {
				t.Fatalf("%d answers lost, want 1", lose.Lost())
			}
			if err != nil {
				t.Fatalf("a write that committed reported %v", err)
			}
			tc.check(t, got)
			// What it returned is what the table holds.
			stored, err := reliable.GetState(ctx, "o-lost")
			if err != nil {
				t.Fatal(err)
			}
			if stored.ProcessState != got.ProcessState || stored.Attempt != got.Attempt || stored.LockedBy != got.LockedBy {
				t.Fatalf("returned %+v, stored %+v", got, stored)
			}
		})
	}
}

// TestSomebodyElsesWriteIsStillStale: a retried write that finds another
// writer's change is refused as before.
func TestSomebodyElsesWriteIsStillStale(t *testing.T) {
	t.Parallel()
	reliable, tables := newTables(t)
	seed(t, reliable, "o-other")
	now := t0.Add(time.Second)
	if _, err := claim(reliable, "o-other", 0, "scheduler/a", now); err != nil {
		t.Fatal(err)
	}
	lossy, _ := lossyStore(t, tables)
	if _, err := claim(lossy, "o-other", 0, "scheduler/b", now); err == nil {
		t.Fatal("a second claim won")
	}
}
