package workflow

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Payload bounds. Everything an order carries travels in SQS messages (at
// most 256 KiB) and lives in one DynamoDB item (at most 400 KB): the input in
// every request, each step's output in every later request and in every
// undo's request, and every output and undo output in the state record. So
// each part has a bound, checked where it enters the system, and a
// definition whose worst case could exceed either limit is refused by
// Validate (at every function's cold start, at `cdk synth` and when the local
// stack starts), instead of an order finding out halfway.
const (
	// MaxMessageBytes is the SQS message size limit.
	MaxMessageBytes = 256 << 10
	// MaxItemBytes is the DynamoDB item size limit (400 KB: names and
	// values, UTF-8).
	MaxItemBytes = 400 << 10
	// MaxInputBytes bounds an order's input as the agents receive it. The
	// Submission function refuses a larger order (413); the largest order
	// its validation admits is under 8 KiB.
	MaxInputBytes = 16 << 10
	// DefaultMaxOutputBytes is a step's output limit when its definition
	// names none. An output over its step's limit is refused where it enters
	// the system (the agent, and again the Scheduler's commit), as an
	// uncertain failure: the remote applied the step and answered, so the
	// step is undone with the others.
	DefaultMaxOutputBytes = 32 << 10
	// MaxErrorBytes bounds the error texts a record keeps (LastError and
	// each step's errors).
	MaxErrorBytes = 2 << 10

	// messageEnvelopeBytes is what a request or reply carries besides the
	// input and the outputs: keys, names, times, a fault (bounded by the
	// message decoders), JSON punctuation and the outputs' step names.
	messageEnvelopeBytes = 4 << 10
	// itemFixedBytes is a state record without its input and steps: its
	// attribute names and scalar values, LastError and LockedBy.
	itemFixedBytes = 4<<10 + MaxErrorBytes
	// itemStepBytes is one step's history besides its two outputs: names,
	// counters, times and its two error texts.
	itemStepBytes = 1<<10 + 2*MaxErrorBytes
)

// OutputLimit is the most bytes the step's output (and its undo's output)
// may have.
func (s Step) OutputLimit() int {
	if s.MaxOutputBytes > 0 {
		return s.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

// WorstRequestBytes is the largest request the Scheduler can send for step
// k, or for its undo: the input and the outputs of the steps before k, and
// for an undo k's own output too.
func (d Definition) WorstRequestBytes(k int, undo bool) int {
	n := messageEnvelopeBytes + MaxInputBytes
	for j := 0; j < k || undo && j == k; j++ {
		n += d.Steps[j].OutputLimit()
	}
	return n
}

// WorstItemBytes is the largest state record an order of d can have: every
// step's output and undo output at their limits.
func (d Definition) WorstItemBytes() int {
	n := itemFixedBytes + MaxInputBytes
	for _, s := range d.Steps {
		n += itemStepBytes + s.OutputLimit()
		if s.Compensable {
			n += s.OutputLimit()
		}
	}
	return n
}

// validateSizes reports every bound d could break.
func (d Definition) validateSizes() []error {
	var errs []error
	for k, s := range d.Steps {
		if s.MaxOutputBytes < 0 || s.MaxOutputBytes > MaxMessageBytes-messageEnvelopeBytes {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: output limit %d must be within 0..%d (a reply must fit an SQS message)",
				d.ID(), s.Name, s.MaxOutputBytes, MaxMessageBytes-messageEnvelopeBytes))
			continue
		}
		if n := d.WorstRequestBytes(k, false); n > MaxMessageBytes {
			errs = append(errs, fmt.Errorf("workflow %q: the request of step %q can reach %d bytes (input %d + the outputs before it), over the SQS limit of %d: lower the steps' output limits",
				d.ID(), s.Name, n, MaxInputBytes, MaxMessageBytes))
		}
		if n := d.WorstRequestBytes(k, true); s.Compensable && n > MaxMessageBytes {
			errs = append(errs, fmt.Errorf("workflow %q: the undo request of step %q can reach %d bytes, over the SQS limit of %d: lower the steps' output limits",
				d.ID(), s.Name, n, MaxMessageBytes))
		}
	}
	if n := d.WorstItemBytes(); len(errs) == 0 && n > MaxItemBytes {
		errs = append(errs, fmt.Errorf("workflow %q: a state record can reach %d bytes with every output at its limit, over the DynamoDB item limit of %d: lower the steps' output limits",
			d.ID(), n, MaxItemBytes))
	}
	return errs
}

// OutputTooLarge is the error of an output over its step's limit.
func OutputTooLarge(step string, size, limit int) string {
	return fmt.Sprintf("the output of step %s has %d bytes, over its limit of %d bytes (workflow step output limit)", step, size, limit)
}

// Clip cuts s to at most n bytes on a rune boundary, marking the cut, so a
// text from outside (an error a remote or an SDK wrote) stays within a
// record's bounds.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
