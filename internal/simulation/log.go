package simulation

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Log is a run's event log: what happened, in the order it happened, at
// its simulated time. Every run hashes it; a recording run also keeps its
// lines, so two runs of one seed can be compared byte for byte and a
// failure can be shown.
type Log struct {
	start  time.Time
	hash   uint64
	lines  []string
	record bool
	n      int
}

// newLog starts a log; record keeps its lines.
func newLog(start time.Time, record bool) *Log {
	return &Log{start: start, hash: fnvOffset, record: record}
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (l *Log) mix(s string) {
	h := l.hash
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff
	h *= fnvPrime
	l.hash = h
}

func (l *Log) mixInt(n int64) {
	h := l.hash
	for i := 0; i < 8; i++ {
		h ^= uint64(n & 0xff)
		h *= fnvPrime
		n >>= 8
	}
	l.hash = h
}

// add logs one event: at, who did it (an invocation, a queue, the run),
// what, and about what (an order, a key, a message).
func (l *Log) add(at time.Time, who, what, about string) {
	l.n++
	l.mixInt(int64(at.Sub(l.start)))
	l.mix(who)
	l.mix(what)
	l.mix(about)
	if l.record {
		l.lines = append(l.lines, fmt.Sprintf("%12s %-22s %-34s %s", at.Sub(l.start).Round(time.Microsecond), who, what, about))
	}
}

// Hash is the digest of every event so far.
func (l *Log) Hash() uint64 { return l.hash }

// Events is how many events were logged.
func (l *Log) Events() int { return l.n }

// Lines are the recorded lines (none unless recording).
func (l *Log) Lines() []string { return l.lines }

// WriteTo writes the recorded lines.
func (l *Log) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, strings.Join(l.lines, "\n")+"\n")
	return int64(n), err
}
