package agent

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config configures an Agent Lambda.
type Config struct {
	// Step is the one step this agent performs; requests for another step
	// are poison (a wiring mistake).
	Step string
	// ResponseQueueURL is the Scheduler's response queue.
	ResponseQueueURL string
	// RemoteBaseURL is the remote service, without a trailing slash.
	RemoteBaseURL string
	// RemoteTimeout bounds one try; the deadline may cut it shorter.
	RemoteTimeout time.Duration
	// RetryBase and RetryMax shape the full-jitter backoff between tries.
	RetryBase time.Duration
	RetryMax  time.Duration
	// BreakerFailures consecutive transient failures open the breaker for
	// BreakerCooldown.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Concurrency bounds the records of a batch processed at once.
	Concurrency int
	// SafetyMargin is kept back from the deadline to send the reply.
	SafetyMargin time.Duration
	// AlertTopicARN, when set, is where a poison request's last receive is
	// reported (see WithAlerts); MaxReceiveCount is the queue's redrive
	// setting.
	AlertTopicARN   string
	MaxReceiveCount int
	// MaxOutputBytes is the step's output limit (workflow.Step.OutputLimit):
	// a larger output fails the step, uncertainly. Zero means
	// workflow.DefaultMaxOutputBytes.
	MaxOutputBytes int
	// RequestQueueURL is the queue the agent consumes; a request whose reply
	// could not be sent is brought back on it within seconds.
	RequestQueueURL string
}

// Defaults and limits of the settings.
const (
	DefaultRemoteTimeout   = 5 * time.Second
	DefaultRetryBase       = 100 * time.Millisecond
	DefaultRetryMax        = 5 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 10 * time.Second
	DefaultConcurrency     = 10
	DefaultSafetyMargin    = 500 * time.Millisecond

	// A step's budget is at most 15m (a Lambda's limit), so no wait may be
	// longer.
	maxWait        = 15 * time.Minute
	maxConcurrency = 100
	maxFailures    = 1000
)

// stepPattern is the step name shape of shared/message and shared/workflow.
var stepPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// DefaultConfig is the tuning LoadConfig gives when no optional variable is
// set; Step, ResponseQueueURL and RemoteBaseURL are left for the caller.
func DefaultConfig() Config {
	return Config{
		RemoteTimeout: DefaultRemoteTimeout, RetryBase: DefaultRetryBase, RetryMax: DefaultRetryMax,
		BreakerFailures: DefaultBreakerFailures, BreakerCooldown: DefaultBreakerCooldown,
		Concurrency: DefaultConcurrency, SafetyMargin: DefaultSafetyMargin,
		MaxReceiveCount: topology.MaxReceiveCount,
		MaxOutputBytes:  workflow.DefaultMaxOutputBytes,
	}
}

// LoadConfig reads the agent's configuration from the environment, reporting
// every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	c := Config{
		Step:             r.String("AGENT_STEP"),
		ResponseQueueURL: r.URL("RESPONSE_QUEUE_URL"),
		RemoteBaseURL:    r.URL("REMOTE_BASE_URL"),
		RemoteTimeout:    r.Duration("REMOTE_TIMEOUT", DefaultRemoteTimeout, 10*time.Millisecond, maxWait),
		RetryBase:        r.Duration("RETRY_BASE", DefaultRetryBase, time.Millisecond, time.Minute),
		RetryMax:         r.Duration("RETRY_MAX", DefaultRetryMax, time.Millisecond, maxWait),
		BreakerFailures:  r.Int("BREAKER_FAILURES", DefaultBreakerFailures, 1, maxFailures),
		BreakerCooldown:  r.Duration("BREAKER_COOLDOWN", DefaultBreakerCooldown, 10*time.Millisecond, maxWait),
		Concurrency:      r.Int("AGENT_CONCURRENCY", DefaultConcurrency, 1, maxConcurrency),
		SafetyMargin:     r.Duration("SAFETY_MARGIN", DefaultSafetyMargin, 0, time.Minute),
		AlertTopicARN:    r.StringOr("ALERT_TOPIC_ARN", ""),
		MaxReceiveCount:  r.Int("MAX_RECEIVE_COUNT", topology.MaxReceiveCount, 1, 1000),
		RequestQueueURL:  r.URL("REQUEST_QUEUE_URL"),
	}
	c.RemoteBaseURL = strings.TrimRight(c.RemoteBaseURL, "/")
	if c.Step != "" && !stepPattern.MatchString(c.Step) {
		r.Fail("AGENT_STEP=%q must match %s", c.Step, stepPattern)
	}
	// The step's output limit is the workflow's, not a setting of its own,
	// so the agent and the Scheduler cannot disagree.
	if def := workflow.Default(); c.Step != "" {
		found := false
		for _, s := range def.Steps {
			if s.Name == c.Step {
				c.MaxOutputBytes, found = s.OutputLimit(), true
			}
		}
		if !found {
			r.Fail("AGENT_STEP=%q is not a step of workflow %q (%s)", c.Step, def.Name, strings.Join(def.StepNames(), ", "))
		}
	}
	if c.RemoteBaseURL != "" {
		if u, err := url.Parse(c.RemoteBaseURL); err == nil && (u.RawQuery != "" || u.Fragment != "" || u.User != nil) {
			r.Fail("REMOTE_BASE_URL=%q must have no query, fragment or user info", c.RemoteBaseURL)
		}
	}
	if c.RetryMax < c.RetryBase {
		r.Fail("RETRY_MAX=%v must be at least RETRY_BASE=%v", c.RetryMax, c.RetryBase)
	}
	if err := r.Err(); err != nil {
		return Config{}, fmt.Errorf("agent config: %w", err)
	}
	return c, nil
}

// Validate checks a Config built in code; LoadConfig's result always passes.
func (c Config) Validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !stepPattern.MatchString(c.Step) {
		fail("Step %q must match %s", c.Step, stepPattern)
	}
	if c.ResponseQueueURL == "" {
		fail("ResponseQueueURL is required")
	}
	if c.RemoteTimeout <= 0 || c.RemoteTimeout > maxWait {
		fail("RemoteTimeout %v must be within (0, %v]", c.RemoteTimeout, maxWait)
	}
	if c.RetryBase < 0 || c.RetryMax < c.RetryBase || c.RetryMax > maxWait {
		fail("retry backoff %v..%v must satisfy 0 <= base <= max <= %v", c.RetryBase, c.RetryMax, maxWait)
	}
	if c.BreakerFailures < 1 || c.BreakerFailures > maxFailures {
		fail("BreakerFailures %d must be within 1..%d", c.BreakerFailures, maxFailures)
	}
	if c.BreakerCooldown < 0 || c.BreakerCooldown > maxWait {
		fail("BreakerCooldown %v must be within 0..%v", c.BreakerCooldown, maxWait)
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		fail("Concurrency %d must be within 1..%d", c.Concurrency, maxConcurrency)
	}
	if c.SafetyMargin < 0 || c.SafetyMargin > time.Minute {
		fail("SafetyMargin %v must be within 0..1m", c.SafetyMargin)
	}
	if c.MaxOutputBytes < 0 || c.MaxOutputBytes > workflow.MaxMessageBytes {
		fail("MaxOutputBytes %d must be within 0..%d (0: the workflow's default)", c.MaxOutputBytes, workflow.MaxMessageBytes)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	return nil
}
