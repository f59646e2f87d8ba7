package localstack

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

// Tap is the io.Writer the handlers' JSON logger writes to. It counts the
// workflow.Transition of every line, as the deployed stack's metric filters
// do, and passes the lines on to Next (a log file, or nothing). It keeps
// the Supervisor's retries and the stale replies, each of one claim, for
// their attribution (Cause). It also follows the chaos run's replica
// faults: the Agents' tries that failed on a replica at fault, and the
// tries sent back to it.
type Tap struct {
	Next io.Writer

	mu     sync.Mutex
	counts map[workflow.Transition]int
	// retries and stales are the claims the Supervisor retried and whose
	// replies the Scheduler refused as stale.
	retries, stales []claimEvent
	// atFault are the replicas' hosts at fault, each with when it healed
	// (zero while at fault); met, the claims whose Agent had a try fail on
	// one, and when; lastAtFault, the claims whose last failed try so far
	// was on one; failedOn, the hosts each claim's tries failed on; open,
	// the breakers open (or half-open) by step, host and whether an undo's.
	atFault      map[string]fault
	met          map[claimKey]time.Time
	lastAtFault  map[claimKey]bool
	failedOn     map[claimKey]map[string]bool
	open         map[breakerKey]bool
	replicaTries int
	repeats      int
}

// fault is a replica's fault as the Tap follows it: a try that failed up
// to grace after it healed was one it held (a slow replica keeps a call
// for slow; a line is written a moment after its try failed).
type fault struct {
	healed time.Time
	grace  time.Duration
}

// faultGrace is how long after a replica healed a try's line may come
// from a try it failed, besides what it held a call for.
const faultGrace = 100 * time.Millisecond

// breakerKey names an Agent's breaker of one endpoint, as its log lines do.
type breakerKey struct {
	step, host string
	undo       bool
}

// tapLine is what Tap reads of a line.
type tapLine struct {
	Time       time.Time           `json:"time"`
	Msg        string              `json:"msg"`
	Transition workflow.Transition `json:"transition"`
	Replica    string              `json:"replica"`
	Slow       time.Duration       `json:"slow"`
	Endpoint   string              `json:"endpoint"`
	AgentStep  string              `json:"agentStep"`
	OrderID    string              `json:"orderId"`
	Step       string              `json:"step"`
	Attempt    int                 `json:"attempt"`
	Compensate bool                `json:"compensate"`
	Handback   struct {
		Compensate bool `json:"compensate"`
	} `json:"handback"`
}

// The chaos run's lines about its replica faults (Stack.replicaFaults), and
// the Agent's lines about its tries and breakers that Tap follows.
const (
	msgReplicaAtFault = "chaos: replica at fault"
	msgReplicaHealed  = "chaos: replica healed"
	msgTryFailed      = "try failed, retrying"
	msgBreakerOpened  = "breaker opened"
	msgBreakerClosed  = "breaker closed"
)

// keep records a retry or a stale reply; t.mu is held.
func (t *Tap) keep(rec tapLine) {
	ev := claimEvent{at: rec.Time, order: rec.OrderID, step: rec.Step, attempt: rec.Attempt}
	switch rec.Transition {
	case workflow.TransitionRetried:
		ev.undo = rec.Handback.Compensate
		t.retries = append(t.retries, ev)
	case workflow.TransitionStaleReply:
		ev.undo = rec.Compensate
		t.stales = append(t.stales, ev)
	}
}

// follow tracks the replica faults; t.mu is held. A try sent back to a
// replica at fault after one of the same claim failed there is a repeat,
// unless a try of the claim failed on another replica too, or another
// replica's breaker was open: the routing had nowhere better to go.
func (t *Tap) follow(rec tapLine) {
	if t.atFault == nil {
		t.atFault, t.met, t.lastAtFault = map[string]fault{}, map[claimKey]time.Time{}, map[claimKey]bool{}
		t.failedOn, t.open = map[claimKey]map[string]bool{}, map[breakerKey]bool{}
	}
	switch {
	case rec.Msg == msgReplicaAtFault:
		t.atFault[strings.TrimPrefix(rec.Replica, "http://")] = fault{grace: rec.Slow + faultGrace}
	case rec.Msg == msgReplicaHealed:
		host := strings.TrimPrefix(rec.Replica, "http://")
		if f, ok := t.atFault[host]; ok {
			f.healed = rec.Time
			t.atFault[host] = f
		}
	case rec.Msg == msgBreakerOpened && rec.OrderID == "":
		t.open[breakerKey{rec.AgentStep, rec.Endpoint, rec.Compensate}] = true
	case rec.Msg == msgBreakerClosed && rec.OrderID == "":
		delete(t.open, breakerKey{rec.AgentStep, rec.Endpoint, rec.Compensate})
	case rec.Endpoint != "" && rec.OrderID != "":
		k := claimKey{rec.OrderID, rec.Attempt}
		failed := t.failedOn[k]
		if failed == nil {
			failed = map[string]bool{}
			t.failedOn[k] = failed
		}
		f, ok := t.atFault[rec.Endpoint]
		t.lastAtFault[k] = ok && (f.healed.IsZero() || !rec.Time.After(f.healed.Add(f.grace)))
		if t.lastAtFault[k] {
			t.replicaTries++
			if _, ok := t.met[k]; !ok {
				t.met[k] = rec.Time
			}
			// Only a try's own line: the line of a claim that ran out of
			// time names the last try again.
			if rec.Msg == msgTryFailed && failed[rec.Endpoint] && len(failed) == 1 && !t.elsewhereOpen(rec) {
				t.repeats++
			}
		}
		failed[rec.Endpoint] = true
	}
}

// elsewhereOpen reports whether a breaker of rec's step on another host
// than rec's was open; t.mu is held.
func (t *Tap) elsewhereOpen(rec tapLine) bool {
	for b := range t.open {
		if b.step == rec.AgentStep && b.undo == rec.Compensate && b.host != rec.Endpoint {
			return true
		}
	}
	return false
}

// ReplicaFaults returns how many Agent tries failed on a replica at fault,
// and how many were sent back to one after a try of the same claim had
// failed there while another replica could take it (the routing's goal is
// none).
func (t *Tap) ReplicaFaults() (failedTries, repeats int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.replicaTries, t.repeats
}

// replicaMarks are the claims a replica at fault held up: a try failed on
// one, and no try failed elsewhere after it. A claim whose Agent went on
// to another replica and still ran out of time was held up there.
func (t *Tap) replicaMarks() []mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]mark, 0, len(t.met))
	for k, at := range t.met {
		if t.lastAtFault[k] {
			out = append(out, mark{cause: CauseReplica, from: at, to: at, order: k.order, attempt: k.attempt})
		}
	}
	return out
}

// events returns the retries and the stale replies so far.
func (t *Tap) events() (retries, stales []claimEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.retries), slices.Clone(t.stales)
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
			t.keep(rec)
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
