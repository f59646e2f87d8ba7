package notifier

import "github.com/sasflow/sas/shared/config"

// Config is the event publisher's configuration.
type Config struct {
	// OrderEventsTopicARN is the SNS topic clients subscribe their queues to.
	OrderEventsTopicARN string
}

// LoadConfig reads ORDER_EVENTS_TOPIC_ARN.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	cfg := Config{OrderEventsTopicARN: r.String("ORDER_EVENTS_TOPIC_ARN")}
	return cfg, r.Err()
}
