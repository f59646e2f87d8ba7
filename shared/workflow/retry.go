package workflow

import (
	"fmt"
	"time"
)

// A step's own retry policy (Step.Retry): how often its Agent may fail
// before the step is given up, the backoff between its attempts, and what
// happens when the failures reach the threshold: give it up as the global
// Policy does (compensate, or Error), or wait an extended period and hand it
// back to the Scheduler with a fresh failure count, in the expectation that
// the fault heals meanwhile (Waiting), up to WaitRounds times.

// Exhausted says what a step whose failures reach its threshold does.
type Exhausted string

const (
	// ExhaustedCompensate gives the step up: its compensation starts, or
	// the order waits in Error (Definition.StopAt). The default.
	ExhaustedCompensate Exhausted = "compensate"
	// ExhaustedWait puts the order in Waiting for Retry.Wait, then hands the
	// step back with a fresh failure count; after Retry.WaitRounds waits it
	// gives the step up as ExhaustedCompensate does.
	ExhaustedWait Exhausted = "wait"
)

// Retry is a step's retry policy. A field left out (nil, zero) takes the
// global Policy's value, so a step that says nothing retries exactly as the
// deployment's environment says. An undo of the step keeps MaxFailures and
// the backoff but never waits: an undo that keeps failing ends in
// CompensationFailed.
type Retry struct {
	// MaxFailures is the step's threshold (Policy.MaxFailures).
	MaxFailures *int
	// BackoffBase and BackoffMax shape the delay before a failed attempt is
	// handed back (Policy.Backoff).
	BackoffBase, BackoffMax *time.Duration
	// OnExhausted is ExhaustedCompensate (also when empty) or
	// ExhaustedWait.
	OnExhausted Exhausted
	// Wait and WaitRounds, only with ExhaustedWait: how long each extended
	// wait lasts, and how many waits a step gets before it is given up.
	Wait       time.Duration
	WaitRounds int
}

// MaxRetryWait bounds Retry.Wait. An order that waits is open, and its
// orders item's TTL was fixed when it was created (see retention.go): the
// change that ends a wait is the Supervisor's, which moves that TTL on when
// the order is open past its bound, so each single wait must end well
// within the shortest retention (MinRetention, a day) for the item to be
// there when it does. Half of it leaves the Supervisor's sweep all the
// margin it could need.
const MaxRetryWait = MinRetention / 2

// MaxWaitRounds bounds Retry.WaitRounds.
const MaxWaitRounds = 100

// stepPolicy is the policy that applies to one step: the global Policy
// with the step's own values merged in (MaxFailures, backoff), and its
// extended wait, if any.
type stepPolicy struct {
	Policy
	// wait is the extended wait at the threshold; zero when the step gives
	// up instead. rounds is how many of them the step gets.
	wait   time.Duration
	rounds int
}

// policyFor is the one place a step's Retry meets the global Policy: every
// decision about the failures of step k (failed, retry, the backoff, the
// alert owed) reads it. A step index outside the definition (a Machine
// without one: Stranded) gets the global Policy.
func (m Machine) policyFor(k int) stepPolicy {
	sp := stepPolicy{Policy: m.Policy}
	if k < 0 || k >= len(m.Def.Steps) || m.Def.Steps[k].Retry == nil {
		return sp
	}
	r := m.Def.Steps[k].Retry
	if r.MaxFailures != nil {
		sp.MaxFailures = *r.MaxFailures
	}
	if r.BackoffBase != nil {
		sp.BackoffBase = *r.BackoffBase
	}
	if r.BackoffMax != nil {
		sp.BackoffMax = *r.BackoffMax
	}
	if r.OnExhausted == ExhaustedWait {
		sp.wait, sp.rounds = r.Wait, r.WaitRounds
	}
	return sp
}

// MaxFailuresOf is the threshold of step k: the step's own, or the global
// Policy's. An alert names it.
func (m Machine) MaxFailuresOf(k int) int { return m.policyFor(k).MaxFailures }

// validate reports every problem of the retry policy; prefix names the
// step.
func (r Retry) validate(prefix string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(prefix+format, args...)) }
	if r.MaxFailures != nil && (*r.MaxFailures < 1 || *r.MaxFailures > 100) {
		bad("retry.maxFailures %d must be within 1..100", *r.MaxFailures)
	}
	// A backoff is an SQS message's DelaySeconds, at most 15 minutes
	// ("DelaySeconds ... Valid values: 0 to 900", Amazon SQS API Reference,
	// SendMessage: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
	for _, d := range []struct {
		name string
		v    *time.Duration
	}{{"backoffBase", r.BackoffBase}, {"backoffMax", r.BackoffMax}} {
		if d.v != nil && (*d.v < 0 || *d.v > maxSQSDelay) {
			bad("retry.%s %v must be within 0..%v (an SQS message's longest delay)", d.name, *d.v, maxSQSDelay)
		}
	}
	if r.BackoffBase != nil && r.BackoffMax != nil && *r.BackoffMax < *r.BackoffBase {
		bad("retry.backoffMax %v must be at least retry.backoffBase %v", *r.BackoffMax, *r.BackoffBase)
	}
	switch r.OnExhausted {
	case "", ExhaustedCompensate:
		if r.Wait != 0 || r.WaitRounds != 0 {
			bad("retry.wait and retry.waitRounds apply only with onExhausted %q", ExhaustedWait)
		}
	case ExhaustedWait:
		if r.Wait <= 0 || r.Wait > MaxRetryWait {
			bad("retry.wait %v must be over 0 and at most %v (half the shortest retention)", r.Wait, MaxRetryWait)
		}
		if r.WaitRounds < 1 || r.WaitRounds > MaxWaitRounds {
			bad("retry.waitRounds %d must be within 1..%d", r.WaitRounds, MaxWaitRounds)
		}
	default:
		bad("retry.onExhausted %q must be %q or %q", r.OnExhausted, ExhaustedCompensate, ExhaustedWait)
	}
	return errs
}
