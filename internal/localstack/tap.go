package localstack

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/sasflow/sas/shared/workflow"
)

// Tap is the io.Writer the handlers' JSON logger writes to. It counts the
// workflow.Transition of every line, as the deployed stack's metric filters
// do, and passes the lines on to Next (a log file, or nothing).
type Tap struct {
	Next io.Writer

	mu     sync.Mutex
	counts map[workflow.Transition]int
}

// Write takes one or more whole JSON lines, as slog's JSON handler writes
// them: one record per call.
func (t *Tap) Write(p []byte) (int, error) {
	var rec struct {
		Transition workflow.Transition `json:"transition"`
	}
	t.mu.Lock()
	for line := range bytes.Lines(p) {
		if json.Unmarshal(line, &rec) == nil && rec.Transition != "" {
			if t.counts == nil {
				t.counts = map[workflow.Transition]int{}
			}
			t.counts[rec.Transition]++
		}
		rec.Transition = ""
	}
	t.mu.Unlock()
	if t.Next != nil {
		return t.Next.Write(p)
	}
	return len(p), nil
}

// Counts returns a copy of the counts so far.
func (t *Tap) Counts() map[workflow.Transition]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[workflow.Transition]int, len(t.counts))
	for k, v := range t.counts {
		out[k] = v
	}
	return out
}
