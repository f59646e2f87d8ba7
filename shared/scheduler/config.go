package scheduler

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
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

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = map[string]string{
	"OrdersTable":       "ORDERS_TABLE",
	"StateTable":        "STATE_TABLE",
	"SchedulerQueueURL": "SCHEDULER_QUEUE_URL",
	"ResponseQueueURL":  "RESPONSE_QUEUE_URL",
	"AgentQueues":       "AGENT_QUEUE_URLS",
	"AlertTopicARN":     "ALERT_TOPIC_ARN",
	"MaxReceiveCount":   "MAX_RECEIVE_COUNT",
	"OperatorAPIURL":    "OPERATOR_API_URL",
}

// LoadConfig reads the Scheduler's environment and reports every problem at
// once, named by its variable:
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
	// The reader only parses; every rule is Validate's.
	cfg := Config{
		OrdersTable:       r.StringOr("ORDERS_TABLE", ""),
		StateTable:        r.StringOr("STATE_TABLE", ""),
		SchedulerQueueURL: r.StringOr("SCHEDULER_QUEUE_URL", ""),
		ResponseQueueURL:  r.StringOr("RESPONSE_QUEUE_URL", ""),
		AlertTopicARN:     r.StringOr("ALERT_TOPIC_ARN", ""),
		Workflow:          workflow.Default(),
		MaxReceiveCount:   r.Int("MAX_RECEIVE_COUNT", topology.MaxReceiveCount, math.MinInt, math.MaxInt),
		OperatorAPIURL:    r.StringOr("OPERATOR_API_URL", ""),
		Policy:            workflow.LoadPolicy(r),
	}
	queues, err := ParseAgentQueues(r.StringOr("AGENT_QUEUE_URLS", ""))
	if err != nil {
		r.Fail("AGENT_QUEUE_URLS: %v", err)
	}
	cfg.AgentQueues = queues
	names := maps.Clone(variables)
	maps.Copy(names, workflow.PolicyVariables)
	if err := cfg.check(&config.Rules{Names: names}, r.Err(), err != nil); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return c.check(&config.Rules{}, nil, false) }

// check applies the rules after the parse errors of LoadConfig, if any;
// badQueues says AGENT_QUEUE_URLS did not parse, which is reported already.
func (c Config) check(r *config.Rules, parsed error, badQueues bool) error {
	r.Add(parsed)
	r.Tables("OrdersTable", c.OrdersTable, "StateTable", c.StateTable)
	r.URL("SchedulerQueueURL", c.SchedulerQueueURL)
	r.URL("ResponseQueueURL", c.ResponseQueueURL)
	r.TopicARN("AlertTopicARN", c.AlertTopicARN)
	// The same bounds the stack's sas:maxReceiveCount has.
	r.Count("MaxReceiveCount", c.MaxReceiveCount, 1, 1000)
	if c.OperatorAPIURL != "" {
		r.URL("OperatorAPIURL", c.OperatorAPIURL)
	}
	r.Add(c.Workflow.Validate())
	c.Policy.Check(r)
	switch {
	case badQueues:
	case len(c.AgentQueues) == 0:
		r.Required("AgentQueues", "")
	default:
		for _, s := range c.Workflow.Steps {
			if c.AgentQueues[s.Name] == "" {
				r.Add(fmt.Errorf("%s: no agent queue for step %q", r.Name("AgentQueues"), s.Name))
			}
		}
		// A queue for a step outside the workflow is allowed (and unused),
		// but every queue must be a URL.
		for _, step := range slices.Sorted(maps.Keys(c.AgentQueues)) {
			r.URL(r.Name("AgentQueues")+"["+step+"]", c.AgentQueues[step])
		}
	}
	return r.Err("scheduler config")
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
