package workflow

import (
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
	// Retention is how long an order is kept once it is terminal: the
	// write that ends it sets its record's ExpiresAt Retention later, and
	// DynamoDB's TTL deletes it some time after that.
	Retention time.Duration
}

// DefaultRetention keeps a terminal order for 90 days.
const DefaultRetention = 90 * 24 * time.Hour

// MinRetention and MaxRetention bound Retention: a day leaves a client and
// an operator time to read a finished order, and ten years is beyond any
// record-keeping rule the orders are likely to fall under.
const (
	MinRetention = 24 * time.Hour
	MaxRetention = 10 * 365 * 24 * time.Hour
)

// DefaultPolicy returns the rules used when configuration says nothing.
func DefaultPolicy() Policy {
	return Policy{
		MaxFailures:  3,
		ClaimTimeout: 2 * time.Minute,
		BackoffBase:  5 * time.Second,
		BackoffMax:   5 * time.Minute,
		AlertTimeout: 2 * time.Minute,
		Retention:    DefaultRetention,
	}
}

// PolicyVariables names the policy's fields by the environment variables
// LoadPolicy reads them from, for config.Rules.
var PolicyVariables = map[string]string{
	"MaxFailures":  "MAX_FAILURES",
	"ClaimTimeout": "CLAIM_TIMEOUT",
	"BackoffBase":  "BACKOFF_BASE",
	"BackoffMax":   "BACKOFF_MAX",
	"AlertTimeout": "ALERT_TIMEOUT",
	"Retention":    "RETENTION",
}

// LoadPolicy reads the policy's environment variables, each optional:
// MAX_FAILURES, CLAIM_TIMEOUT, BACKOFF_BASE, BACKOFF_MAX, ALERT_TIMEOUT,
// RETENTION. The
// Scheduler and the Supervisor both read it, so their policies cannot drift.
// It only parses (what does not parse is recorded in r and keeps its
// default); the caller applies Check, with PolicyVariables, for the bounds.
func LoadPolicy(r *config.Reader) Policy {
	p := DefaultPolicy()
	p.MaxFailures = r.Int("MAX_FAILURES", p.MaxFailures)
	p.ClaimTimeout = r.Duration("CLAIM_TIMEOUT", p.ClaimTimeout)
	p.BackoffBase = r.Duration("BACKOFF_BASE", p.BackoffBase)
	p.BackoffMax = r.Duration("BACKOFF_MAX", p.BackoffMax)
	p.AlertTimeout = r.Duration("ALERT_TIMEOUT", p.AlertTimeout)
	p.Retention = r.Duration("RETENTION", p.Retention)
	return p
}

// maxSQSDelay is the longest delay SQS can put on a message.
const maxSQSDelay = 15 * time.Minute

// Validate checks the policy's ranges and reports every problem at once.
func (p Policy) Validate() error { return config.Validate("policy", p) }

// Check applies the policy's rules to r, so an actor's Config reports them
// with its own problems.
func (p Policy) Check(r *config.Rules) {
	r.Count("MaxFailures", p.MaxFailures, 1, 100)
	r.Within("ClaimTimeout", p.ClaimTimeout, time.Second, time.Hour)
	r.Within("BackoffBase", p.BackoffBase, 0, maxSQSDelay)
	r.Within("BackoffMax", p.BackoffMax, 0, maxSQSDelay)
	if p.BackoffMax < p.BackoffBase {
		r.Bad("BackoffMax", p.BackoffMax, "must be at least %s=%v", r.Name("BackoffBase"), p.BackoffBase)
	}
	r.Within("AlertTimeout", p.AlertTimeout, time.Second, time.Hour)
	r.Within("Retention", p.Retention, MinRetention, MaxRetention)
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
