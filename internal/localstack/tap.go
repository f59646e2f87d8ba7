package localstack

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/sasflow/sas/shared/workflow"
)

// Tap is the io.Writer the handlers' JSON logger writes to. It counts the
// workflow.Transition of every line, as the deployed stack's metric filters
// do, and passes the lines on to Next (a log file, or nothing). It also
// follows the chaos run's replica faults: the Agents' tries that failed on
// a replica at fault, and the Supervisor's retries of those steps.
type Tap struct {
	Next io.Writer

	mu     sync.Mutex
	counts map[workflow.Transition]int
	// atFault are the replicas' hosts at fault now; met, the steps
	// (order, step, attempt) whose Agent had a try fail on one.
	atFault                      map[string]bool
	met                          map[string]bool
	replicaTries, replicaRetries int
}

// tapLine is what Tap reads of a line.
type tapLine struct {
	Msg        string              `json:"msg"`
	Transition workflow.Transition `json:"transition"`
	Replica    string              `json:"replica"`
	Endpoint   string              `json:"endpoint"`
	OrderID    string              `json:"orderId"`
	Step       string              `json:"step"`
	Attempt    int                 `json:"attempt"`
}

// The chaos run's lines about its replica faults (Stack.replicaFaults).
const (
	msgReplicaAtFault = "chaos: replica at fault"
	msgReplicaHealed  = "chaos: replica healed"
)

// follow tracks the replica faults; t.mu is held.
func (t *Tap) follow(rec tapLine) {
	if t.atFault == nil {
		t.atFault, t.met = map[string]bool{}, map[string]bool{}
	}
	step := rec.OrderID + "|" + rec.Step + "|" + strconv.Itoa(rec.Attempt)
	switch {
	case rec.Msg == msgReplicaAtFault:
		t.atFault[strings.TrimPrefix(rec.Replica, "http://")] = true
	case rec.Msg == msgReplicaHealed:
		delete(t.atFault, strings.TrimPrefix(rec.Replica, "http://"))
	case rec.Endpoint != "" && rec.OrderID != "" && t.atFault[rec.Endpoint]:
		t.replicaTries++
		t.met[step] = true
	case rec.Transition == workflow.TransitionRetried && t.met[step]:
		t.replicaRetries++
	}
}

// ReplicaFaults returns how many Agent tries failed on a replica at fault,
// and how many Supervisor retries were of steps that had one.
func (t *Tap) ReplicaFaults() (failedTries, retries int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.replicaTries, t.replicaRetries
}

// Write takes one or more whole JSON lines, as slog's JSON handler writes
// them: one record per call.
func (t *Tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	for line := range bytes.Lines(p) {
		var rec tapLine
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		if rec.Transition != "" {
			if t.counts == nil {
				t.counts = map[workflow.Transition]int{}
			}
			t.counts[rec.Transition]++
		}
		t.follow(rec)
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
