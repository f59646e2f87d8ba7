package topology_test

import (
	"testing"

	"github.com/sasflow/sas/shared/topology"
)

func TestQueueID(t *testing.T) {
	t.Parallel()
	dev := topology.StackName("dev")
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{topology.QueueName(dev, "SchedulerQueue"), "SchedulerQueue", true},
		{topology.QueueName(dev, "ReserveInventoryQueue"), "ReserveInventoryQueue", true},
		// Another stage whose name starts with "dev".
		{topology.QueueName(topology.StackName("dev-2"), "SchedulerQueue"), "", false},
		// A dead-letter queue: CloudFormation names it stack-LogicalId-random.
		{dev + "-SchedulerQueueDLQ1A2B3C4D-Xy12Ab34Cd56", "", false},
		{dev + "-", "", false},
		{"SchedulerAgentSupervisor-prod-SchedulerQueue", "", false},
	} {
		if id, ok := topology.QueueID(dev, tc.name); id != tc.id || ok != tc.ok {
			t.Errorf("QueueID(%q, %q) = %q, %v; want %q, %v", dev, tc.name, id, ok, tc.id, tc.ok)
		}
	}
	if got := topology.StackName(topology.DefaultStage); got != "SchedulerAgentSupervisor-dev" {
		t.Errorf("StackName(DefaultStage) = %q", got)
	}
}
