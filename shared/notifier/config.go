package notifier

import (
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
)

// Config is the event publisher's configuration. Validate holds every rule;
// LoadConfig reads it from the environment and applies the same rules.
type Config struct {
	// OrderEventsTopicARN is the SNS topic clients subscribe their queues to.
	OrderEventsTopicARN string
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = map[string]string{"OrderEventsTopicARN": topology.EnvOrderEventsTopicARN}

// LoadConfig reads ORDER_EVENTS_TOPIC_ARN and reports every problem at
// once, named by its variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	return config.Load("notifier config", getenv, variables, func(r *config.Reader) Config {
		return Config{OrderEventsTopicARN: r.String(topology.EnvOrderEventsTopicARN)}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("notifier config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) { r.TopicARN("OrderEventsTopicARN", c.OrderEventsTopicARN) }
