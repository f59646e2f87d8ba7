// Package logtest captures the JSON logs a handler writes, for tests that
// assert what an operator (or a CloudWatch metric filter) would read.
package logtest

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
)

// Buffer is an io.Writer for slog.NewJSONHandler, safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records decodes every line written so far. A line that is not one JSON
// object fails the test, and so does a line with a key twice: slog writes
// both, a reader keeps one of them (which one is up to the reader), so a
// query on that key can land on the wrong value.
func (b *Buffer) Records(tb testing.TB) []map[string]any {
	tb.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(b.buf.Bytes()) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			tb.Fatalf("log line is not a JSON object: %q", line)
		}
		if key, ok := repeatedKey(line); ok {
			tb.Errorf("log line has the key %q twice: %s", key, line)
		}
		out = append(out, m)
	}
	return out
}

// repeatedKey returns a top-level key that line, a JSON object, has twice.
func repeatedKey(line []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil { // the opening brace
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		if seen[key] {
			return key, true
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}
