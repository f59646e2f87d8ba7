package submission

import (
	"testing"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/topology"
)

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "submission", variables, topology.Describe(topology.Submission).Env)
}
