// Package golden holds wire types and writers to the golden JSON documents
// in testdata.
//
// Each wire format has two golden documents, the way aws-lambda-go pins its
// events: NAME.json with every member set, and NAME.zero.json, what the zero
// value encodes to (every member without an omission rule, none with one).
// CheckType pins a type to them; the writers' tests use Equal to check that
// they write the full document for fixed records, and the readers' tests
// Read to feed it to their decoders. There is no -update flag: a golden
// changes only by hand, as a change of the contract that clients see.
//
// The documents are kept indented for reading; Read compacts them to the
// bytes the system writes (shared/jsonwire: encoding/json without HTML
// escaping).
package golden

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/jsonwire"
)

// Read returns the JSON document at path compacted; an unreadable or
// invalid document fails the test.
func Read(tb testing.TB, path string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return b.Bytes()
}

// Equal fails unless got is the document at path byte for byte. got is not
// compacted first: what the callers pin is what goes on the wire, and that
// is compact JSON.
func Equal(tb testing.TB, path string, got []byte) {
	tb.Helper()
	want := Read(tb, path)
	if bytes.Equal(got, want) {
		return
	}
	var c bytes.Buffer
	if json.Compact(&c, got) == nil && bytes.Equal(c.Bytes(), want) {
		// Indented, the two would read the same: quote what differs.
		tb.Errorf("got %q, which differs from %s only in white space", got, path)
		return
	}
	tb.Errorf("got\n%s\nwant (%s)\n%s", indent(got), path, indent(want))
}

// indent makes a document readable in a failure message; what is not JSON
// is shown as it is.
func indent(doc []byte) []byte {
	var b bytes.Buffer
	if json.Indent(&b, doc, "", "  ") != nil {
		return doc
	}
	return b.Bytes()
}

// CheckType fails when T no longer reads and writes its golden documents
// dir/name.json and dir/name.zero.json exactly: a renamed or dropped tag
// makes a member unknown to the strict decoder (or written under another
// name), a changed omission rule changes the zero document, a reordered
// field the order of members, and a field added without a golden member is
// caught by the coverage check. T must be a struct; an embedded struct's
// members are not looked for under its own name, so embedding one fails the
// coverage check rather than passing unchecked.
func CheckType[T any](tb testing.TB, dir, name string) {
	tb.Helper()
	full := Read(tb, filepath.Join(dir, name+".json"))
	var v T
	if err := jsonstrict.Decode(full, &v); err != nil {
		tb.Fatalf("%s.json does not decode strictly into %T: %v", name, v, err)
	}
	if got := Marshal(tb, v); !bytes.Equal(got, full) {
		tb.Errorf("%T writes %s.json back as\n%s\nwant\n%s", v, name, got, full)
	}
	var zero T
	if got, want := Marshal(tb, zero), Read(tb, filepath.Join(dir, name+".zero.json")); !bytes.Equal(got, want) {
		tb.Errorf("zero %T writes\n%s\nwant (%s.zero.json)\n%s", zero, got, name, want)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(full, &members); err != nil {
		tb.Fatalf("%s.json is not an object: %v", name, err)
	}
	for _, member := range memberNames(reflect.TypeFor[T]()) {
		if _, ok := members[member]; !ok {
			tb.Errorf("%s.json lacks member %q of %T: a golden holds every member", name, member, v)
		}
	}
}

// memberNames lists the member names a struct type writes, as
// encoding/json names them.
func memberNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue // not written; a tag "-," names a member "-"
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// Marshal is jsonwire.Marshal, as the system writes every wire format, for
// a test: the bytes, or the test fails.
func Marshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := jsonwire.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
