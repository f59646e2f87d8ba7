// Package jsonstrict decodes JSON that comes from outside the system
// (queue messages, status events, cursors a client sends back) strictly:
// one value, no member its type does not have, nothing after it. A loose
// decoder would let a misspelt or smuggled member pass unnoticed.
package jsonstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailing is returned when data follows the value.
var ErrTrailing = errors.New("data after the JSON value")

// Decode decodes the one JSON value in b into v, refusing members v's type
// does not have, and returns ErrTrailing when anything follows the value.
func Decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailing
	}
	return nil
}
