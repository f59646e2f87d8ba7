package workflow

import (
	"fmt"
	"time"

	"github.com/sasflow/sas/shared/config"
)

// Policy holds the timing and retry rules shared by the Submission, the
// Scheduler and the Supervisor.
type Policy struct {
	// MaxFailures is the threshold: the Supervisor's MaxFailures-th timeout
	// of a step moves the order to Error.
	MaxFailures int
	// ClaimTimeout is how long a Pending record may wait for a Scheduler
	// before the Supervisor re-sends it.
	ClaimTimeout time.Duration
	// BackoffBase and BackoffMax shape the delay before a timed-out step is
	// tried again: BackoffBase * 2^(failures-1), capped at BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// AlertTimeout is how long an Error record may keep its alert unsent
	// before the Supervisor publishes it instead.
	AlertTimeout time.Duration
}

// DefaultPolicy returns the rules used when configuration says nothing.
func DefaultPolicy() Policy {
	return Policy{
		MaxFailures:  3,
		ClaimTimeout: 2 * time.Minute,
		BackoffBase:  5 * time.Second,
		BackoffMax:   5 * time.Minute,
		AlertTimeout: 2 * time.Minute,
	}
}

// LoadPolicy reads the policy's environment variables, each optional:
// MAX_FAILURES, CLAIM_TIMEOUT, BACKOFF_BASE, BACKOFF_MAX, ALERT_TIMEOUT. The
// Scheduler and the Supervisor both read it, so their policies cannot drift.
// Range errors are recorded in r; the caller runs Validate for the rules
// that tie fields together.
func LoadPolicy(r *config.Reader) Policy {
	p := DefaultPolicy()
	p.MaxFailures = r.Int("MAX_FAILURES", p.MaxFailures, 1, 100)
	p.ClaimTimeout = r.Duration("CLAIM_TIMEOUT", p.ClaimTimeout, time.Second, time.Hour)
	p.BackoffBase = r.Duration("BACKOFF_BASE", p.BackoffBase, 0, maxSQSDelay)
	p.BackoffMax = r.Duration("BACKOFF_MAX", p.BackoffMax, 0, maxSQSDelay)
	p.AlertTimeout = r.Duration("ALERT_TIMEOUT", p.AlertTimeout, time.Second, time.Hour)
	return p
}

// maxSQSDelay is the longest delay SQS can put on a message.
const maxSQSDelay = 15 * time.Minute

// Validate checks the policy's ranges.
func (p Policy) Validate() error {
	switch {
	case p.MaxFailures < 1 || p.MaxFailures > 100:
		return fmt.Errorf("policy: MaxFailures %d must be within 1..100", p.MaxFailures)
	case p.ClaimTimeout < time.Second:
		return fmt.Errorf("policy: ClaimTimeout %v must be at least 1s", p.ClaimTimeout)
	case p.BackoffBase < 0 || p.BackoffMax < p.BackoffBase:
		return fmt.Errorf("policy: backoff %v..%v must satisfy 0 <= base <= max", p.BackoffBase, p.BackoffMax)
	case p.BackoffMax > maxSQSDelay:
		return fmt.Errorf("policy: BackoffMax %v exceeds the SQS delay limit of %v", p.BackoffMax, maxSQSDelay)
	case p.AlertTimeout < time.Second:
		return fmt.Errorf("policy: AlertTimeout %v must be at least 1s", p.AlertTimeout)
	}
	return nil
}

// Backoff is the delay before retrying a step that has failed failures times.
func (p Policy) Backoff(failures int) time.Duration {
	if failures <= 0 || p.BackoffBase == 0 {
		return 0
	}
	d := p.BackoffBase
	for i := 1; i < failures; i++ {
		d *= 2
		if d >= p.BackoffMax {
			return p.BackoffMax
		}
	}
	return min(d, p.BackoffMax)
}

// RecoveryKind says what the Supervisor does with an expired record.
type RecoveryKind string

const (
	// Retry: the step timed out below the threshold; back to Pending and
	// re-sent to the Scheduler after a backoff.
	Retry RecoveryKind = "retry"
	// GiveUp: the step timed out for the MaxFailures-th time; Error and alert.
	GiveUp RecoveryKind = "give-up"
	// Requeue: a Pending record nobody claimed in time; re-sent as it is.
	Requeue RecoveryKind = "requeue"
	// ResendAlert: an Error record whose alert was not confirmed sent.
	ResendAlert RecoveryKind = "resend-alert"
	// Skip: the record is not expired or not the Supervisor's business.
	Skip RecoveryKind = "skip"
)

// Cause says why a claimed step or undo failed to run.
type Cause string

const (
	// CauseTimeout: CompleteBy passed without a committed reply.
	CauseTimeout Cause = "timeout"
	// CauseDispatch: the request could not be sent to its agent's queue.
	CauseDispatch Cause = "dispatch"
)

// Recovery is the decision for one record that failed to run: the
// Supervisor's for an expired record, the Scheduler's for a claim whose
// dispatch failed.
type Recovery struct {
	Kind RecoveryKind
	// FailureCount is the record's new FailureCount.
	FailureCount int
	// Delay is how long the Scheduler message waits in the queue.
	Delay time.Duration
	// CompleteBy is the record's new deadline.
	CompleteBy time.Time
	// UndoFrom, for a GiveUp of a forward step, is the first step to
	// compensate; -1 when the order goes to Error instead. UndoStep names it.
	UndoFrom int
	UndoStep string
	// Cause and Reason, for a Retry or GiveUp, say why the try failed; Reason
	// becomes the record's LastError.
	Cause  Cause
	Reason string
}

// requeueWait is how long a requeued record waits for a claim: ClaimTimeout,
// doubled for each earlier requeue (up to 16 times, and no more than 15
// minutes unless ClaimTimeout itself is longer). A record stays unclaimed
// mostly because the scheduler queue is backed up, with its first message
// still waiting in it; a fresh message every ClaimTimeout would only add to
// the backlog (seen in an overloaded 10,000-order chaos run).
func (p Policy) requeueWait(requeues int) time.Duration {
	wait := p.ClaimTimeout << min(max(requeues, 0), 4)
	return min(wait, max(p.ClaimTimeout, 15*time.Minute))
}

// Recover decides what the Supervisor does with a record it found expired.
// It is pure: the caller applies it with a conditional write that re-checks
// the state, Attempt and CompleteBy it saw. A claimed step or undo that timed
// out counts a failure (see failed); an unclaimed one is re-sent; a record
// whose alert was not confirmed gets its alert again.
func (p Policy) Recover(d Definition, s State, now time.Time) Recovery {
	skip := Recovery{Kind: Skip, FailureCount: s.FailureCount, UndoFrom: -1}
	if now.Before(s.CompleteBy) {
		return skip
	}
	switch s.ProcessState {
	case Processing, Compensating:
		return p.failed(d, s, now, CauseTimeout, TimeoutMessage(s))
	case Pending, CompensationPending:
		return Recovery{Kind: Requeue, FailureCount: s.FailureCount, CompleteBy: now.Add(p.requeueWait(s.Requeues)), UndoFrom: -1}
	case Error, CompensationFailed:
		if s.AlertPending {
			return Recovery{Kind: ResendAlert, FailureCount: s.FailureCount, CompleteBy: now.Add(p.AlertTimeout), UndoFrom: -1}
		}
	}
	return skip
}

// DispatchFailed decides for a record the Scheduler has just claimed but
// whose request it could not send. A failed dispatch counts as a failure of
// the step (or undo), exactly like a timeout, so a queue that keeps refusing
// (a revoked permission or key, a deleted queue) ends in a give-up with an
// alert instead of an endless claim and re-send; a short outage is retried
// after the same backoff and recovers. cause is the send's error, which the
// record keeps as LastError.
func (p Policy) DispatchFailed(d Definition, s State, now time.Time, cause string) Recovery {
	what := "step " + s.Step
	if s.ProcessState == Compensating {
		what = "compensation of step " + s.Step
	}
	return p.failed(d, s, now, CauseDispatch, Clip(fmt.Sprintf("%s%s attempt %d failed: %s", DispatchFailurePrefix, what, s.Attempt, cause), MaxErrorBytes))
}

// DispatchFailurePrefix starts the LastError of a failed dispatch, so an
// alert re-sent later still says what failed.
const DispatchFailurePrefix = "dispatch of "

// failed counts one failure of the claimed step or undo of s: below the
// threshold it is retried after a backoff; at the threshold a forward step
// gives up into its compensation when something may need undoing (UndoFrom,
// with CompleteBy the compensation's claim deadline), else into Error; a
// compensation gives up into CompensationFailed.
func (p Policy) failed(d Definition, s State, now time.Time, cause Cause, reason string) Recovery {
	failures := s.FailureCount + 1
	r := Recovery{FailureCount: failures, UndoFrom: -1, Cause: cause, Reason: reason}
	if failures < p.MaxFailures {
		r.Kind, r.Delay = Retry, p.Backoff(failures)
		r.CompleteBy = now.Add(r.Delay + p.ClaimTimeout)
		return r
	}
	r.Kind, r.CompleteBy = GiveUp, now.Add(p.AlertTimeout)
	if s.ProcessState == Processing {
		reason := StopTimeouts
		if cause == CauseDispatch {
			reason = StopDispatch
		}
		if stop := d.StopAt(s, reason); stop.UndoFrom >= 0 {
			r.UndoFrom, r.UndoStep = stop.UndoFrom, d.Steps[stop.UndoFrom].Name
			r.CompleteBy = now.Add(p.ClaimTimeout)
		}
	}
	return r
}

// TimeoutMessage is the LastError of a claim whose CompleteBy passed.
func TimeoutMessage(s State) string {
	return fmt.Sprintf("step %s attempt %d did not complete by %s", s.Step, s.Attempt, s.CompleteBy.UTC().Format(time.RFC3339))
}
