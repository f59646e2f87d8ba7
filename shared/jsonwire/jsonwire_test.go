package jsonwire_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/jsonwire"
)

type doc struct {
	Text   string          `json:"text,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
}

func TestMarshal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"markup in a raw output is written as it came", doc{Output: json.RawMessage(`{"html":"<b>&amp;</b>"}`)},
			`{"output":{"html":"<b>&amp;</b>"}}`},
		{"markup in a string is written as it is", doc{Text: `<script>&`}, `{"text":"<script>&"}`},
		{"multi-byte UTF-8 is written as it is", doc{Text: "é€😀", Output: json.RawMessage(`"é€😀"`)},
			`{"text":"é€😀","output":"é€😀"}`},
		{"U+2028 and U+2029 in a raw output are written as they came", doc{Output: json.RawMessage("\"a\u2028b\u2029\"")},
			"{\"output\":\"a\u2028b\u2029\"}"},
		// encoding/json always escapes them in a Go string.
		{"U+2028 in a string is escaped", doc{Text: "a\u2028"}, `{"text":"a\u2028"}`},
		{"U+FFFE and U+FFFF are escaped, in outputs and strings", doc{Text: "\uFFFE", Output: json.RawMessage("\"\uFFFF<\"")},
			`{"text":"\ufffe","output":"\uffff<"}`},
		{"invalid UTF-8 in a string becomes U+FFFD", doc{Text: "a\xffb"}, `{"text":"a\ufffdb"}`},
		{"a raw output is compacted", doc{Output: json.RawMessage("{ \"a\" : [ 1, 2 ] }\n")}, `{"output":{"a":[1,2]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := jsonwire.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Marshal = %s, want %s", got, tc.want)
			}
			// The same value as json.Marshal writes it, escapes aside.
			std, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if json.Unmarshal(got, &a) != nil || json.Unmarshal(std, &b) != nil || !equalJSON(a, b) {
				t.Errorf("Marshal = %s, which means other than json.Marshal's %s", got, std)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestMarshalRefusesWhatJSONRefuses(t *testing.T) {
	t.Parallel()
	if _, err := jsonwire.Marshal(doc{Output: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("Marshal of a broken raw output succeeded")
	}
	if _, err := jsonwire.Marshal(func() {}); err == nil {
		t.Error("Marshal of a func succeeded")
	}
}

func TestCompactIsWhatMarshalWritesOfARawValue(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"a":"<b>&</b>"}`,
		" { \"a\" :\t\"é€😀\u2028\" }\n",
		"[\"\uFFFE\",\"\uFFFF\"]",
		`"plain"`,
	} {
		got, err := jsonwire.Compact([]byte(src))
		if err != nil {
			t.Fatalf("Compact(%q): %v", src, err)
		}
		whole, err := jsonwire.Marshal(doc{Output: json.RawMessage(src)})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"output":` + string(got) + `}`; string(whole) != want {
			t.Errorf("Compact(%q) = %s, but Marshal writes %s", src, got, whole)
		}
		if bytes.Contains(got, []byte("\uFFFE")) || bytes.Contains(got, []byte("\uFFFF")) || !utf8.Valid(got) {
			t.Errorf("Compact(%q) = %q holds what SQS does not carry", src, got)
		}
	}
	if _, err := jsonwire.Compact([]byte(`{} {}`)); err == nil {
		t.Error("Compact of two values succeeded")
	}
}

func FuzzCompact(f *testing.F) {
	for _, s := range []string{`{"a":"<&>"}`, "\"\uFFFF\uFFFE\u2028\"", `[1, 2]`, "\"\xef\xbf\xbf\"", `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, err := jsonwire.Compact(src)
		if err != nil {
			if json.Valid(src) {
				t.Fatalf("Compact(%q) failed on valid JSON: %v", src, err)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Compact(%q) = %q, not JSON", src, got)
		}
		if bytes.Contains(got, []byte("\uFFFE")) || bytes.Contains(got, []byte("\uFFFF")) {
			t.Fatalf("Compact(%q) = %q keeps a noncharacter", src, got)
		}
		if again, err := jsonwire.Compact(got); err != nil || !bytes.Equal(again, got) {
			t.Fatalf("Compact is not idempotent on %q: %q, %v", got, again, err)
		}
		var a, b any
		if json.Unmarshal(src, &a) == nil && (json.Unmarshal(got, &b) != nil || !equalJSON(a, b)) {
			t.Fatalf("Compact(%q) = %q means something else", src, got)
		}
	})
}
