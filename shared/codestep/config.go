package codestep

import (
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
)

// Config is a code step's configuration: the agent's without a remote
// (Code set), with the ledger. How long a ledger entry is kept is not the
// step's to say: an entry has no TTL until its order ends for good, when
// the Timer gives it the order's own (see timer.Config.CodeSteps).
type Config struct {
	agent.Config
	// LedgerTable is the idempotency ledger's table.
	LedgerTable string
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = func() map[string]string {
	names := agent.CodeVariables()
	names["LedgerTable"] = topology.EnvLedgerTable
	return names
}()

// LoadConfig reads a code step's environment and reports every problem at
// once, named by its variable: the agent's variables but its remote's
// (REMOTE_TIMEOUT bounds one try of the code), and
//
//	LEDGER_TABLE   the idempotency ledger's table
func LoadConfig(getenv func(string) string) (Config, error) { return loadConfig(getenv, catalog.Read) }

// loadConfig is LoadConfig with the workflow catalog from workflows.
func loadConfig(getenv func(string) string, workflows catalog.Source) (Config, error) {
	return config.Load("code step config", getenv, variables, func(r *config.Reader) Config {
		return Config{
			Config:      agent.ReadConfig(r, workflows, true),
			LedgerTable: r.String(topology.EnvLedgerTable),
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
}
