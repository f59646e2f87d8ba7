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

// Records decodes every line written so far; a line that is not one JSON
// object fails the test.
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
		out = append(out, m)
	}
	return out
}
