package golden_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/internal/testkit/tbrecord"
)

// item is a tiny wire type; the variants below are what a careless edit of
// it would make.
type item struct {
	Name string `json:"name"`
	Note string `json:"note,omitempty"`
	Skip string `json:"-"` // never written, so no golden member
}

type itemRenamed struct {
	Title string `json:"title"`
	Note  string `json:"note,omitempty"`
}

type itemNoOmit struct {
	Name string `json:"name"`
	Note string `json:"note"`
}

type itemReordered struct {
	Note string `json:"note,omitempty"`
	Name string `json:"name"`
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckType(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		// Indented, as the goldens are kept.
		"item.json":      "{\n  \"name\": \"a\",\n  \"note\": \"b\"\n}\n",
		"item.zero.json": "{\n  \"name\": \"\"\n}\n",
		// The same type with a golden that forgot a member: only the
		// coverage check sees it, as note is omitted when empty.
		"partial.json":      `{"name": "a"}`,
		"partial.zero.json": `{"name": ""}`,
	})
	tests := []struct {
		name  string
		check func(testing.TB)
		want  string // in the failure; "" for a pass
	}{
		{"matches", func(tb testing.TB) { golden.CheckType[item](tb, dir, "item") }, ""},
		{"renamed tag", func(tb testing.TB) { golden.CheckType[itemRenamed](tb, dir, "item") }, "does not decode strictly"},
		{"omission rule dropped", func(tb testing.TB) { golden.CheckType[itemNoOmit](tb, dir, "item") }, "want (item.zero.json)"},
		{"fields reordered", func(tb testing.TB) { golden.CheckType[itemReordered](tb, dir, "item") }, "writes item.json back as"},
		{"member missing", func(tb testing.TB) { golden.CheckType[item](tb, dir, "partial") }, `lacks member "note"`},
		{"no golden", func(tb testing.TB) { golden.CheckType[item](tb, dir, "none") }, "none.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msgs := tbrecord.Run(tc.check)
			if tc.want == "" && len(msgs) > 0 {
				t.Fatalf("failed: %q", msgs)
			}
			if tc.want != "" && (len(msgs) != 1 || !strings.Contains(msgs[0], tc.want)) {
				t.Fatalf("failures %q, want one saying %q", msgs, tc.want)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "doc.json")
	write(t, dir, map[string]string{"doc.json": "{\n  \"a\": [1, 2]\n}\n"})
	if got := string(golden.Read(t, path)); got != `{"a":[1,2]}` {
		t.Errorf("Read = %s, want the document compacted", got)
	}
	tests := []struct {
		got  string
		want string // in the failure; "" for a pass
	}{
		{`{"a":[1,2]}`, ""},
		{`{"a":[2,1]}`, "want (" + path + ")\n{\n  \"a\": ["},
		{"{\"a\":[1,2]}\n", "only in white space"},
		{`not json`, "got\nnot json\n"},
	}
	for _, tc := range tests {
		msgs := tbrecord.Run(func(tb testing.TB) { golden.Equal(tb, path, []byte(tc.got)) })
		if tc.want == "" && len(msgs) > 0 {
			t.Errorf("Equal(%q) failed: %q", tc.got, msgs)
		}
		if tc.want != "" && (len(msgs) != 1 || !strings.Contains(msgs[0], tc.want)) {
			t.Errorf("Equal(%q) failures %q, want one saying %q", tc.got, msgs, tc.want)
		}
	}
}
