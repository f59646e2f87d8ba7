package timer

import (
	"slices"
	"strings"

	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config is the timer's configuration. Validate holds every rule;
// LoadConfig reads it from the environment and applies the same rules.
type Config struct {
	// DeadlineQueueURL is the queue the Supervisor's fast path consumes.
	DeadlineQueueURL string
	// CodeSteps are the steps written in Go, whose idempotency keys the
	// ledger keeps (shared/codestep), and LedgerTable that ledger: when
	// an order ends for good, its entries get the TTL of its record, so
	// an entry outlives every try of its key and no longer than its order.
	// No code step, no ledger.
	CodeSteps   []string
	LedgerTable string
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = map[string]string{
	"DeadlineQueueURL": topology.EnvDeadlineQueueURL,
	"CodeSteps":        topology.EnvCodeSteps,
	"LedgerTable":      topology.EnvLedgerTable,
}

// LoadConfig reads the Timer's environment and reports every problem at
// once, named by its variable:
//
//	DEADLINE_QUEUE_URL   the Supervisor's fast path's queue
//	CODE_STEPS           the code steps' names, comma-separated (empty: none)
//	LEDGER_TABLE         their idempotency ledger (required with a code step)
func LoadConfig(getenv func(string) string) (Config, error) {
	return config.Load("timer config", getenv, variables, func(r *config.Reader) Config {
		var steps []string
		for s := range strings.SplitSeq(r.String(topology.EnvCodeSteps), ",") {
			if s = strings.TrimSpace(s); s != "" {
				steps = append(steps, s)
			}
		}
		return Config{DeadlineQueueURL: r.String(topology.EnvDeadlineQueueURL), CodeSteps: steps,
			LedgerTable: r.String(topology.EnvLedgerTable)}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("timer config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	r.URL("DeadlineQueueURL", c.DeadlineQueueURL)
	if len(c.CodeSteps) == 0 {
		return
	}
	r.Table("LedgerTable", c.LedgerTable)
	for i, s := range c.CodeSteps {
		if !workflow.IsStepName(s) {
			r.Problem("CodeSteps", "%q is not a step name", s)
		}
		if slices.Contains(c.CodeSteps[:i], s) {
			r.Problem("CodeSteps", "%q is named twice", s)
		}
	}
}
