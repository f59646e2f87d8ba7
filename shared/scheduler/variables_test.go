package scheduler

import (
	"maps"
	"slices"
	"testing"

	"github.com/sasflow/sas/shared/topology"
)

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor, so the stack, the docs and the code cannot drift.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	got := slices.Compact(slices.Sorted(maps.Values(variables)))
	want := slices.Sorted(slices.Values(topology.Describe(topology.Scheduler).Env))
	if !slices.Equal(got, want) {
		t.Errorf("scheduler reads %v, the descriptor of %s lists %v", got, topology.Scheduler, want)
	}
}
