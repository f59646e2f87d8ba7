package timer

import (
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
)

// Config is the timer's configuration. Validate holds every rule;
// LoadConfig reads it from the environment and applies the same rules.
type Config struct {
	// DeadlineQueueURL is the queue the Supervisor's fast path consumes.
	DeadlineQueueURL string
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = map[string]string{"DeadlineQueueURL": topology.EnvDeadlineQueueURL}

// LoadConfig reads DEADLINE_QUEUE_URL and reports every problem at once,
// named by its variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	return config.Load("timer config", getenv, variables, func(r *config.Reader) Config {
		return Config{DeadlineQueueURL: r.String(topology.EnvDeadlineQueueURL)}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("timer config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) { r.URL("DeadlineQueueURL", c.DeadlineQueueURL) }
