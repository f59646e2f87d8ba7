package followup

import (
	"maps"
	"slices"
	"testing"

	"github.com/sasflow/sas/shared/topology"
)

// What Load reads is the descriptor's FollowupEnv, which the Scheduler's and
// the Supervisor's descriptors include.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	got := slices.Compact(slices.Sorted(maps.Values(Variables())))
	want := slices.Sorted(slices.Values(topology.FollowupEnv))
	if !slices.Equal(got, want) {
		t.Errorf("followup reads %v, topology.FollowupEnv lists %v", got, want)
	}
}
