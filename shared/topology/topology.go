// Package topology holds the deployment's shape that the CDK stack and the
// local stack share: function timeouts, event source batch sizes, and the
// queue settings derived from them. The stack (infra/) imports it, and so do
// the local runs, so the two cannot size things differently.
package topology

import (
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

// Function timeouts, sized for each job.
const (
	// The API waits for at most one transaction and one SendMessage.
	SubmissionTimeout = 10 * time.Second
	// A batch of up to SchedulerBatchSize records, each a conditional write
	// and one SendMessage (or an SNS publish).
	SchedulerTimeout = 30 * time.Second
	// One run recovers up to the Supervisor's BATCH_LIMIT records.
	SupervisorTimeout = 60 * time.Second
	// The fast path reads and may recover each record of a batch of
	// Deadlines; the Timer sends a stream batch's Deadlines.
	DeadlineTimeout = 30 * time.Second
	TimerTimeout    = 30 * time.Second
	// AgentMargin is added to a step's lease: an Agent gives up at
	// CompleteBy, at most the lease (wait plus budget) after the claim, and
	// the margin covers its reply and a slow cold start.
	AgentMargin = 15 * time.Second
)

// The Supervisor's schedule as the stack deploys it (an EventBridge
// expression), and the interval it means, for the local stack's deployed
// timing.
const (
	SupervisorSchedule = "rate(1 minute)"
	SupervisorEvery    = time.Minute
)

// Event source mappings.
const (
	SchedulerBatchSize = 10
	// The Agent works the records of a batch concurrently (AGENT_CONCURRENCY
	// defaults to 10), so a full batch takes one step budget.
	AgentBatchSize = 10
	// DeadlineBatchSize Deadlines at most per fast-path invocation; the
	// batching window is zero, so a Deadline is handled as soon as it is
	// visible.
	DeadlineBatchSize = 10
)

// Queues.
const (
	// VisibilityFactor: AWS's advice for an SQS event source is a visibility
	// timeout of six times the function timeout, so retries of a throttled
	// batch do not redeliver messages still being worked on.
	VisibilityFactor = 6
	// MaxReceiveCount is how often a message is received before it moves to
	// its dead-letter queue.
	MaxReceiveCount = 5
	// DLQRetention is the longest SQS allows, so an operator has two weeks
	// to inspect and redrive a poison message.
	DLQRetention = 14 * 24 * time.Hour
	// QueueRetention of the work queues.
	QueueRetention = 4 * 24 * time.Hour
)

// AgentTimeout is the function timeout of the Agent for step s.
func AgentTimeout(s workflow.Step) time.Duration { return s.Lease() + AgentMargin }

// Visibility is the visibility timeout of a queue whose consumer has the
// given function timeout.
func Visibility(consumerTimeout time.Duration) time.Duration {
	return VisibilityFactor * consumerTimeout
}

// Memory sizes of the functions in MB, as the stack deploys them: each
// function is mostly waiting on DynamoDB, SQS or the remote service, and Go
// handlers use a few tens of MB, so the smallest size serves them; the
// Supervisor reads every in-flight record once a sweep and gets more.
const (
	SubmissionMemoryMB = 128
	SchedulerMemoryMB  = 128
	AgentMemoryMB      = 128
	SupervisorMemoryMB = 256
	NotifierMemoryMB   = 128
	TimerMemoryMB      = 128
	DeadlineMemoryMB   = 128
)

// StreamBatchSize is the most stream records one Notifier invocation gets.
const StreamBatchSize = 100

// MemoryMB names each function's memory size, by the function names the
// cost model uses.
func MemoryMB() map[string]int {
	return map[string]int{
		"submission": SubmissionMemoryMB, "scheduler": SchedulerMemoryMB, "agent": AgentMemoryMB,
		"supervisor": SupervisorMemoryMB, "notifier": NotifierMemoryMB,
		"timer": TimerMemoryMB, "deadline": DeadlineMemoryMB,
	}
}
