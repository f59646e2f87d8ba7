package scheduler

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config is the Scheduler's configuration, read once at cold start.
type Config struct {
	OrdersTable string
	StateTable  string
	// SchedulerQueueURL and ResponseQueueURL are the queues the Scheduler
	// consumes: it hands a step whose dispatch failed back to the first,
	// after a backoff, and brings a message that failed back sooner on
	// either.
	SchedulerQueueURL string
	ResponseQueueURL  string
	// AgentQueues maps each step to its Agent's request queue URL.
	AgentQueues map[string]string
	Workflow    workflow.Definition
	Policy      workflow.Policy
	// AlertTopicARN is the operators' SNS topic.
	AlertTopicARN string
	// MaxReceiveCount is the queues' redrive setting: a poison message's
	// last receive raises an alert before it moves to the DLQ.
	MaxReceiveCount int
	// OperatorAPIURL is the HTTP API the operators' CLI talks to, named in
	// alerts' ready-to-run commands; optional.
	OperatorAPIURL string
}

// LoadConfig reads the Scheduler's environment:
//
//	ORDERS_TABLE, STATE_TABLE   table names
//	SCHEDULER_QUEUE_URL         the scheduler queue (it consumes it, and re-sends to it)
//	RESPONSE_QUEUE_URL          the agents' response queue (it consumes it)
//	AGENT_QUEUE_URLS            step=url pairs separated by commas, one per workflow step
//	ALERT_TOPIC_ARN             SNS topic for operator alerts
//	MAX_RECEIVE_COUNT           the queues' redrive maxReceiveCount (default 5)
//	OPERATOR_API_URL            optional: the API URL alerts' CLI commands name
//	the policy variables of workflow.LoadPolicy, shared with the Supervisor
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	cfg := Config{
		OrdersTable:       r.String("ORDERS_TABLE"),
		StateTable:        r.String("STATE_TABLE"),
		SchedulerQueueURL: r.URL("SCHEDULER_QUEUE_URL"),
		ResponseQueueURL:  r.URL("RESPONSE_QUEUE_URL"),
		AlertTopicARN:     r.String("ALERT_TOPIC_ARN"),
		Workflow:          workflow.Default(),
		// The same bounds the stack's sas:maxReceiveCount has.
		MaxReceiveCount: r.Int("MAX_RECEIVE_COUNT", topology.MaxReceiveCount, 1, 1000),
		OperatorAPIURL:  r.StringOr("OPERATOR_API_URL", ""),
	}
	cfg.Policy = workflow.LoadPolicy(r)
	queues, err := ParseAgentQueues(r.String("AGENT_QUEUE_URLS"))
	if err != nil {
		r.Fail("AGENT_QUEUE_URLS: %v", err)
	}
	cfg.AgentQueues = queues
	// Validate repeats the checks of missing values LoadConfig has already
	// reported; it runs for what ties values together once all are there.
	if queues != nil && cfg.SchedulerQueueURL != "" && cfg.ResponseQueueURL != "" {
		if err := cfg.Validate(); err != nil {
			r.Fail("%v", err)
		}
	}
	return cfg, r.Err()
}

// Validate checks that every step of the workflow has an Agent queue.
func (c Config) Validate() error {
	errs := []error{c.Workflow.Validate(), c.Policy.Validate()}
	for name, u := range map[string]string{"SchedulerQueueURL": c.SchedulerQueueURL, "ResponseQueueURL": c.ResponseQueueURL} {
		if u == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if c.MaxReceiveCount < 1 {
		errs = append(errs, fmt.Errorf("MaxReceiveCount %d must be at least 1", c.MaxReceiveCount))
	}
	for _, s := range c.Workflow.Steps {
		if c.AgentQueues[s.Name] == "" {
			errs = append(errs, fmt.Errorf("no agent queue for step %q", s.Name))
		}
	}
	return errors.Join(errs...)
}

// ParseAgentQueues reads "step=url,step=url".
func ParseAgentQueues(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	queues := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		step, queueURL, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || step == "" || queueURL == "" {
			return nil, fmt.Errorf("%q is not step=url", pair)
		}
		if _, dup := queues[step]; dup {
			return nil, fmt.Errorf("step %q named twice", step)
		}
		if u, err := url.Parse(queueURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("step %q: %q is not an absolute http(s) URL", step, queueURL)
		}
		queues[step] = queueURL
	}
	return queues, nil
}
