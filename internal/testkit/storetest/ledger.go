package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// OpenLedger returns a fresh, empty ledger for one test, whose time is
// clk's (a lease has ended, an entry is past its ExpiresAt, at clk's
// time).
type OpenLedger func(t *testing.T, clk *clock.Fake) statestore.LedgerPort

// lease is how long the cases' claims hold; retention their entries' TTL.
const (
	lease     = 10 * time.Second
	retention = 30 * 24 * time.Hour
)

// RunLedger runs the ledger's cases against the ledgers open returns.
func RunLedger(t *testing.T, open OpenLedger) {
	cases := []struct {
		name string
		run  func(t *testing.T, l statestore.LedgerPort, clk *clock.Fake)
	}{
		{"BeginClaimsAnAbsentKey", ledgerClaim},
		{"OneOfManyBeginsWins", ledgerOneClaimWins},
		{"DoneIsReplayed", ledgerReplayDone},
		{"RejectedIsReplayed", ledgerReplayRejected},
		{"UndoneIsRefused", ledgerRefuseUndone},
		{"ALiveLeaseIsInProgress", ledgerLiveLease},
		{"AnEndedLeaseIsTakenOver", ledgerTakeOver},
		{"FinishByANonOwnerIsRefused", ledgerFinishNonOwner},
		{"ReleaseFreesTheKey", ledgerRelease},
		{"UndoIsOneTransaction", ledgerUndo},
		{"TombstoneOnAnAbsentKey", ledgerTombstone},
		{"TombstoneRefusesAnEffect", ledgerTombstoneRefuses},
		{"AnEntryOutlivesEveryTryUntilExpired", ledgerKeptUntilExpired},
		{"ExpiredEntriesReadAsGone", ledgerExpired},
		{"ATakeoverIsTold", ledgerTakeoverTold},
		{"OutputsAreBounded", ledgerBounded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			c.run(t, open(t, clk), clk)
		})
	}
}

const (
	effectKey = "ship-order#o-1/ship-order"
	undoKey   = "ship-order#o-1/ship-order/undo"
)

// begin claims key for owner for a lease from clk's now, and fails the
// test on an error.
func begin(t *testing.T, l statestore.LedgerPort, clk clock.Clock, key, owner string) (statestore.LedgerEntry, bool) {
	t.Helper()
	e, ok, err := l.Begin(context.Background(), key, owner, clk.Now().Add(lease))
	if err != nil {
		t.Fatalf("Begin %s by %s: %v", key, owner, err)
	}
	return e, ok
}

// entry reads key, failing the test on an error.
func entry(t *testing.T, l statestore.LedgerPort, key string) statestore.LedgerEntry {
	t.Helper()
	e, err := l.Entry(context.Background(), key)
	if err != nil {
		t.Fatalf("Entry %s: %v", key, err)
	}
	return e
}

// finish ends owner's claim, failing the test on an error.
func finish(t *testing.T, l statestore.LedgerPort, key, owner string, out statestore.Outcome) {
	t.Helper()
	if err := l.Finish(context.Background(), key, owner, out); err != nil {
		t.Fatalf("Finish %s by %s: %v", key, owner, err)
	}
}

func sameEntry(t *testing.T, what string, got, want statestore.LedgerEntry) {
	t.Helper()
	if len(got.Output) == 0 {
		got.Output = nil
	}
	if len(want.Output) == 0 {
		want.Output = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func ledgerClaim(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	got, ok := begin(t, l, clk, effectKey, "a")
	want := statestore.LedgerEntry{Key: effectKey, State: statestore.LedgerRunning, Owner: "a",
		LeaseUntil: t0.Add(lease)}
	if !ok {
		t.Fatal("Begin of an absent key did not claim it")
	}
	sameEntry(t, "the claim", got, want)
	sameEntry(t, "the claim as read", entry(t, l, effectKey), want)
	// The same owner again (a retry whose answer was lost) holds it still.
	if _, ok := begin(t, l, clk, effectKey, "a"); !ok {
		t.Fatal("the owner's own Begin again is not its claim")
	}
	if _, err := l.Entry(context.Background(), "ship-order#nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("Entry of an absent key: %v, want ErrNotFound", err)
	}
}

func ledgerOneClaimWins(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	const n = 8
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won []string
	)
	for i := range n {
		owner := string(rune('a' + i))
		wg.Go(func() {
			_, ok, err := l.Begin(context.Background(), effectKey, owner, clk.Now().Add(lease))
			if err != nil {
				t.Errorf("Begin by %s: %v", owner, err)
				return
			}
			if ok {
				mu.Lock()
				won = append(won, owner)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent Begins claimed the key (%v), want 1", len(won), n, won)
	}
	if got := entry(t, l, effectKey); got.Owner != won[0] {
		t.Fatalf("the entry's owner is %q, the winner %q", got.Owner, won[0])
	}
}

func ledgerReplayDone(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	begin(t, l, clk, effectKey, "a")
	out := json.RawMessage(`{"shipment":"shipments/o-1.json"}`)
	finish(t, l, effectKey, "a", statestore.Outcome{Output: out})
	// Even once the lease is long over, a done entry is never taken.
	clk.Advance(time.Hour)
	got, ok := begin(t, l, clk, effectKey, "b")
	if ok {
		t.Fatal("Begin claimed a done key")
	}
	sameEntry(t, "the done entry", got, statestore.LedgerEntry{Key: effectKey, State: statestore.LedgerDone, Owner: "a",
		Output: out})
	if err := l.Finish(context.Background(), effectKey, "b", statestore.Outcome{Output: json.RawMessage(`{}`)}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("a Finish of a done key by another: %v, want ErrStale", err)
	}
	// The owner's own Finish again, as a retry whose answer was lost, is
	// its write: answered as done, and nothing changes.
	if err := l.Finish(context.Background(), effectKey, "a", statestore.Outcome{Output: out}); err != nil {
		t.Fatalf("the owner's Finish again: %v, want its own write recognized", err)
	}
	if err := l.Finish(context.Background(), effectKey, "a", statestore.Outcome{Fault: &message.Fault{Code: "x"}}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("the owner's Finish of another outcome: %v, want ErrStale", err)
	}
	sameEntry(t, "the done entry after the later Finishes", entry(t, l, effectKey), got)
}

func ledgerReplayRejected(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	begin(t, l, clk, effectKey, "a")
	fault := &message.Fault{Code: "no_address", Message: "the order has no address", Uncertain: true}
	finish(t, l, effectKey, "a", statestore.Outcome{Fault: fault})
	clk.Advance(time.Hour)
	got, ok := begin(t, l, clk, effectKey, "b")
	if ok {
		t.Fatal("Begin claimed a rejected key")
	}
	sameEntry(t, "the rejected entry", got, statestore.LedgerEntry{Key: effectKey, State: statestore.LedgerRejected, Owner: "a",
		Fault: fault})
}

func ledgerRefuseUndone(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	if _, err := l.Tombstone(context.Background(), effectKey); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	got, ok := begin(t, l, clk, effectKey, "a")
	if ok || got.State != statestore.LedgerUndone {
		t.Fatalf("Begin of an undone key = %+v, %v; want it refused as undone", got, ok)
	}
}

func ledgerLiveLease(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	first, _ := begin(t, l, clk, effectKey, "a")
	clk.Advance(lease - time.Millisecond)
	got, ok := begin(t, l, clk, effectKey, "b")
	if ok {
		t.Fatal("Begin took a key whose lease holds")
	}
	sameEntry(t, "the entry another holds", got, first)
	if !got.Live(clk.Now()) {
		t.Fatalf("the entry %+v is not live at %s", got, clk.Now())
	}
}

func ledgerTakeOver(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	begin(t, l, clk, effectKey, "a")
	clk.Advance(lease)
	got, ok := begin(t, l, clk, effectKey, "b")
	if !ok || got.Owner != "b" || !got.LeaseUntil.Equal(clk.Now().Add(lease)) {
		t.Fatalf("Begin once the lease ended = %+v, %v; want b's claim until %s", got, ok, clk.Now().Add(lease))
	}
	// The first owner, back late, can neither finish nor release it.
	if err := l.Finish(context.Background(), effectKey, "a", statestore.Outcome{Output: json.RawMessage(`1`)}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Finish by the owner taken over: %v, want ErrStale", err)
	}
	if err := l.Release(context.Background(), effectKey, "a"); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Release by the owner taken over: %v, want ErrStale", err)
	}
	if e := entry(t, l, effectKey); e.Owner != "b" || e.State != statestore.LedgerRunning {
		t.Fatalf("the entry after the late owner's writes: %+v", e)
	}
}

func ledgerFinishNonOwner(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	if err := l.Finish(ctx, effectKey, "a", statestore.Outcome{}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Finish of an absent key: %v, want ErrStale", err)
	}
	if _, err := l.Entry(ctx, effectKey); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("a refused Finish wrote an entry: %v", err)
	}
	claimed, _ := begin(t, l, clk, effectKey, "a")
	if err := l.Finish(ctx, effectKey, "b", statestore.Outcome{Output: json.RawMessage(`1`)}); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Finish by another owner: %v, want ErrStale", err)
	}
	sameEntry(t, "the entry after a refused Finish", entry(t, l, effectKey), claimed)
	// A lease that ended but nobody took over is still the owner's.
	clk.Advance(lease + time.Second)
	finish(t, l, effectKey, "a", statestore.Outcome{})
	if e := entry(t, l, effectKey); e.State != statestore.LedgerDone || len(e.Output) != 0 {
		t.Fatalf("done without output: %+v", e)
	}
}

func ledgerRelease(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	begin(t, l, clk, effectKey, "a")
	if err := l.Release(ctx, effectKey, "b"); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Release by another owner: %v, want ErrStale", err)
	}
	if err := l.Release(ctx, effectKey, "a"); err != nil {
		t.Fatalf("Release by the owner: %v", err)
	}
	// The entry stays, its lease ended: the try that let it go may have
	// applied the step before its transient failure, and the next try
	// must know it takes over from one.
	if e := entry(t, l, effectKey); e.State != statestore.LedgerRunning || e.Owner != "a" || e.Live(clk.Now()) {
		t.Fatalf("the released key: %+v, want running under a with its lease ended", e)
	}
	// Again, as a retry whose answer was lost would.
	if err := l.Release(ctx, effectKey, "a"); err != nil {
		t.Fatalf("Release again: %v", err)
	}
	if err := l.Release(ctx, "ship-order#o-9/ship-order", "a"); err != nil {
		t.Fatalf("Release of an absent key: %v", err)
	}
	if got, ok := begin(t, l, clk, effectKey, "b"); !ok || !got.TookOver {
		t.Fatalf("Begin of a released key = %+v, %v; want claimed, taken over", got, ok)
	}
	finish(t, l, effectKey, "b", statestore.Outcome{Output: json.RawMessage(`1`)})
	if err := l.Release(ctx, effectKey, "b"); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Release of a done key: %v, want ErrStale", err)
	}
}

func ledgerUndo(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	begin(t, l, clk, effectKey, "a")
	finish(t, l, effectKey, "a", statestore.Outcome{Output: json.RawMessage(`{"n":1}`)})
	// The undo's claim must be running under its owner, and the effect
	// done: any other way, neither item changes.
	if err := l.FinishUndo(ctx, effectKey, undoKey, "u", nil); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("FinishUndo without the undo's claim: %v, want ErrStale", err)
	}
	if e := entry(t, l, effectKey); e.State != statestore.LedgerDone {
		t.Fatalf("a refused FinishUndo changed the effect: %+v", e)
	}
	begin(t, l, clk, undoKey, "u")
	if err := l.FinishUndo(ctx, effectKey, undoKey, "v", nil); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("FinishUndo by another owner: %v, want ErrStale", err)
	}
	if e := entry(t, l, effectKey); e.State != statestore.LedgerDone {
		t.Fatalf("a refused FinishUndo changed the effect: %+v", e)
	}
	if err := l.FinishUndo(ctx, effectKey, "ship-order#o-2/ship-order/undo", "u", nil); !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("FinishUndo of an unclaimed undo key: %v, want ErrStale", err)
	}
	out := json.RawMessage(`{"deleted":true}`)
	if err := l.FinishUndo(ctx, effectKey, undoKey, "u", out); err != nil {
		t.Fatalf("FinishUndo: %v", err)
	}
	if e := entry(t, l, effectKey); e.State != statestore.LedgerUndone || len(e.Output) != 0 {
		t.Fatalf("the effect after its undo: %+v, want undone without its output", e)
	}
	sameEntry(t, "the undo", entry(t, l, undoKey), statestore.LedgerEntry{Key: undoKey, State: statestore.LedgerDone, Owner: "u",
		Output: out})
	// A late try of the step is refused from now on.
	if e, ok := begin(t, l, clk, effectKey, "late"); ok || e.State != statestore.LedgerUndone {
		t.Fatalf("Begin after the undo = %+v, %v; want refused as undone", e, ok)
	}
	// An effect undone already (a tombstone) is undone again by another
	// undo key.
	begin(t, l, clk, "ship-order#o-1/ship-order/undo2", "w")
	if err := l.FinishUndo(ctx, effectKey, "ship-order#o-1/ship-order/undo2", "w", nil); err != nil {
		t.Fatalf("FinishUndo of an undone effect: %v", err)
	}
}

func ledgerTombstone(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	got, err := l.Tombstone(ctx, effectKey)
	if err != nil {
		t.Fatalf("Tombstone of an absent key: %v", err)
	}
	want := statestore.LedgerEntry{Key: effectKey, State: statestore.LedgerUndone}
	sameEntry(t, "the tombstone", got, want)
	sameEntry(t, "the tombstone as read", entry(t, l, effectKey), want)
	// Again: a tombstone stays one.
	if _, err := l.Tombstone(ctx, effectKey); err != nil {
		t.Fatalf("Tombstone of a tombstone: %v", err)
	}
	// A rejected key, and a running one whose lease ended, are tombstoned
	// too: no effect is on record under them.
	const rejected, abandoned = "ship-order#o-2/ship-order", "ship-order#o-3/ship-order"
	begin(t, l, clk, rejected, "a")
	finish(t, l, rejected, "a", statestore.Outcome{Fault: &message.Fault{Code: "no_address"}})
	begin(t, l, clk, abandoned, "a")
	clk.Advance(lease)
	for _, k := range []string{rejected, abandoned} {
		if e, err := l.Tombstone(ctx, k); err != nil || e.State != statestore.LedgerUndone || e.Owner != "" || e.Fault != nil {
			t.Fatalf("Tombstone of %s = %+v, %v; want a bare tombstone", k, e, err)
		}
	}
}

func ledgerTombstoneRefuses(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	running, _ := begin(t, l, clk, effectKey, "a")
	got, err := l.Tombstone(ctx, effectKey)
	if !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("Tombstone of a live claim: %v, want ErrStale", err)
	}
	sameEntry(t, "the live claim Tombstone answers", got, running)
	finish(t, l, effectKey, "a", statestore.Outcome{Output: json.RawMessage(`1`)})
	got, err = l.Tombstone(ctx, effectKey)
	if !errors.Is(err, workflow.ErrStale) || got.State != statestore.LedgerDone {
		t.Fatalf("Tombstone of a done key = %+v, %v; want it refused with the entry", got, err)
	}
	if e := entry(t, l, effectKey); e.State != statestore.LedgerDone {
		t.Fatalf("a refused Tombstone changed the entry: %+v", e)
	}
}

// ledgerKeptUntilExpired: an entry carries no TTL while its order may
// still try its key (an operator's retry may come years later), and Expire
// gives it one; an absent key stays absent.
func ledgerKeptUntilExpired(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	begin(t, l, clk, effectKey, "a")
	finish(t, l, effectKey, "a", statestore.Outcome{Output: json.RawMessage(`1`)})
	if _, err := l.Tombstone(ctx, undoKey); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * 365 * 24 * time.Hour)
	for _, key := range []string{effectKey, undoKey} {
		if e := entry(t, l, key); !e.ExpiresAt.IsZero() {
			t.Fatalf("%s carries the TTL %v before its order ended", key, e.ExpiresAt)
		}
	}
	at := clk.Now().Add(retention)
	if err := l.Expire(ctx, effectKey, at); err != nil {
		t.Fatal(err)
	}
	if e := entry(t, l, effectKey); !e.ExpiresAt.Equal(at.Truncate(time.Second)) || e.State != statestore.LedgerDone {
		t.Fatalf("after Expire: %+v, want done with the TTL %v", e, at)
	}
	const absent = "ship-order#o-2/ship-order"
	if err := l.Expire(ctx, absent, at); err != nil {
		t.Fatalf("Expire of an absent key: %v", err)
	}
	if _, err := l.Entry(ctx, absent); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("Expire created %s: %v", absent, err)
	}
}

// ledgerTakeoverTold: Begin says whether it displaced another try's entry.
func ledgerTakeoverTold(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	if got, _ := begin(t, l, clk, effectKey, "a"); got.TookOver {
		t.Fatal("the first claim of a key took over")
	}
	clk.Advance(lease)
	if got, ok := begin(t, l, clk, effectKey, "b"); !ok || !got.TookOver {
		t.Fatalf("a claim once a's lease ended = %+v, %v; want taken over", got, ok)
	}
	// A retry of b's own claim, whose answer was lost, cannot tell.
	if got, ok := begin(t, l, clk, effectKey, "b"); !ok || !got.TookOver {
		t.Fatalf("b's own claim again = %+v, %v; want claimed, taken over", got, ok)
	}
}

func ledgerExpired(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	begin(t, l, clk, effectKey, "a")
	finish(t, l, effectKey, "a", statestore.Outcome{Output: json.RawMessage(`1`)})
	if err := l.Expire(ctx, effectKey, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := l.Entry(ctx, effectKey); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("Entry past its ExpiresAt: %v, want ErrNotFound", err)
	}
	// DynamoDB's TTL deletes it some time later; until then it is gone to
	// every reader and writer.
	if _, ok := begin(t, l, clk, effectKey, "b"); !ok {
		t.Fatal("Begin did not claim a key past its ExpiresAt")
	}
}

func ledgerBounded(t *testing.T, l statestore.LedgerPort, clk *clock.Fake) {
	ctx := context.Background()
	begin(t, l, clk, effectKey, "a")
	big := make([]byte, statestore.MaxLedgerOutputBytes+1)
	big[0], big[len(big)-1] = '"', '"'
	for i := 1; i < len(big)-1; i++ {
		big[i] = 'x'
	}
	if err := l.Finish(ctx, effectKey, "a", statestore.Outcome{Output: big}); !errors.Is(err, statestore.ErrLedgerOutputTooLarge) {
		t.Fatalf("Finish with %d bytes of output: %v, want ErrLedgerOutputTooLarge", len(big), err)
	}
	if e := entry(t, l, effectKey); e.State != statestore.LedgerRunning {
		t.Fatalf("a refused Finish changed the entry: %+v", e)
	}
	// The largest output the ledger keeps fits in a DynamoDB item.
	fits := big[:statestore.MaxLedgerOutputBytes]
	fits[len(fits)-1] = '"'
	finish(t, l, effectKey, "a", statestore.Outcome{Output: fits})
	if e := entry(t, l, effectKey); len(e.Output) != len(fits) {
		t.Fatalf("the largest output came back with %d bytes, want %d", len(e.Output), len(fits))
	}
}
