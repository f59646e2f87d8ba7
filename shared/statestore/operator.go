package statestore

import (
	"context"
	"fmt"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Cursor is the position after a page: the last record's key in ByState.
type Cursor struct {
	State     string `json:"s"`
	OrderID   string `json:"o"`
	ChangedAt int64  `json:"c"`
}

// StateListing is the listing of the records in state, most recently
// changed first, from the ByState index.
func StateListing(state workflow.ProcessState) Listing {
	return Listing{
		name: "list " + string(state), index: ByStateIndex,
		partAttr: ProcessStateAttr, part: string(state), sortAttr: ChangedAtAttr,
		resume: func(cursor string) (Position, error) {
			c, err := DecodeCursor(cursor)
			if err != nil {
				return Position{}, err
			}
			if c.State != string(state) {
				return Position{}, fmt.Errorf("%w: it belongs to a listing of %q", ErrBadCursor, c.State)
			}
			return Position{OrderID: c.OrderID, Sort: c.ChangedAt}, nil
		},
		cursor: func(p Position) string {
			return EncodeCursor(Cursor{State: string(state), OrderID: p.OrderID, ChangedAt: p.Sort})
		},
	}
}

// ListByState lists the records in a state, most recently changed first, at
// most limit (1..MaxPage) per page. Records carry only ByStateProjection's
// attributes: no Input, no step history.
func (s *Store) ListByState(ctx context.Context, state workflow.ProcessState, limit int, after string) (Page, error) {
	items, next, err := s.query(ctx, s.tables.State, StateListing(state), limit, after)
	if err != nil {
		return Page{}, err
	}
	p := Page{Next: next}
	for _, item := range items {
		st, err := DecodeState(item)
		if err != nil {
			return Page{}, err
		}
		p.States = append(p.States, st)
	}
	return p, nil
}

// EncodeCursor is the opaque form of c that DecodeCursor reads.
func EncodeCursor(c Cursor) string { return encodeCursor(c) }

// DecodeCursor reads a cursor a client sent back. It is outside input: any
// failure wraps ErrBadCursor.
func DecodeCursor(s string) (Cursor, error) {
	var c Cursor
	if err := decodeCursor(s, &c); err != nil {
		return Cursor{}, err
	}
	if _, ok := workflow.ParseProcessState(c.State); !ok || !message.ValidOrderID(c.OrderID) || c.ChangedAt < 0 {
		return Cursor{}, fmt.Errorf("%w: fields out of range", ErrBadCursor)
	}
	return c, nil
}
