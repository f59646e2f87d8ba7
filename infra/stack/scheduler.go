package stack

import (
	"fmt"
	"strings"

	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// schedulerQueues declares the Scheduler's two queues: Schedule messages
// (new steps, retries, hand-backs), and the Agents' replies. Each is
// visible six times the Scheduler's timeout.
func (b *builder) schedulerQueues() (schedule, responses *workQueue) {
	return b.workQueue("SchedulerQueue", topology.SchedulerTimeout), b.workQueue("ResponseQueue", topology.SchedulerTimeout)
}

// scheduler deploys the Scheduler with its grants (topology's descriptor:
// it claims, commits and fails state records with conditional UpdateItem,
// reads a record before it commits a permanent failure, keeps an alerted
// order's orders item for good in the same transaction, dispatches to the
// Agents and alerts on permanent faults), its two queues' event sources
// and its alarms. It consumes the scheduler and response queues, so it
// can bring a failed message back sooner (the event source mapping's grant
// already has sqs:ChangeMessageVisibility), and hands a failed dispatch
// back to the first.
func (b *builder) scheduler(sh *sharedResources) *fn {
	f := b.actorFunction(Scheduler, sh, fnSpec{
		description: "Claims steps, dispatches them to their Agents and commits the replies, from the scheduler and response queues",
		trigger:     byQueue,
		timeout:     topology.SchedulerTimeout, memory: topology.SchedulerMemoryMB,
	}, map[string]*string{
		// Every Agent: an order's next step is any step of its pinned
		// version.
		topology.EnvAgentQueueURLs: queueURLs(sh.queues, b.cfg.Workflows.AgentNames()),
	}, topology.EnvReplySenders)
	b.consume(f, sh.queues.scheduler, topology.SchedulerBatchSize, 0)
	b.consume(f, sh.queues.responses, topology.SchedulerBatchSize, 0)

	// The schedule queue holds retries delayed by their backoff, so it
	// alarms at sas:queueAgeAlarm (which must exceed the longest backoff).
	sched := sh.queues.scheduler
	b.queueAlarms(sh.alerts, sched, b.cfg.QueueAgeAlarm, fmt.Sprintf(
		"The oldest message on %s is older than %v (retries wait there up to %v by design): the Scheduler is failing, throttled or disabled, so new steps and retries are not dispatched. "+
			"Check the Scheduler's errors, throttles and event source mapping and fix the cause; the queue then drains by itself.",
		sched.id, b.cfg.QueueAgeAlarm, workflow.DefaultPolicy().BackoffMax))
	// The response queue follows the capacity model: a reply is meant to
	// wait at most the shortest lease.
	resp, respAge := sh.queues.responses, topology.ResponseQueueAgeAlarm(b.cfg.Workflows)
	b.queueAlarms(sh.alerts, resp, respAge, fmt.Sprintf(
		"The oldest reply on %s is older than %v, the shortest lease of any live version's step: replies this late reach the Scheduler after their step's CompleteBy, are refused as stale, and the Supervisor retries the step. "+
			"The Scheduler is failing or throttled: check its errors, throttles and duration and fix the cause.",
		resp.id, respAge))
	b.functionErrors(sh.alerts, f)
	return f
}

// replySenders tells the Scheduler whose replies to commit: each step's
// Agent's role, by its unique ID (Fn::GetAtt RoleId, "the stable and
// unique string identifying the role", AWS::IAM::Role return values,
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-iam-role.html#aws-resource-iam-role-return-values),
// which SQS stamps on each message the role sends (SenderId,
// "AROA…:<session>"). A reply from any other principal allowed to send to
// the response queue is refused. Set once the Agents exist: the Scheduler
// is declared first.
func (b *builder) replySenders(scheduler *fn, agents []*fn) {
	pairs := make([]string, len(agents))
	for i, a := range agents {
		pairs[i] = a.step + "=" + *a.role.RoleId()
	}
	scheduler.fn.AddEnvironment(jsii.String(topology.EnvReplySenders), jsii.String(strings.Join(pairs, ",")), nil)
}
