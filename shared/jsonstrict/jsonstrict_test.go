package jsonstrict_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/jsonstrict"
)

type doc struct {
	A string `json:"a"`
	N int    `json:"n,omitempty"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		want     doc
		trailing bool // ErrTrailing
		bad      bool // another error
	}{
		{in: `{"a":"x","n":2}`, want: doc{A: "x", N: 2}},
		{in: " {\"a\":\"x\"}\n\t", want: doc{A: "x"}},
		{in: `{"a":"x","b":1}`, bad: true},
		{in: `{"a":1}`, bad: true},
		{in: `{"a":"x"`, bad: true},
		{in: ``, bad: true},
		{in: `{"a":"x"}{"a":"y"}`, trailing: true},
		{in: `{"a":"x"} 1`, trailing: true},
		{in: `{"a":"x"}}`, trailing: true},
	} {
		var got doc
		err := jsonstrict.Decode([]byte(tc.in), &got)
		switch {
		case tc.trailing && !errors.Is(err, jsonstrict.ErrTrailing):
			t.Errorf("Decode(%q) = %v, want ErrTrailing", tc.in, err)
		case tc.bad && (err == nil || errors.Is(err, jsonstrict.ErrTrailing)):
			t.Errorf("Decode(%q) = %v, want a decoding error", tc.in, err)
		case !tc.trailing && !tc.bad && (err != nil || got != tc.want):
			t.Errorf("Decode(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":"x","n":2}`, `{"a":"x"} 1`, `{"b":1}`, `[`, `null`, `{"A":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d doc
		if err := jsonstrict.Decode(b, &d); err != nil {
			return
		}
		// What it accepts is one JSON value, null or an object with no
		// member but doc's (encoding/json matches names case-insensitively).
		var members map[string]json.RawMessage
		if err := json.Unmarshal(b, &members); err != nil {
			t.Fatalf("Decode accepted %q, which is not one JSON object or null: %v", b, err)
		}
		for name := range members {
			if !strings.EqualFold(name, "a") && !strings.EqualFold(name, "n") {
				t.Fatalf("Decode accepted %q with member %q", b, name)
			}
		}
	})
}
