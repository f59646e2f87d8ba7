package statestore

import (
	"context"
	"fmt"

	"github.com/sasflow/sas/shared/workflow"
)

// Cursor is the position after a page of a listing by state: the state
// listed, and the sort key in ByState of the page's last record.
type Cursor struct {
	State string `json:"s"`
	After string `json:"k"`
}

// StateListing is the listing of the records in state, newest entry into
// the state first, from the ByState index. A state that is not listed
// (workflow.ProcessState.Listed) has no entries there: its listing refuses
// to be read, with ErrNotListed.
func StateListing(state workflow.ProcessState) Listing {
	l := Listing{
		name: "list " + string(state), index: ByStateIndex,
		partAttr: ByStateKeyAttr, sortAttr: ByStateSortAttr,
		part: func(shard int) string { return listPartition(string(state), shard) },
		resume: func(cursor string) (string, error) {
			c, err := DecodeCursor(cursor)
			if err != nil {
				return "", err
			}
			if c.State != string(state) {
				return "", fmt.Errorf("%w: it belongs to a listing of %q", ErrBadCursor, c.State)
			}
			return c.After, nil
		},
		cursor: func(after string) string { return EncodeCursor(Cursor{State: string(state), After: after}) },
	}
	if !state.Listed() {
		l.refused = fmt.Errorf("%w: %q is not one of %v", ErrNotListed, state, workflow.ListedStates())
	}
	return l
}

// ListByState lists the records in a listed state, newest entry into the
// state first, at most limit (1..MaxPage) per page: the order IDs from the
// ByState index, then their state records in one BatchGetItem. Records
// carry SummaryAttrs only: no Input, no step history. The index follows the
// table a moment late, so a record that has just left the state is left
// out of the page. A state that is not listed wraps ErrNotListed.
func (s *Store) ListByState(ctx context.Context, state workflow.ProcessState, limit int, after string) (Page, error) {
	return s.list(ctx, s.tables.State, StateListing(state), limit, after, func(st workflow.State) bool {
		return st.ProcessState == state
	})
}

// EncodeCursor is the opaque form of c that DecodeCursor reads.
func EncodeCursor(c Cursor) string { return encodeCursor(c) }

// DecodeCursor reads a cursor a client sent back. It is outside input: any
// failure wraps ErrBadCursor. Whether the cursor is of the listing it is
// sent to is StateListing's check.
func DecodeCursor(s string) (Cursor, error) {
	var c Cursor
	if err := decodeCursor(s, &c); err != nil {
		return Cursor{}, err
	}
	if st, ok := workflow.ParseProcessState(c.State); !ok || !st.Listed() || !ValidSortKey(c.After) {
		return Cursor{}, fmt.Errorf("%w: fields out of range", ErrBadCursor)
	}
	return c, nil
}
