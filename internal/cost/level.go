package cost

import (
	"fmt"
	"math"

	"github.com/sasflow/sas/shared/topology"
)

// The functions, as Usage keys them.
const (
	Submission = "submission"
	Scheduler  = "scheduler"
	Agent      = "agent"
	Supervisor = "supervisor"
	Notifier   = "notifier"
	// Timer and Deadline are the Supervisor's fast path: the Timer reads
	// the state table's stream like the Notifier, the Deadline function
	// consumes the deadline queue.
	Timer    = "timer"
	Deadline = "deadline"
)

// sqsDriven are the functions Lambda's SQS pollers invoke: each batch they
// deliver costs one ReceiveMessage and one DeleteMessageBatch.
var sqsDriven = []string{Scheduler, Agent, Deadline}

const (
	// SecondsPerMonth is a 30-day month: the month every "per month" here
	// means (43,200 minutes, so 43,200 runs of a rate(1 minute) schedule).
	SecondsPerMonth = 30 * 24 * 3600
	// StreamBatchSize is the Notifier's DynamoDB stream batch size, as the
	// stack configures it.
	StreamBatchSize = topology.StreamBatchSize
	// StreamPollsPerSecond is how often Lambda polls each shard of a
	// DynamoDB stream: "at a base rate of 4 times per second"
	// (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html).
	StreamPollsPerSecond = 4
	// StreamWritesPerShard is the write rate one stream shard takes: the
	// model opens one shard per 1,000 writes a second, at least one
	// (ASSUMPTION: DynamoDB manages a stream's shards and documents no
	// rate per shard; a table partition takes 1,000 WRU a second).
	StreamWritesPerShard = 1000
)

// Level is a traffic level, and with it how full the batches are that
// Lambda hands the event-source-driven functions.
//
// The model:
//   - SQS (the Scheduler's and the Agents' queues): with FullBatches every
//     batch is full, so records per invocation = the batch size
//     (topology.SchedulerBatchSize, topology.AgentBatchSize); without it
//     every record is its own invocation. Either way each batch costs one
//     ReceiveMessage and one DeleteMessageBatch.
//   - DynamoDB stream (the Notifier), at every level:
//     shards = max(1, ceil(stream records per second / 1,000))
//     records per invocation = min(100, max(1, stream records per second
//     / (4 polls per second × shards)))
//     where stream records per second = orders per second × the stream
//     records (state table writes) per order. Lambda's reads of the stream
//     are free.
//   - Idle long polls of the SQS event source mappings are a fixed monthly
//     cost (see Fixed), not a cost per order.
type Level struct {
	Name            string
	OrdersPerSecond float64
	FullBatches     bool
}

var (
	// Reference is 100 orders a second, at which the SQS pollers fill
	// their batches.
	Reference = Level{Name: "100 orders/s", OrdersPerSecond: 100, FullBatches: true}
	// MillionAMonth is 1 million orders a month (about 0.39 a second), at
	// which nothing batches: every record is its own invocation, receive
	// and delete.
	MillionAMonth = Level{Name: "1M orders/month", OrdersPerSecond: 1e6 / SecondsPerMonth}
)

// Levels are the levels every scenario is priced at.
func Levels() []Level { return []Level{Reference, MillionAMonth} }

// RecordsPerInvocation is how many records one invocation of fn carries at
// l, given the stream records per order (for the Notifier). Functions that
// no event source batches get 1.
func (l Level) RecordsPerInvocation(fn string, streamRecordsPerOrder float64) float64 {
	switch fn {
	case Scheduler:
		return l.sqsFill(topology.SchedulerBatchSize)
	case Agent:
		return l.sqsFill(topology.AgentBatchSize)
	case Deadline:
		return l.sqsFill(topology.DeadlineBatchSize)
	case Notifier, Timer:
		return l.streamFill(streamRecordsPerOrder)
	}
	return 1
}

func (l Level) sqsFill(batchSize int) float64 {
	if l.FullBatches {
		return float64(batchSize)
	}
	return 1
}

// streamFill is the Notifier's records per invocation (see Level).
func (l Level) streamFill(recordsPerOrder float64) float64 {
	perSecond := l.OrdersPerSecond * recordsPerOrder
	shards := StreamShards(perSecond)
	perPoll := perSecond / (StreamPollsPerSecond * shards)
	return math.Min(StreamBatchSize, math.Max(1, perPoll))
}

// StreamShards is the model's shard count for a stream taking
// writesPerSecond.
func StreamShards(writesPerSecond float64) float64 {
	return math.Max(1, math.Ceil(writesPerSecond/StreamWritesPerShard))
}

// describe says what batches at l, for the table headers.
func (l Level) describe(u Usage) string {
	return fmt.Sprintf("%s: %g scheduler and %g agent records per SQS batch, %.1f stream records per Notifier invocation",
		l.Name, l.RecordsPerInvocation(Scheduler, 0), l.RecordsPerInvocation(Agent, 0),
		l.RecordsPerInvocation(Notifier, u.StreamRecordsPerOrder()))
}
