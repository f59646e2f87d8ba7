package supervisor

import (
	"github.com/sasflow/sas/shared/catalog"
	"testing"

	"github.com/sasflow/sas/internal/testkit/actortest"
	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	sampleSchedulerQueue = actortest.SampleSchedulerQueue
	sampleTopicARN       = actortest.SampleTopicARN
)

// deployed is the environment the Supervisor Lambda is deployed with: the
// settings it shares with the Scheduler (tested in shared/followup) alone.
var deployed = actortest.DeployedEnv()

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	shared := followup.Config{
		OrdersTable: "sas-orders", StateTable: "sas-state", SchedulerQueueURL: sampleSchedulerQueue,
		AlertTopicARN: sampleTopicARN, Workflows: workflow.Single(workflow.Reference()), Policy: workflow.DefaultPolicy(),
	}
	withPolicy := shared
	withPolicy.Policy.MaxFailures = 5
	configtest.Loads(t, loadReference, deployed, []configtest.Loaded[Config]{
		{Name: "defaults", Want: Config{Config: shared, BatchLimit: DefaultBatchLimit}},
		{Name: "lowest BATCH_LIMIT", Set: []string{"BATCH_LIMIT", "1"}, Want: Config{Config: shared, BatchLimit: 1}},
		{Name: "highest BATCH_LIMIT", Set: []string{"BATCH_LIMIT", "10000"}, Want: Config{Config: shared, BatchLimit: 10000}},
		{Name: "the shared settings", Set: []string{"MAX_FAILURES", "5"}, Want: Config{Config: withPolicy, BatchLimit: DefaultBatchLimit}},
	})
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	configtest.Refuses(t, loadReference, deployed, []configtest.Refused{
		{Name: "BATCH_LIMIT zero", Set: []string{"BATCH_LIMIT", "0"}, Want: []string{"BATCH_LIMIT=0 must be within 1..10000"}},
		{Name: "BATCH_LIMIT too high", Set: []string{"BATCH_LIMIT", "10001"}, Want: []string{"BATCH_LIMIT=10001 must be within 1..10000"}},
		{Name: "BATCH_LIMIT not a number", Set: []string{"BATCH_LIMIT", "1e3"}, Want: []string{`BATCH_LIMIT="1e3" is not an integer`}},
		{
			Name: "with the shared settings' problems, at once",
			Set:  []string{"STATE_TABLE", "", "MAX_FAILURES", "0", "BATCH_LIMIT", "0"},
			Want: []string{"supervisor config: STATE_TABLE is required", "MAX_FAILURES=0", "BATCH_LIMIT=0"},
		},
	})
}

func TestLoadDeadlineConfig(t *testing.T) {
	t.Parallel()
	shared := followup.Config{
		OrdersTable: "sas-orders", StateTable: "sas-state", SchedulerQueueURL: sampleSchedulerQueue,
		AlertTopicARN: sampleTopicARN, Workflows: workflow.Single(workflow.Reference()), Policy: workflow.DefaultPolicy(),
	}
	const queueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-deadlines"
	env := actortest.DeployedEnv("DEADLINE_QUEUE_URL", queueURL)
	configtest.Loads(t, loadReferenceDeadline, env, []configtest.Loaded[DeadlineConfig]{
		{Name: "defaults", Want: DeadlineConfig{Config: Config{Config: shared, BatchLimit: DefaultBatchLimit}, DeadlineQueueURL: queueURL}},
	})
	configtest.Refuses(t, loadReferenceDeadline, env, []configtest.Refused{
		{Name: "no queue", Set: []string{"DEADLINE_QUEUE_URL", ""}, Want: []string{"deadline config: DEADLINE_QUEUE_URL is required"}},
	})
}

// loadReference is LoadConfig over the reference workflow, whatever the
// deployed catalog holds, so these tables do not change with it.
func loadReference(getenv func(string) string) (Config, error) {
	return loadConfig(getenv, catalog.Fixed(workflow.Single(workflow.Reference())))
}

func loadReferenceDeadline(getenv func(string) string) (DeadlineConfig, error) {
	return loadDeadlineConfig(getenv, catalog.Fixed(workflow.Single(workflow.Reference())))
}

// The variables each of the Supervisor's configs reads are the ones
// shared/topology's descriptor lists for its actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "supervisor", variables, topology.Describe(topology.Supervisor).Env)
	configtest.ReadsExactly(t, "deadline", deadlineVariables, topology.Describe(topology.Deadline).Env)
}
