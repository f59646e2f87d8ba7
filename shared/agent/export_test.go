package agent

import (
	"time"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/workflow"
)

// LoadReferenceConfig is LoadConfig over the reference workflow, whatever
// the deployed catalog holds, so the tests do not change with it.
func LoadReferenceConfig(getenv func(string) string) (Config, error) {
	return loadConfig(getenv, catalog.Fixed(workflow.Single(workflow.Reference())))
}

// Variables is the config's field-to-variable map, for the descriptor test.
var Variables = variables

// Pick is the router's choice of one try's endpoint, for the router's
// tests: the index, and what reports the try's end.
func (r *Router) Pick(endpoints []string, failed []bool) (int, func(Result), error) {
	rt, err := r.pick(endpoints, failed)
	return rt.index, rt.report, err
}

// Record runs one try on ep that takes took on clk and ends with res, as
// if the router had picked it.
func (r *Router) Record(clk interface{ Advance(time.Duration) }, ep string, took time.Duration, res Result) error {
	done, err := r.breakers.For(ep).Allow()
	if err != nil {
		return err
	}
	report := r.begin(ep, done)
	clk.Advance(took)
	report(res)
	return nil
}
