package notifier

import "github.com/sasflow/sas/shared/config"

// Config is the event publisher's configuration. Validate holds every rule;
// LoadConfig reads it from the environment and applies the same rules.
type Config struct {
	// OrderEventsTopicARN is the SNS topic clients subscribe their queues to.
	OrderEventsTopicARN string
}

// LoadConfig reads ORDER_EVENTS_TOPIC_ARN and reports every problem at
// once, named by its variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	c := Config{OrderEventsTopicARN: r.StringOr("ORDER_EVENTS_TOPIC_ARN", "")}
	if err := c.check(&config.Rules{Names: map[string]string{"OrderEventsTopicARN": "ORDER_EVENTS_TOPIC_ARN"}}, r.Err()); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return c.check(&config.Rules{}, nil) }

// check applies the rules after the parse errors of LoadConfig, if any.
func (c Config) check(r *config.Rules, parsed error) error {
	r.Add(parsed)
	r.TopicARN("OrderEventsTopicARN", c.OrderEventsTopicARN)
	return r.Err("notifier config")
}
