package codestep

import (
	"time"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config is a code step's configuration: the agent's without a remote
// (Code set), with the ledger and its retention.
type Config struct {
	agent.Config
	// LedgerTable is the idempotency ledger's table.
	LedgerTable string
	// Retention is how long a ledger entry is kept: the orders' retention
	// (RETENTION), so an entry outlives the order whose step it records.
	Retention time.Duration
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = func() map[string]string {
	names := agent.CodeVariables()
	names["LedgerTable"] = topology.EnvLedgerTable
	names["Retention"] = topology.EnvRetention
	return names
}()

// LoadConfig reads a code step's environment and reports every problem at
// once, named by its variable: the agent's variables but its remote's
// (REMOTE_TIMEOUT bounds one try of the code), and
//
//	LEDGER_TABLE   the idempotency ledger's table
//	RETENTION      how long a ledger entry is kept (default 2160h, the orders')
func LoadConfig(getenv func(string) string) (Config, error) { return loadConfig(getenv, catalog.Read) }

// loadConfig is LoadConfig with the workflow catalog from workflows.
func loadConfig(getenv func(string) string, workflows catalog.Source) (Config, error) {
	return config.Load("code step config", getenv, variables, func(r *config.Reader) Config {
		return Config{
			Config:      agent.ReadConfig(r, workflows, true),
			LedgerTable: r.String(topology.EnvLedgerTable),
			Retention:   r.Duration(topology.EnvRetention, workflow.DefaultRetention),
		}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. Main calls it through LoadConfig.
func (c Config) Validate() error { return config.Validate("code step config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	// Code unset asks for a remote, which Check then requires.
	c.Config.Check(r)
	r.Table("LedgerTable", c.LedgerTable)
	r.Within("Retention", c.Retention, workflow.MinRetention, workflow.MaxRetention)
}
