package workflow

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Payload bounds. Everything an order carries travels in SQS messages (at
// most 1 MiB) and lives in one DynamoDB item (at most 400 KB): the input in
// every request, each step's output in every later request and in every
// undo's request, and every output and undo output in the state record. So
// each part has a bound, checked where it enters the system, and a
// definition whose worst case could exceed either limit is refused by
// Validate (at every function's cold start, at `cdk synth` and when the local
// stack starts), instead of an order finding out halfway.
//
// The record keeps everything a request carries and more (each step's
// history, the undo outputs), so with these two limits the item binds
// first: a definition whose record fits has every request far under the
// message limit. Validate checks both all the same, so that neither check
// rests on the other's numbers.
//
// Nothing bounded here goes to SNS, whose messages stay at 256 KiB
// (topic.MaxBatchBytes): an alert quotes a clipped error and a status event
// a short reason, never an input or an output.
const (
	// MaxMessageBytes is the SQS message size limit: 1 MiB (1,048,576
	// bytes), which Lambda's SQS event source mapping delivers too. See
	// "Amazon SQS message quotas"
	// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html)
	// and the AWS Compute Blog's "More room to build: serverless services
	// now support payloads up to 1 MB"
	// (https://aws.amazon.com/blogs/compute/more-room-to-build-serverless-services-now-support-payloads-up-to-1-mb/).
	// The stack sets every queue's MaximumMessageSize to it.
	MaxMessageBytes = 1 << 20
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
	return d.checkSizes(MaxMessageBytes, MaxItemBytes)
}

// checkSizes reports every way d's worst case could exceed a message of
// messageLimit bytes or an item of itemLimit bytes: an output limit out of
// range, a request or an undo request too large for a message, a record too
// large for an item. The limits are parameters so that the tests can hold
// each check to a limit of their own; Validate passes the real ones.
func (d Definition) checkSizes(messageLimit, itemLimit int) []error {
	var errs []error
	limitsInRange := true
	for k, s := range d.Steps {
		if s.MaxOutputBytes < 0 || s.MaxOutputBytes > messageLimit-messageEnvelopeBytes {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: output limit %d must be within 0..%d (a reply must fit an SQS message)",
				d.ID(), s.Name, s.MaxOutputBytes, messageLimit-messageEnvelopeBytes))
			limitsInRange = false
			continue
		}
		if n := d.WorstRequestBytes(k, false); n > messageLimit {
			errs = append(errs, fmt.Errorf("workflow %q: the request of step %q can reach %d bytes (input %d + the outputs before it), over the SQS limit of %d: lower the steps' output limits",
				d.ID(), s.Name, n, MaxInputBytes, messageLimit))
		}
		if n := d.WorstRequestBytes(k, true); s.Compensable && n > messageLimit {
			errs = append(errs, fmt.Errorf("workflow %q: the undo request of step %q can reach %d bytes, over the SQS limit of %d: lower the steps' output limits",
				d.ID(), s.Name, n, messageLimit))
		}
	}
	// An output limit out of range makes the record's worst case
	// meaningless; the error above already refuses the definition.
	if n := d.WorstItemBytes(); limitsInRange && n > itemLimit {
		errs = append(errs, fmt.Errorf("workflow %q: a state record can reach %d bytes with every output at its limit, over the DynamoDB item limit of %d: lower the steps' output limits",
			d.ID(), n, itemLimit))
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
