package supervisor

import (
	"maps"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/topology"
)

// Config is the Supervisor's configuration. The settings it shares with the
// Scheduler are followup.Config's.
type Config struct {
	followup.Config
	// BatchLimit caps the records read per GSI shard in one run.
	BatchLimit int
}

// DefaultBatchLimit is BATCH_LIMIT when it is unset: a run recovers at most
// this many expired records per GSI shard, and the next run the rest. With
// statestore.Shards (64) that is 1,600 records a run, each a conditional
// write and a send, well inside the function's timeout.
const DefaultBatchLimit = 25

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = func() map[string]string {
	names := followup.Variables()
	names["BatchLimit"] = topology.EnvBatchLimit
	return names
}()

// LoadConfig reads the variables of followup.Load (tables, scheduler queue,
// alert topic, operator API, policy), shared with the Scheduler, and the
// optional BATCH_LIMIT, and reports every problem at once, named by its
// variable.
func LoadConfig(getenv func(string) string) (Config, error) { return loadConfig(getenv, catalog.Read) }

// loadConfig is LoadConfig with the workflow catalog from workflows.
func loadConfig(getenv func(string) string, workflows catalog.Source) (Config, error) {
	return config.Load("supervisor config", getenv, variables, func(r *config.Reader) Config { return load(r, workflows) })
}

// load reads the Supervisor's settings; LoadDeadlineConfig reads them too.
func load(r *config.Reader, workflows catalog.Source) Config {
	return Config{Config: followup.Load(r, workflows), BatchLimit: r.Int(topology.EnvBatchLimit, DefaultBatchLimit)}
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("supervisor config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	c.Config.Check(r)
	r.Count("BatchLimit", c.BatchLimit, 1, 10000)
}

// DeadlineConfig is the fast path's configuration (cmd deadline,
// HandleDeadlines): the Supervisor's, and the deadline queue it consumes,
// to bring a Deadline back before the queue's visibility timeout.
type DeadlineConfig struct {
	Config
	DeadlineQueueURL string
}

// deadlineVariables are variables and DEADLINE_QUEUE_URL.
var deadlineVariables = func() map[string]string {
	names := maps.Clone(variables)
	names["DeadlineQueueURL"] = topology.EnvDeadlineQueueURL
	return names
}()

// LoadDeadlineConfig reads what LoadConfig reads and DEADLINE_QUEUE_URL,
// and reports every problem at once, named by its variable.
func LoadDeadlineConfig(getenv func(string) string) (DeadlineConfig, error) {
	return loadDeadlineConfig(getenv, catalog.Read)
}

// loadDeadlineConfig is LoadDeadlineConfig with the workflow catalog from
// workflows.
func loadDeadlineConfig(getenv func(string) string, workflows catalog.Source) (DeadlineConfig, error) {
	return config.Load("deadline config", getenv, deadlineVariables, func(r *config.Reader) DeadlineConfig {
		return DeadlineConfig{
			Config:           load(r, workflows),
			DeadlineQueueURL: r.String(topology.EnvDeadlineQueueURL),
		}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once.
func (c DeadlineConfig) Validate() error { return config.Validate("deadline config", c) }

// Check records what breaks the rules in r.
func (c DeadlineConfig) Check(r *config.Rules) {
	c.Config.Check(r)
	r.URL("DeadlineQueueURL", c.DeadlineQueueURL)
}
