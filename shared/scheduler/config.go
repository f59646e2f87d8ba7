package scheduler

import (
	"maps"
	"slices"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/topology"
)

// Config is the Scheduler's configuration, read once at cold start. The
// settings it shares with the Supervisor are followup.Config's.
type Config struct {
	followup.Config
	// ResponseQueueURL is the agents' response queue. The Scheduler consumes
	// it and the scheduler queue: it hands a step whose dispatch failed back
	// to the latter, after a backoff, and brings a message that failed back
	// sooner on either.
	ResponseQueueURL string
	// AgentQueues maps each step of every live workflow version to its
	// Agent's request queue URL.
	AgentQueues map[string]string
	// MaxReceiveCount is the queues' redrive setting: a poison message's
	// last receive raises an alert before it moves to the DLQ.
	MaxReceiveCount int
	// ReplySenders maps each step of every live workflow version to the
	// unique ID of its Agent's IAM role (AROA…), the one principal whose
	// replies about that step the Scheduler commits: SQS stamps every
	// message with its sender's ID (SenderId), which no sender chooses.
	ReplySenders map[string]string
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = func() map[string]string {
	names := followup.Variables()
	names["ResponseQueueURL"] = topology.EnvResponseQueueURL
	names["AgentQueues"] = topology.EnvAgentQueueURLs
	names["MaxReceiveCount"] = topology.EnvMaxReceiveCount
	names["ReplySenders"] = topology.EnvReplySenders
	return names
}()

// LoadConfig reads the Scheduler's environment and reports every problem at
// once, named by its variable:
//
//	the variables of followup.Load (tables, scheduler queue, alert topic,
//	operator API, policy), shared with the Supervisor
//	RESPONSE_QUEUE_URL   the agents' response queue (it consumes it)
//	AGENT_QUEUE_URLS     step=url pairs separated by commas, one per step of every live workflow version
//	MAX_RECEIVE_COUNT    the queues' redrive maxReceiveCount (default 5)
//	REPLY_SENDERS        step=id pairs separated by commas: the unique ID of each step's Agent's role
func LoadConfig(getenv func(string) string) (Config, error) { return loadConfig(getenv, catalog.Read) }

// loadConfig is LoadConfig with the workflow catalog from workflows.
func loadConfig(getenv func(string) string, workflows catalog.Source) (Config, error) {
	return config.Load("scheduler config", getenv, variables, func(r *config.Reader) Config {
		queues, err := topology.ParseAgentQueues(r.String(topology.EnvAgentQueueURLs))
		if err != nil {
			r.Fail(topology.EnvAgentQueueURLs, "AGENT_QUEUE_URLS: %v", err)
		}
		senders, err := topology.ParseSenders(r.String(topology.EnvReplySenders))
		if err != nil {
			r.Fail(topology.EnvReplySenders, "REPLY_SENDERS: %v", err)
		}
		return Config{
			Config:           followup.Load(r, workflows),
			ResponseQueueURL: r.String(topology.EnvResponseQueueURL),
			AgentQueues:      queues,
			MaxReceiveCount:  r.Int(topology.EnvMaxReceiveCount, topology.MaxReceiveCount),
			ReplySenders:     senders,
		}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("scheduler config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	c.Config.Check(r)
	r.URL("ResponseQueueURL", c.ResponseQueueURL)
	// The same bounds the stack's sas:maxReceiveCount has.
	r.Count("MaxReceiveCount", c.MaxReceiveCount, 1, 1000)
	if len(c.AgentQueues) == 0 {
		r.Required("AgentQueues", "")
		return
	}
	// Every live version's every step has an Agent to dispatch to, whose
	// replies alone are committed.
	for _, d := range c.Workflows.Definitions {
		for _, s := range d.Steps {
			if c.AgentQueues[s.Name] == "" {
				r.Problem("AgentQueues", "no agent queue for step %q of workflow %s", s.Name, d.ID())
			}
			if c.ReplySenders[s.Name] == "" {
				r.Problem("ReplySenders", "no reply sender for step %q of workflow %s", s.Name, d.ID())
			}
		}
	}
	// A queue for a step outside the workflow is allowed (and unused), but
	// every queue must be a URL.
	for _, step := range slices.Sorted(maps.Keys(c.AgentQueues)) {
		r.URL(r.Name("AgentQueues")+"["+step+"]", c.AgentQueues[step])
	}
}
