package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The owner of the stamp's tests, an IAM user, and its unique ID.
const (
	stampUser   = "arn:aws:iam::111122223333:user/team/alice"
	stampUserID = "AIDAZ3EXAMPLEALICE01"
)

// legacyOrder writes an order of owner as a release before unique IDs
// wrote it: its owner by ARN alone, its ByOwner keys and its key's slot
// under the ARN. key "" makes it without a key.
func legacyOrder(t *testing.T, s *statestore.Store, id, owner, key string, at time.Time) {
	t.Helper()
	o := workflow.Order{OrderID: id, Owner: owner, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}},
		TotalCents: 100, RequestHash: "h-" + id, CreatedAt: at, ExpiresAt: at.Add(90 * 24 * time.Hour)}
	if key != "" {
		o.IdempotencyKey, o.KeyExpiresAt = key, at.Add(90*24*time.Hour)
	}
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), at, at.Add(time.Minute))
	// Ended at once, so its record expires before its orders item.
	st.Owner, st.ExpiresAt = owner, at.Add(89*24*time.Hour)
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatal(err)
	}
}

// unstamped scans for the unstamped orders, by ID.
func unstamped(t *testing.T, st *statestore.Stamper) map[string]statestore.Unstamped {
	t.Helper()
	out := map[string]statestore.Unstamped{}
	if err := st.ScanUnstamped(context.Background(), func(u statestore.Unstamped) error { out[u.OrderID] = u; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// listed lists an owner's orders, by its key.
func listed(t *testing.T, s *statestore.Store, key string) []string {
	t.Helper()
	p, err := s.ListByOwner(context.Background(), key, statestore.MaxPage, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range p.States {
		ids = append(ids, st.OrderID)
	}
	return ids
}

// TestStampOwnerMakesALegacyOrderItsPrincipals: the scan finds the orders
// of an owner without an ID (not the key items, not an order with an ID,
// not an expired one); a stamp makes an order what the Submission writes
// for that owner now: the record keeps the ID instead of the ARN, the key
// names the order under the ID, the order is listed under it, and under
// the ARN no more. A second stamp writes nothing and says so; the order is
// found no more.
func TestStampOwnerMakesALegacyOrderItsPrincipals(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0.Add(time.Hour))
	s, db, tables := openStore(t, nil, statestore.WithClock(clk))
	legacyOrder(t, s, "o-keyed", stampUser, "k-1", t0)
	legacyOrder(t, s, "o-plain", stampUser, "", t0.Add(time.Second))
	legacyOrder(t, s, "o-expired", stampUser, "", t0.Add(-100*24*time.Hour))
	// An order the Submission made with the ID.
	o := workflow.Order{OrderID: "o-new", Owner: stampUser, OwnerID: stampUserID, CreatedAt: t0.Add(2 * time.Second)}
	st := workflow.NewState("o-new", workflow.Reference(), json.RawMessage(`{}`), o.CreatedAt, o.CreatedAt.Add(time.Minute))
	st.OwnerID = stampUserID
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatal(err)
	}
	stamper := statestore.NewStamper(db, tables, clk)

	found := unstamped(t, stamper)
	if len(found) != 2 || found["o-keyed"] != (statestore.Unstamped{OrderID: "o-keyed", Owner: stampUser, IdempotencyKey: "k-1", CreatedAt: t0}) ||
		found["o-plain"].Owner != stampUser {
		t.Fatalf("the scan found %+v", found)
	}
	for _, id := range []string{"o-keyed", "o-plain"} {
		done, err := stamper.StampOwner(context.Background(), found[id], stampUserID)
		want := statestore.Stamp{Record: true, Key: statestore.KeyNone}
		if id == "o-keyed" {
			want.Key = statestore.KeyCopied
		}
		if err != nil || done != want {
			t.Fatalf("stamp %s = %+v, %v; want %+v", id, done, err, want)
		}
	}
	for _, id := range []string{"o-keyed", "o-plain"} {
		st, err := s.GetState(context.Background(), id)
		if err != nil || st.Owner != "" || st.OwnerID != stampUserID {
			t.Fatalf("the record of %s: owner %q, ID %q, %v", id, st.Owner, st.OwnerID, err)
		}
		o, err := s.GetOrder(context.Background(), id)
		if err != nil || o.Owner != stampUser || o.OwnerID != stampUserID {
			t.Fatalf("the order %s: owner %q, ID %q, %v", id, o.Owner, o.OwnerID, err)
		}
	}
	if got := listed(t, s, stampUserID); !slices.Equal(got, []string{"o-new", "o-plain", "o-keyed"}) {
		t.Fatalf("the principal lists %v", got)
	}
	if got := listed(t, s, stampUser); len(got) != 0 {
		t.Fatalf("the ARN lists %v", got)
	}
	if k, err := s.GetKey(context.Background(), stampUserID, "k-1"); err != nil || k.OrderID != "o-keyed" || k.RequestHash != "h-o-keyed" || k.OwnerKey() != stampUserID {
		t.Fatalf("the key under the ID names %+v, %v", k, err)
	}
	// Done: found no more, and a stamp again changes nothing.
	if again := unstamped(t, stamper); len(again) != 0 {
		t.Fatalf("found again: %+v", again)
	}
	if done, err := stamper.StampOwner(context.Background(), found["o-keyed"], stampUserID); err != nil || done != (statestore.Stamp{Record: true, Key: statestore.KeyCopied}) {
		t.Fatalf("a second stamp = %+v, %v", done, err)
	}
}

// stampCutter fails the orders item's stamp, the last write, while cut is
// set, as a crash would cut a stamp off there.
type stampCutter struct {
	*dynamodb.Client
	orders string
	cut    atomic.Bool
}

func (c *stampCutter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.cut.Load() && aws.ToString(in.TableName) == c.orders {
		return nil, errors.New("cut off")
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

// TestAStampCutOffIsFinishedByTheNext: a stamp cut off before its last
// write leaves the order to the next scan, whose stamp finishes it without
// writing again what the first wrote.
func TestAStampCutOffIsFinishedByTheNext(t *testing.T) {
	t.Parallel()
	s, db, tables := openStore(t, nil)
	legacyOrder(t, s, "o-cut", stampUser, "k-cut", t0)
	cutter := &stampCutter{Client: db, orders: tables.Orders}
	cutter.cut.Store(true)
	stamper := statestore.NewStamper(cutter, tables, nil)
	u := unstamped(t, stamper)["o-cut"]
	if _, err := stamper.StampOwner(context.Background(), u, stampUserID); err == nil {
		t.Fatal("the cut stamp succeeded")
	}
	if st, _ := s.GetState(context.Background(), "o-cut"); st.OwnerID != stampUserID {
		t.Fatalf("the record was not stamped before the cut: %q", st.OwnerID)
	}
	if got := listed(t, s, stampUserID); len(got) != 0 {
		t.Fatalf("listed under the ID before the order is stamped: %v", got)
	}
	cutter.cut.Store(false)
	u, ok := unstamped(t, stamper)["o-cut"]
	if !ok {
		t.Fatal("the next scan does not find the order cut off")
	}
	if done, err := stamper.StampOwner(context.Background(), u, stampUserID); err != nil || done != (statestore.Stamp{Record: true, Key: statestore.KeyCopied}) {
		t.Fatalf("the next stamp = %+v, %v", done, err)
	}
	if got := listed(t, s, stampUserID); !slices.Equal(got, []string{"o-cut"}) {
		t.Fatalf("listed under the ID: %v", got)
	}
}

// TestStampOwnerEdges: what a stamp meets besides a whole legacy order: a
// record gone, a key forgotten, a key the principal used anew since (which
// keeps its new order), the key of an order an older release made at its
// key's slot, and an item naming another owner or ID, which it refuses
// and leaves as it is.
func TestStampOwnerEdges(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0.Add(time.Hour))
	s, db, tables := openStore(t, nil, statestore.WithClock(clk))
	stamper := statestore.NewStamper(db, tables, clk)
	ctx := context.Background()

	t.Run("no record", func(t *testing.T) {
		legacyOrder(t, s, "o-norecord", stampUser, "", t0)
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tables.State),
			Key: map[string]types.AttributeValue{statestore.KeyOrderID: &types.AttributeValueMemberS{Value: "o-norecord"}}}); err != nil {
			t.Fatal(err)
		}
		done, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: "o-norecord", Owner: stampUser, CreatedAt: t0}, stampUserID)
		if err != nil || done != (statestore.Stamp{Record: false, Key: statestore.KeyNone}) {
			t.Fatalf("stamp = %+v, %v", done, err)
		}
		if o, _ := s.GetOrder(ctx, "o-norecord"); o.OwnerID != stampUserID {
			t.Fatalf("the order is not stamped: %+v", o)
		}
	})
	t.Run("a forgotten key", func(t *testing.T) {
		made := t0.Add(-90*24*time.Hour + time.Hour)
		legacyOrder(t, s, "o-forgotten", stampUser, "k-old", made)
		clk.Set(t0.Add(2 * time.Hour)) // the key's 90 days passed an hour after t0
		done, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: "o-forgotten", Owner: stampUser, IdempotencyKey: "k-old", CreatedAt: made}, stampUserID)
		if err != nil || done.Key != statestore.KeyNone {
			t.Fatalf("stamp = %+v, %v", done, err)
		}
		if _, err := s.GetKey(ctx, stampUserID, "k-old"); !errors.Is(err, workflow.ErrNotFound) {
			t.Fatalf("a forgotten key under the ID: %v", err)
		}
	})
	t.Run("a key used anew", func(t *testing.T) {
		legacyOrder(t, s, "o-old-use", stampUser, "k-again", t0)
		// The principal's retry after the upgrade made an order of its own.
		o := workflow.Order{OrderID: "o-new-use", Owner: stampUser, OwnerID: stampUserID, IdempotencyKey: "k-again", RequestHash: "h-new",
			CreatedAt: t0.Add(time.Minute), KeyExpiresAt: t0.Add(90 * 24 * time.Hour)}
		st := workflow.NewState("o-new-use", workflow.Reference(), json.RawMessage(`{}`), o.CreatedAt, o.CreatedAt.Add(time.Minute))
		st.OwnerID = stampUserID
		if err := s.CreateOrder(ctx, o, st); err != nil {
			t.Fatal(err)
		}
		done, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: "o-old-use", Owner: stampUser, IdempotencyKey: "k-again", CreatedAt: t0}, stampUserID)
		if err != nil || done != (statestore.Stamp{Record: true, Key: statestore.KeyTaken}) {
			t.Fatalf("stamp = %+v, %v", done, err)
		}
		if k, _ := s.GetKey(ctx, stampUserID, "k-again"); k.OrderID != "o-new-use" {
			t.Fatalf("the key names %q, want the new order", k.OrderID)
		}
	})
	t.Run("an order at its key's slot", func(t *testing.T) {
		slot := statestore.KeySlot(stampUser, "k-slot")
		legacyOrder(t, s, slot, stampUser, "", t0)
		done, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: slot, Owner: stampUser, IdempotencyKey: "k-slot", CreatedAt: t0}, stampUserID)
		if err != nil || done.Key != statestore.KeyCopied {
			t.Fatalf("stamp = %+v, %v", done, err)
		}
		if k, err := s.GetKey(ctx, stampUserID, "k-slot"); err != nil || k.OrderID != slot {
			t.Fatalf("the key under the ID names %+v, %v", k, err)
		}
	})
	t.Run("another owner", func(t *testing.T) {
		legacyOrder(t, s, "o-other", ownerB, "", t0)
		_, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: "o-other", Owner: stampUser, CreatedAt: t0}, stampUserID)
		if !errors.Is(err, statestore.ErrOwnerChanged) {
			t.Fatalf("stamping another owner's order: %v", err)
		}
		if st, _ := s.GetState(ctx, "o-other"); st.Owner != ownerB || st.OwnerID != "" {
			t.Fatalf("the other owner's record: %q %q", st.Owner, st.OwnerID)
		}
	})
	t.Run("another ID", func(t *testing.T) {
		legacyOrder(t, s, "o-other-id", stampUser, "", t0)
		if _, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: "o-other-id", Owner: stampUser, CreatedAt: t0}, stampUserID); err != nil {
			t.Fatal(err)
		}
		_, err := stamper.StampOwner(ctx, statestore.Unstamped{OrderID: "o-other-id", Owner: stampUser, CreatedAt: t0}, "AIDAZ3EXAMPLEOTHER01")
		if !errors.Is(err, statestore.ErrOwnerChanged) {
			t.Fatalf("stamping another ID over the first: %v", err)
		}
		if o, _ := s.GetOrder(ctx, "o-other-id"); o.OwnerID != stampUserID {
			t.Fatalf("the order's ID: %q", o.OwnerID)
		}
	})
}
