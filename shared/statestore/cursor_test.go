package statestore_test

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// byStateCursor is the cursor of a listing of Error records; the owner
// cursors' fuzzer is seeded with it too, to be refused there.
const byStateCursor = "eyJzIjoiRXJyb3IiLCJvIjoiYS0xIiwiYyI6MTJ9" // {"s":"Error","o":"a-1","c":12}

func FuzzDecodeCursor(f *testing.F) {
	fuzzCursor(f, statestore.DecodeCursor, func(c statestore.Cursor) bool {
		_, ok := workflow.ParseProcessState(c.State)
		return ok && c.OrderID != "" && c.ChangedAt >= 0
	}, byStateCursor, "", "e30",
		cursorSeed(`{"s":"Error","o":"a-1","c":12,"x":1}`), cursorSeed(`{"s":"Error","o":"a-1","c":12}{}`))
}

func FuzzDecodeOwnerCursor(f *testing.F) {
	fuzzCursor(f, statestore.DecodeOwnerCursor, func(c statestore.OwnerCursor) bool {
		return len(c.Owner) == 16 && c.OrderID != "" && c.CreatedAtMs >= 0
	}, cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12,"x":1}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12}{}`),
		cursorSeed(`{"w":"short","o":"a-1","t":12}`),
		cursorSeed(`{"w":"AAAAAAAAAAAAAAAA","o":"a_1","t":-1}`),
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
// never writes in one, an unknown member or data after it.
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
		{"by state, as written", byState, `{"s":"Error","o":"a-1","c":12}`, true},
		{"by state, unknown member", byState, `{"s":"Error","o":"a-1","c":12,"x":1}`, false},
		{"by state, data after", byState, `{"s":"Error","o":"a-1","c":12}{}`, false},
		{"by owner, as written", byOwner, `{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12}`, true},
		{"by owner, unknown member", byOwner, `{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12,"x":1}`, false},
		{"by owner, data after", byOwner, `{"w":"AAAAAAAAAAAAAAAA","o":"a-1","t":12}{}`, false},
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

func cursorSeed(js string) string { return base64.RawURLEncoding.EncodeToString([]byte(js)) }
