package cost

import "time"

// DefaultMemoryMB is the memory of a function MemoryMB does not name: what
// the stack gives every function today.
const DefaultMemoryMB = 256

// Assumptions are the model's parameters that no measurement and no price
// page gives. Every one is printed with the tables.
type Assumptions struct {
	// MemoryMB is each function's memory size, by Usage's function names;
	// a function it does not name has DefaultMemoryMB.
	MemoryMB map[string]int
	// RemoteLatency is what one call to the remote service takes. The local
	// remote answers at once, so the measured handler time lacks it.
	RemoteLatency time.Duration
	// AgentConcurrency is how many records of a batch an Agent works at
	// once (AGENT_CONCURRENCY): a full batch of up to this many records
	// waits one remote latency, not one per record.
	AgentConcurrency int
	// AccessLogBytes is one API access log line (the stage's JSON format).
	AccessLogBytes int
	// PlatformLogBytes is what Lambda itself logs per invocation at the
	// stack's system log level, INFO, in JSON format: a platform.start
	// event (about 140 bytes: time, type, request ID, version) and a
	// platform.report event (about 240 bytes: time, type, request ID,
	// durationMs, billedDurationMs, memorySizeMB, maxMemoryUsedMB,
	// status), 380 bytes, rounded up to 400 for the cold starts' extra
	// initDurationMs and their once-per-environment platform.initStart
	// and platform.initReport. platform.runtimeDone (the old END line) is
	// DEBUG and not sent. An X-Ray trace adds about 100 bytes to the
	// report; the stack does not trace today.
	PlatformLogBytes int
	// AdmissionQueues are the Agent queues the Submission's admission
	// check reads (one GetQueueAttributes each), at most once every
	// AdmissionRefresh in each Submission instance.
	AdmissionQueues  int
	AdmissionRefresh time.Duration

	// The alternatives (Compare).

	// SFNStandardTransitions is the state transitions of one order on a
	// Standard state machine with two Task states, ReserveInventory then
	// ChargePayment (End: true): start → ReserveInventory, ReserveInventory
	// → ChargePayment, ChargePayment → end of execution = 3.
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
	// the definition and the payload, which round up to one 64 MB chunk.
	ExpressMemoryMB int
	// DurableOperations is one order's durable operations: the execution's
	// start and two steps (each step calls the remote and waits for it
	// inside the step, so there is no wait or callback operation).
	DurableOperations int
	// DurableBytesPerOperation is the data one durable operation writes
	// (the order's input, then each step's result): small JSON, ~1 KiB.
	DurableBytesPerOperation int
	// DurableRetentionDays is how long a closed execution's history is
	// kept (the durable functions default is 14 days).
	DurableRetentionDays int
}

// DefaultAssumptions are the parameters the printed report uses.
func DefaultAssumptions() Assumptions {
	return Assumptions{
		MemoryMB:                 map[string]int{},
		RemoteLatency:            100 * time.Millisecond,
		AgentConcurrency:         10,
		AccessLogBytes:           400,
		PlatformLogBytes:         400,
		AdmissionQueues:          2,
		AdmissionRefresh:         250 * time.Millisecond,
		SFNStandardTransitions:   3,
		StatusEvents:             3,
		OrderRecordWRU:           2,
		ExpressMemoryMB:          64,
		DurableOperations:        3,
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

// concurrency is AgentConcurrency, at least 1.
func (a Assumptions) concurrency() float64 {
	if a.AgentConcurrency < 1 {
		return 1
	}
	return float64(a.AgentConcurrency)
}
