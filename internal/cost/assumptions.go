package cost

import (
	"fmt"
	"time"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/trace"
)

// DefaultMemoryMB is the memory of a function MemoryMB does not name:
// Lambda's own default, 128 MB
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
// The stack names every function's (topology.MemoryMB).
const DefaultMemoryMB = 128

// IndexWrites says how a transaction's index updates are billed.
type IndexWrites int

const (
	// IndexWritesOnce is AWS's documented rule: a transaction bills 2 WRU
	// per KB of each item it writes, and an index update is a write of the
	// index entry (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling,
	// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes).
	// AWS documents nothing about doubling index updates in a transaction.
	IndexWritesOnce IndexWrites = iota
	// IndexWritesTwice is what DynamoDB Local reports: twice the units of
	// the index entry, like the item's.
	IndexWritesTwice
)

// Assumptions are the model's parameters that no measurement and no price
// page gives. Every one is printed with the tables.
type Assumptions struct {
	// MemoryMB is each function's memory size, by Usage's function names;
	// a function it does not name has DefaultMemoryMB.
	MemoryMB map[string]int
	// Agents is how many Agent functions the records of "agent" spread
	// over (one per step of the deployed catalog): each has its own
	// queue, batches and execution environments.
	Agents int
	// TraceSampleRate is the share of orders the Submission records as
	// X-Ray traces (TRACE_SAMPLE_RATE); the run records every one and
	// measures its traces, segments and requests.
	TraceSampleRate float64
	// XRayRequestLatency is what one PutTraceSegments request adds to a
	// recorded invocation (ASSUMPTION: no AWS page gives it; the local
	// run's stand-in answers at once).
	XRayRequestLatency time.Duration
	// InitDuration is one cold start's init phase, billed for custom
	// runtimes such as provided.al2023
	// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html;
	// since 2025-08-01 for every runtime:
	// https://aws.amazon.com/blogs/compute/aws-lambda-standardizes-billing-for-init-phase/).
	// ASSUMPTION: a Go binary building its SDK clients; REPORT lines show
	// the deployed figure as initDurationMs.
	InitDuration time.Duration
	// IdleEnvironmentLife is how long Lambda keeps an idle execution
	// environment, and EnvironmentLife how long it keeps a busy one.
	// AWS documents neither figure: it keeps an idle one "for some time"
	// and replaces environments "every few hours"
	// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html).
	// ASSUMPTIONS; the report prints the upper bound too, every invocation
	// a cold start.
	IdleEnvironmentLife, EnvironmentLife time.Duration
	// ActiveTracing prices Lambda's own active tracing on every function
	// instead of the functions' per-order segments (a lever).
	ActiveTracing bool
	// EveryInvocationCold prices that upper bound instead.
	EveryInvocationCold bool
	// TransactionIndexWrites is how a transaction's index updates are
	// billed; the report prints the other reading too.
	TransactionIndexWrites IndexWrites
	// BatchingWindow is the SQS event source mappings'
	// MaximumBatchingWindowInSeconds: Lambda gathers records for up to
	// this long before it invokes
	// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html).
	// The stack sets none (0).
	BatchingWindow time.Duration
	// RemoteLatency is what one call to the remote service takes. The local
	// remote answers at once, so the measured handler time lacks it.
	RemoteLatency time.Duration
	// AgentConcurrency is how many records of a batch an Agent works at
	// once (AGENT_CONCURRENCY): a full batch of up to this many records
	// waits one remote latency, not one per record.
	AgentConcurrency int
	// AccessLogBytes is one API access log line (the stage's JSON format):
	// ASSUMPTION, the format's fields at typical lengths.
	AccessLogBytes int
	// PlatformLogBytes is what Lambda itself logs per invocation at the
	// stack's system log level, INFO, in JSON format: a platform.start
	// event (about 140 bytes: time, type, request ID, version) and a
	// platform.report event (about 240 bytes: time, type, request ID,
	// durationMs, billedDurationMs, memorySizeMB, maxMemoryUsedMB,
	// status), 380 bytes, rounded up to 400 for the cold starts' extra
	// initDurationMs and their once-per-environment platform.initStart
	// and platform.initReport. At INFO Lambda sends the start and report
	// events (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html);
	// the byte counts are ASSUMPTIONS from the events' fields. Lambda's
	// tracing is PassThrough, so no X-Ray fields are added to the report.
	PlatformLogBytes int
	// AdmissionQueues are the Agent queues the Submission's admission
	// check reads (one GetQueueAttributes each), at most once every
	// AdmissionRefresh in each Submission instance.
	AdmissionQueues  int
	AdmissionRefresh time.Duration

	// The alternatives (Compare).

	// Steps is the steps of the priced workflow, the current version of
	// the deployed catalog's default: the alternatives run as many tasks.
	Steps int
	// SFNStandardTransitions is the state transitions of one order on a
	// Standard state machine with a Task state per step. AWS counts a
	// transition "each time a step of your workflow is executed"
	// (https://aws.amazon.com/step-functions/pricing/): one a step. AWS
	// does not say whether entering the first state or ending the
	// execution counts too; the report prints that reading, one more,
	// beside it.
	SFNStandardTransitions int
	// StatusEvents is the client status events of one order (Accepted,
	// Processing, Processed, as the Notifier publishes them on the happy
	// path). On the alternatives the task code publishes them to SNS
	// inside the tasks or steps it already has, so they add no state
	// transitions and no durable operations.
	StatusEvents int
	// OrderRecordWRU is the order record the client routes read (GET an
	// order, list a caller's orders): one put of at most 1 KB, 1 WRU, and
	// its ByOwner index entry, 1 WRU. The first task writes it.
	OrderRecordWRU float64
	// ExpressMemoryMB is an Express execution's billed memory: 50 MB plus
	// the definition and the payload, which round up to one 64 MB chunk
	// (https://aws.amazon.com/step-functions/pricing/).
	ExpressMemoryMB int
	// DurableOperations is one order's durable operations (ASSUMPTION from
	// the operations the pricing names: steps, waits, callbacks): the
	// execution's start and two steps (each step calls the remote and waits for it
	// inside the step, so there is no wait or callback operation).
	DurableOperations int
	// DurableBytesPerOperation is the data one durable operation writes
	// (the order's input, then each step's result): small JSON, ~1 KiB.
	DurableBytesPerOperation int
	// DurableRetentionDays is how long a closed execution's history is
	// kept (the durable functions default is 14 days:
	// https://docs.aws.amazon.com/lambda/latest/dg/durable-functions.html).
	DurableRetentionDays int
}

// DefaultAssumptions are the parameters the printed report uses.
func DefaultAssumptions() Assumptions {
	c := catalog.MustDeployed()
	current, err := c.ForNew("")
	if err != nil {
		panic(fmt.Sprintf("cost: the deployed catalog has no current version: %v", err))
	}
	steps := len(current.Steps)
	return Assumptions{
		Steps:                    steps,
		MemoryMB:                 topology.MemoryMB(),
		Agents:                   len(c.AgentNames()),
		TraceSampleRate:          trace.DefaultSampleRate,
		XRayRequestLatency:       20 * time.Millisecond,
		InitDuration:             80 * time.Millisecond,
		IdleEnvironmentLife:      5 * time.Minute,
		EnvironmentLife:          3 * time.Hour,
		RemoteLatency:            100 * time.Millisecond,
		AgentConcurrency:         10,
		AccessLogBytes:           400,
		PlatformLogBytes:         400,
		AdmissionQueues:          len(c.AgentNames()),
		AdmissionRefresh:         250 * time.Millisecond,
		SFNStandardTransitions:   steps,
		StatusEvents:             3,
		OrderRecordWRU:           2,
		ExpressMemoryMB:          64,
		DurableOperations:        steps + 1,
		DurableBytesPerOperation: 1024,
		DurableRetentionDays:     14,
	}
}

// memoryGB is fn's memory in the GB Lambda bills GB-seconds in (1,024 MB).
func (a Assumptions) memoryGB(fn string) float64 {
	mb, ok := a.MemoryMB[fn]
	if !ok || mb <= 0 {
		mb = DefaultMemoryMB
	}
	return float64(mb) / 1024
}

// agents is Agents, at least 1.
func (a Assumptions) agents() float64 {
	if a.Agents < 1 {
		return 1
	}
	return float64(a.Agents)
}

// concurrency is AgentConcurrency, at least 1.
func (a Assumptions) concurrency() float64 {
	if a.AgentConcurrency < 1 {
		return 1
	}
	return float64(a.AgentConcurrency)
}
