package statestore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

var errThrottled = errors.New("throttled")

// fakeIndex is a listing's index in memory whose shards answer short, as
// DynamoDB does when it stops at 1 MB: fewer entries than the limit, and
// more to come.
type fakeIndex struct {
	parts map[string][]statestore.Entry // newest first
	calls atomic.Int32
	fail  string // a partition whose query fails
}

func (x *fakeIndex) read(_ context.Context, part, after string, limit int) (statestore.Shard, error) {
	n := int(x.calls.Add(1))
	if part == x.fail {
		return statestore.Shard{}, errThrottled
	}
	var below []statestore.Entry
	for _, e := range x.parts[part] {
		if after == "" || e.Sort < after {
			below = append(below, e)
		}
	}
	take := min(len(below), limit, 1+n%2) // 1 or 2 entries, whatever the limit
	return statestore.Shard{Entries: below[:take], More: take < len(below)}, nil
}

// TestReadPagesExactlyThroughShortAnswers: however short a shard's answer,
// a page never takes an entry that the shard's unread entries could come
// before, so paging lists every entry once, in order.
func TestReadPagesExactlyThroughShortAnswers(t *testing.T) {
	t.Parallel()
	x := &fakeIndex{parts: map[string][]statestore.Entry{}}
	var all []statestore.Entry
	for i := range 120 {
		id := fmt.Sprintf("r-%03d", i)
		// Four to a millisecond, in an order unlike the IDs': consecutive
		// IDs hash to distinct shards, and this index needs shards whose
		// next entries come close together.
		e := statestore.Entry{OrderID: id, Sort: statestore.SortKey(t0.Add(time.Duration(i*37%120/4)*time.Millisecond), id)}
		part := statestore.ByStateKey(workflow.Error, id)
		x.parts[part] = append(x.parts[part], e)
		all = append(all, e)
	}
	desc := func(a, b statestore.Entry) int { return cmp.Compare(b.Sort, a.Sort) }
	for _, p := range x.parts {
		slices.SortFunc(p, desc)
	}
	slices.SortFunc(all, desc)
	var got, want []string
	for _, e := range all {
		want = append(want, e.OrderID)
	}
	l := statestore.StateListing(workflow.Error)
	cursor := ""
	for page := 0; ; page++ {
		ids, next, err := l.Read(context.Background(), 7, cursor, x.read)
		if err != nil || len(ids) > 7 || len(ids) == 0 && next != "" || page > 200 {
			t.Fatalf("page %d: %d entries, next %q, %v", page, len(ids), next, err)
		}
		got = append(got, ids...)
		if cursor = next; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v,\nwant %v", got, want)
	}
}

// TestReadFailsWithItsShard: a shard that fails fails the page, named, and
// a shard that claims more without showing any is refused rather than
// paged past.
func TestReadFailsWithItsShard(t *testing.T) {
	t.Parallel()
	l := statestore.StateListing(workflow.Cancelled)
	x := &fakeIndex{fail: statestore.ByStateKey(workflow.Cancelled, "any")}
	if _, _, err := l.Read(context.Background(), 5, "", x.read); !errors.Is(err, errThrottled) {
		t.Fatalf("a failing shard: %v", err)
	}
	empty := func(context.Context, string, string, int) (statestore.Shard, error) {
		return statestore.Shard{More: true}, nil
	}
	if _, _, err := l.Read(context.Background(), 5, "", empty); err == nil {
		t.Fatal("a shard with more to come and nothing shown was paged past")
	}
	if _, _, err := statestore.StateListing(workflow.Processed).Read(context.Background(), 5, "", empty); !errors.Is(err, statestore.ErrNotListed) {
		t.Fatalf("a listing of Processed: %v, want ErrNotListed", err)
	}
}
