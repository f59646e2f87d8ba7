package timer

import "github.com/sasflow/sas/shared/config"

// Config is the timer's configuration. Validate holds every rule;
// LoadConfig reads it from the environment and applies the same rules.
type Config struct {
	// DeadlineQueueURL is the queue the Supervisor's fast path consumes.
	DeadlineQueueURL string
}

// LoadConfig reads DEADLINE_QUEUE_URL and reports every problem at once,
// named by its variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	names := map[string]string{"DeadlineQueueURL": "DEADLINE_QUEUE_URL"}
	return config.Load("timer config", getenv, names, func(r *config.Reader) Config {
		return Config{DeadlineQueueURL: r.String("DEADLINE_QUEUE_URL")}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("timer config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) { r.URL("DeadlineQueueURL", c.DeadlineQueueURL) }
