package supervisor

import (
	"testing"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/topology"
)

// The variables each of the Supervisor's configs reads are the ones
// shared/topology's descriptor lists for its actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "supervisor", variables, topology.Describe(topology.Supervisor).Env)
	configtest.ReadsExactly(t, "deadline", deadlineVariables, topology.Describe(topology.Deadline).Env)
}
