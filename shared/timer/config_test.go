package timer_test

import (
	"testing"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/topology"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DEADLINE_QUEUE_URL": queueURL}
	configtest.Loads(t, timer.LoadConfig, env, []configtest.Loaded[timer.Config]{
		{Name: "deployed", Want: timer.Config{DeadlineQueueURL: queueURL}},
	})
	configtest.Refuses(t, timer.LoadConfig, env, []configtest.Refused{
		{Name: "missing", Set: []string{"DEADLINE_QUEUE_URL", ""}, Want: []string{"timer config: DEADLINE_QUEUE_URL is required"}},
		{Name: "not a URL", Set: []string{"DEADLINE_QUEUE_URL", "sas-deadlines"}, Want: []string{"DEADLINE_QUEUE_URL"}},
	})
}

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "timer", timer.Variables, topology.Describe(topology.Timer).Env)
}
