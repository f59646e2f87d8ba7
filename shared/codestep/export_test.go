package codestep

import (
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
