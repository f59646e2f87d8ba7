package statestore_test

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// byStateCursor is the cursor of a listing of Error records; the owner
// cursors' fuzzer is seeded with it too, to be refused there.
const byStateCursor = "eyJzIjoiRXJyb3IiLCJrIjoiMDAwMDAwMDAwMDAxMiNhLTEifQ" // {"s":"Error","k":"0000000000012#a-1"}

func FuzzDecodeCursor(f *testing.F) {
	fuzzCursor(f, statestore.DecodeCursor, func(c statestore.Cursor) bool {
		st, ok := workflow.ParseProcessState(c.State)
		return ok && st.Listed() && statestore.ValidSortKey(c.After)
	}, byStateCursor, "", "e30",
		cursorSeed(`{"s":"Error","k":"0000000000012#a-1","x":1}`), cursorSeed(`{"s":"Error","k":"0000000000012#a-1"}{}`),
		cursorSeed(`{"s":"Pending","k":"0000000000012#a-1"}`), cursorSeed(`{"s":"Error","k":"12#a-1"}`),
		// The cursors of the listing before it was sharded.
		cursorSeed(`{"s":"Error","o":"a-1","c":12}`))
}

func FuzzDecodeOwnerCursor(f *testing.F) {
	fuzzCursor(f, statestore.DecodeOwnerCursor, func(c statestore.OwnerCursor) bool {
		return len(c.Owner) == 16 && statestore.ValidSortKey(c.After)
	}, cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","k":"0000000000012#a-1"}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","k":"0000000000012#a-1","x":1}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","k":"0000000000012#a-1"}{}`),
		cursorSeed(`{"w":"short","k":"0000000000012#a-1"}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","k":"-000000000012#a_1"}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12}`),
		byStateCursor, "", "e30")
}

// fuzzCursor fuzzes a cursor decoder from seeds: whatever it is sent, it
// fails only with ErrBadCursor, and a cursor it accepts is valid.
func fuzzCursor[C any](f *testing.F, decode func(string) (C, error), valid func(C) bool, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decode(s)
		if err != nil {
			if !errors.Is(err, statestore.ErrBadCursor) {
				t.Fatalf("error %v does not wrap ErrBadCursor", err)
			}
			return
		}
		if !valid(c) {
			t.Fatalf("accepted an invalid cursor %+v", c)
		}
	})
}

// TestCursorsAreStrict: both listings refuse a cursor with what the store
// never writes in one: an unknown member, data after it, a state that is
// not listed, a sort key SortKey does not write, the fields of the
// cursors before the listings were sharded.
func TestCursorsAreStrict(t *testing.T) {
	t.Parallel()
	byState := func(s string) error { _, err := statestore.DecodeCursor(s); return err }
	byOwner := func(s string) error { _, err := statestore.DecodeOwnerCursor(s); return err }
	tests := []struct {
		name   string
		decode func(string) error
		json   string
		ok     bool
	}{
		{"by state, as written", byState, `{"s":"Error","k":"0000000000012#a-1"}`, true},
		{"by state, unknown member", byState, `{"s":"Error","k":"0000000000012#a-1","x":1}`, false},
		{"by state, data after", byState, `{"s":"Error","k":"0000000000012#a-1"}{}`, false},
		{"by state, a state not listed", byState, `{"s":"Processed","k":"0000000000012#a-1"}`, false},
		{"by state, short time", byState, `{"s":"Error","k":"12#a-1"}`, false},
		{"by state, no order", byState, `{"s":"Error","k":"0000000000012#"}`, false},
		{"by state, bad order", byState, `{"s":"Error","k":"0000000000012#a_1"}`, false},
		{"by state, signed time", byState, `{"s":"Error","k":"+000000000012#a-1"}`, false},
		{"by state, before sharding", byState, `{"s":"Error","o":"a-1","c":12}`, false},
		{"by owner, as written", byOwner, `{"w":"AAAAAAAAAAAAAAAA","k":"0000000000012#a-1"}`, true},
		{"by owner, unknown member", byOwner, `{"w":"AAAAAAAAAAAAAAAA","k":"0000000000012#a-1","x":1}`, false},
		{"by owner, data after", byOwner, `{"w":"AAAAAAAAAAAAAAAA","k":"0000000000012#a-1"}{}`, false},
		{"by owner, no sort key", byOwner, `{"w":"AAAAAAAAAAAAAAAA"}`, false},
		{"by owner, before sharding", byOwner, `{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.decode(cursorSeed(tc.json))
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, statestore.ErrBadCursor) {
				t.Fatalf("decode %s = %v, want accepted: %v", tc.json, err, tc.ok)
			}
		})
	}
}

// TestSortKeysSortAsTheirTimes: a sort key's text order is its time's
// order, then its order ID's, and it reads back as valid.
func TestSortKeysSortAsTheirTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	keys := []string{
		statestore.SortKey(time.UnixMilli(0), "z"),
		statestore.SortKey(time.UnixMilli(999), "a"),
		statestore.SortKey(at, "a-1"),
		statestore.SortKey(at.Add(999*time.Microsecond), "a-2"), // the same millisecond
		statestore.SortKey(at.Add(time.Millisecond), "a-0"),
	}
	if keys[2] != "1795348800000#a-1" {
		t.Fatalf("SortKey = %q", keys[2])
	}
	for i, k := range keys {
		if !statestore.ValidSortKey(k) {
			t.Errorf("%q is not valid", k)
		}
		if i > 0 && keys[i-1] >= k {
			t.Errorf("%q sorts before %q", k, keys[i-1])
		}
	}
}

func cursorSeed(js string) string { return base64.RawURLEncoding.EncodeToString([]byte(js)) }
