package timer_test

import (
	"testing"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/timer"
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
