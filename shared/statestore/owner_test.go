package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	ownerA = "arn:aws:sts::111122223333:assumed-role/shop-a"
	ownerB = "arn:aws:iam::444455556666:user/shop-b"
)

// seedOwned writes an order of owner created at, Pending.
func seedOwned(t *testing.T, s *statestore.Store, id, owner string, at time.Time) {
	t.Helper()
	order := workflow.Order{OrderID: id, Owner: owner, CustomerID: "c-1", Currency: "EUR",
		Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}}, TotalCents: 100, RequestHash: "h", CreatedAt: at}
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{"orderId":"`+id+`","secret":"input"}`), at, at.Add(time.Minute))
	st.Owner, st.ClientID = owner, "client-"+id
	if err := s.CreateOrder(context.Background(), order, st); err != nil {
		t.Fatal(err)
	}
}

// listAll pages through owner's listing, limit per page.
func listAll(t *testing.T, s *statestore.Store, owner string, limit int) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		p, err := s.ListByOwner(context.Background(), owner, limit, cursor)
		if err != nil {
			t.Fatalf("ListByOwner(%s, %d, %q): %v", owner, limit, cursor, err)
		}
		pages++
		for _, st := range p.States {
			if st.Input != nil || st.Steps != nil {
				t.Fatalf("listing carries the input or the history: %+v", st)
			}
			ids = append(ids, st.OrderID)
		}
		if p.Next == "" {
			return ids, pages
		}
		if pages > 20 {
			t.Fatal("paging does not end")
		}
		cursor = p.Next
	}
}

// TestListByOwnerIsolatesOwners: each owner lists exactly its own orders,
// newest first, in pages; a cursor of one owner's listing is refused for
// another; an order without an owner (written before owners existed) is
// in nobody's listing.
func TestListByOwnerIsolatesOwners(t *testing.T) {
	t.Parallel()
	s, _, _ := openStore(t, nil)
	ctx := context.Background()
	var wantA []string
	for i := range 5 {
		id := fmt.Sprintf("a-%d", i)
		seedOwned(t, s, id, ownerA, t0.Add(time.Duration(i)*time.Second))
		wantA = append([]string{id}, wantA...) // newest first
	}
	seedOwned(t, s, "b-0", ownerB, t0)
	seedOwned(t, s, "b-1", ownerB, t0.Add(10*time.Second))
	seed(t, s, "legacy") // no owner

	ids, pages := listAll(t, s, ownerA, 2)
	if fmt.Sprint(ids) != fmt.Sprint(wantA) || pages != 3 {
		t.Fatalf("owner A listed %v in %d pages, want %v in 3", ids, pages, wantA)
	}
	if ids, _ := listAll(t, s, ownerB, 100); fmt.Sprint(ids) != "[b-1 b-0]" {
		t.Fatalf("owner B listed %v", ids)
	}
	if ids, _ := listAll(t, s, "arn:aws:iam::999999999999:user/nobody", 10); len(ids) != 0 {
		t.Fatalf("a caller without orders listed %v", ids)
	}

	// The summary: what a listing shows, read from the state record.
	p, err := s.ListByOwner(ctx, ownerB, 1, "")
	if err != nil || len(p.States) != 1 || p.Next == "" {
		t.Fatalf("first page of B: %+v, %v", p, err)
	}
	got := p.States[0]
	if got.OrderID != "b-1" || got.ProcessState != workflow.Pending || got.ClientID != "client-b-1" || got.Step != "reserve-inventory" ||
		got.EventSeq != 1 || !got.CreatedAt.Equal(t0.Add(10*time.Second)) || got.Workflow != workflow.Reference().ID() {
		t.Fatalf("summary %+v", got)
	}

	// B's cursor is not A's to use, and the reverse; forged ones are refused.
	first, err := s.ListByOwner(ctx, ownerA, 1, "")
	if err != nil || first.Next == "" {
		t.Fatal(first, err)
	}
	for _, bad := range []struct{ owner, cursor string }{
		{ownerA, p.Next}, {ownerB, first.Next}, {ownerA, "%%%"}, {ownerA, "e30"},
		// A ByState cursor is not a listing-by-owner cursor.
		{ownerA, byStateCursor},
	} {
		if _, err := s.ListByOwner(ctx, bad.owner, 1, bad.cursor); !errors.Is(err, statestore.ErrBadCursor) {
			t.Errorf("ListByOwner(%s, %q) error = %v, want ErrBadCursor", bad.owner, bad.cursor, err)
		}
	}
	if _, err := s.ListByOwner(ctx, "", 1, ""); err == nil {
		t.Error("a listing without an owner was served")
	}
	for _, limit := range []int{0, statestore.MaxPage + 1} {
		if _, err := s.ListByOwner(ctx, ownerA, limit, ""); err == nil {
			t.Errorf("limit %d accepted", limit)
		}
	}
}

// TestOrderItemCarriesTheIndexKeys: an order with an owner carries its
// ByOwner keys, its owner's shard and its creation's sort key, and
// CreatedAt stays as it was; an order without an owner carries none.
func TestOrderItemCarriesTheIndexKeys(t *testing.T) {
	t.Parallel()
	s, db, tables := openStore(t, nil)
	at := t0.Add(1234 * time.Millisecond)
	seedOwned(t, s, "k-1", ownerA, at)
	seed(t, s, "k-none")
	item := func(id string) map[string]types.AttributeValue {
		out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(tables.Orders),
			Key: map[string]types.AttributeValue{statestore.KeyOrderID: &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	got := item("k-1")
	shard, _ := got[statestore.OwnerShardAttr].(*types.AttributeValueMemberS)
	sort, _ := got[statestore.OwnerSortAttr].(*types.AttributeValueMemberS)
	created, _ := got["CreatedAt"].(*types.AttributeValueMemberS)
	wantShard := fmt.Sprintf("%s#%02d", ownerA, statestore.ListShardOf("k-1"))
	if shard == nil || shard.Value != wantShard || sort == nil || sort.Value != "1795348801234#k-1" ||
		created == nil || created.Value != "2026-11-22T12:00:01.234Z" || got["CreatedAtMs"] != nil {
		t.Fatalf("order item %v", got)
	}
	if none := item("k-none"); none[statestore.OwnerShardAttr] != nil || none[statestore.OwnerSortAttr] != nil {
		t.Fatalf("an order without an owner carries ByOwner keys: %v", none)
	}
	o, err := s.GetOrder(context.Background(), "k-1")
	if err != nil || o.Owner != ownerA || !o.CreatedAt.Equal(at) {
		t.Fatalf("GetOrder = %+v, %v", o, err)
	}
}

// stingyBatch answers only the first key of each BatchGetItem for its first
// stingy calls, leaving the rest unprocessed as a throttled DynamoDB does.
type stingyBatch struct {
	*dynamodb.Client
	stingy int32
	calls  atomic.Int32
}

func (c *stingyBatch) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if c.calls.Add(1) > c.stingy {
		return c.Client.BatchGetItem(ctx, in, opts...)
	}
	first := map[string]types.KeysAndAttributes{}
	left := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		one, rest := ka, ka
		one.Keys, rest.Keys = ka.Keys[:1], ka.Keys[1:]
		first[table] = one
		if len(rest.Keys) > 0 {
			left[table] = rest
		}
	}
	out, err := c.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: first}, opts...)
	if err != nil {
		return nil, err
	}
	out.UnprocessedKeys = left
	return out, nil
}

// TestListByOwnerRetriesUnprocessedKeys: keys DynamoDB leaves unprocessed
// are asked for again, a bounded number of times.
func TestListByOwnerRetriesUnprocessedKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		stingy, orders int32
		wantIDs        string // listed, when no error is wanted
		wantErr        string
		wantCalls      int32
	}{
		// Two stingy calls answer one key each, the third the other two.
		{name: "within the bound", stingy: 2, orders: 4, wantIDs: "[u-3 u-2 u-1 u-0]", wantCalls: 3},
		{name: "past the bound", stingy: 1000, orders: 10, wantErr: "unprocessed", wantCalls: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stingy := &stingyBatch{stingy: tc.stingy}
			s, _, _ := openStore(t, func(c *dynamodb.Client) statestore.Client { stingy.Client = c; return stingy })
			for i := range tc.orders {
				seedOwned(t, s, fmt.Sprintf("u-%d", i), ownerA, t0.Add(time.Duration(i)*time.Second))
			}
			p, err := s.ListByOwner(context.Background(), ownerA, 10, "")
			var ids []string
			for _, st := range p.States {
				ids = append(ids, st.OrderID)
			}
			calls := stingy.calls.Load()
			if tc.wantErr == "" && (err != nil || fmt.Sprint(ids) != tc.wantIDs || calls != tc.wantCalls) {
				t.Fatalf("listed %v, %v after %d calls, want %s after %d", ids, err, calls, tc.wantIDs, tc.wantCalls)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || calls != tc.wantCalls) {
				t.Fatalf("error %v after %d calls, want %s after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
