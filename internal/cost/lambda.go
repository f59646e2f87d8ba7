package cost

import (
	"math"

	"github.com/sasflow/sas/shared/topology"
)

// fnUse is one function's Lambda use per order at a level.
type fnUse struct {
	name        string
	invocations float64
	// handlerGBs is the GB-seconds of the measured handler time;
	// latencyGBs what the remote's latency adds (the Agent only).
	handlerGBs, latencyGBs float64
	// initGBs is the GB-seconds of its cold starts' init phases.
	initGBs float64
}

// lambdaUse prices every function the run measured: the batched ones from
// their records, the others from their invocations.
func lambdaUse(u Usage, l Level, a Assumptions) []fnUse {
	var out []fnUse
	for _, fn := range sortedKeys(u.Records) {
		if u.Records[fn] > 0 {
			out = append(out, batchedUse(u, l, a, fn))
		}
	}
	for _, fn := range sortedKeys(u.Invocations) {
		if u.Invocations[fn] > 0 {
			out = append(out, singleUse(u, l, a, fn))
		}
	}
	return out
}

// batchedUse is a function an event source hands batches: its records at
// l's batch fill make its invocations, and an invocation runs the
// per-record handler time once per record.
func batchedUse(u Usage, l Level, a Assumptions, fn string) fnUse {
	records := float64(u.Records[fn])
	perInvocation := recordsPerInvocation(u, l, a, fn)
	invocations := u.PerOrder(records / perInvocation)
	handler := perInvocation * u.HandlerTime[fn].Seconds() / records
	latency := 0.0
	if fn == Agent {
		latency = agentLatency(u, a, perInvocation)
	}
	gb := a.memoryGB(fn)
	billedHandler := billedSeconds(handler)
	billedTotal := billedSeconds(handler + latency)
	return fnUse{
		name:        fn,
		invocations: invocations,
		handlerGBs:  invocations * billedHandler * gb,
		latencyGBs:  invocations * (billedTotal - billedHandler) * gb,
		initGBs:     coldStarts(l, a, fn, invocations, billedTotal) * a.InitDuration.Seconds() * gb,
	}
}

// recordsPerInvocation is fn's records per invocation at l, with the SQS
// mappings' batching window a: where batches are not full, a window of W
// seconds gathers the first record and the others that arrive on its
// queue within W, 1 + λW for records arriving at λ a second, up to the
// batch size.
func recordsPerInvocation(u Usage, l Level, a Assumptions, fn string) float64 {
	n := l.RecordsPerInvocation(fn, u.StreamRecordsPerOrder())
	queues, ok := sqsQueues(a)[fn]
	if !ok || l.FullBatches || a.BatchingWindow <= 0 {
		return n
	}
	perSecond := u.PerOrder(float64(u.Records[fn])) * l.OrdersPerSecond / queues
	return math.Min(float64(batchSize[fn]), 1+perSecond*a.BatchingWindow.Seconds())
}

// sqsQueues are the queues each SQS-driven function's records arrive on:
// the Scheduler's two (its own and the agents' replies), one per Agent,
// the deadline queue.
func sqsQueues(a Assumptions) map[string]float64 {
	return map[string]float64{Scheduler: 2, Agent: a.agents(), Deadline: 1}
}

// batchSize is each SQS mapping's batch size.
var batchSize = map[string]int{Scheduler: topology.SchedulerBatchSize, Agent: topology.AgentBatchSize, Deadline: topology.DeadlineBatchSize}

// coldStarts is fn's cold starts per order at l, of invocations per order
// that each last seconds. Each of fn's functions (one per Agent for the
// Agents) is invoked at λ a second; its busy environments, about λ times
// the duration and at least one, are each replaced once an
// EnvironmentLife, and an invocation that comes after an idle gap longer
// than IdleEnvironmentLife starts cold, as a Poisson arrival does with
// probability e^(-λ·life). AWS documents neither life
// (Assumptions.IdleEnvironmentLife); EveryInvocationCold prices the upper
// bound.
func coldStarts(l Level, a Assumptions, fn string, invocations, seconds float64) float64 {
	if a.EveryInvocationCold {
		return invocations
	}
	if l.OrdersPerSecond <= 0 || invocations <= 0 {
		return 0
	}
	functions := 1.0
	if fn == Agent {
		functions = a.agents()
	}
	rate := invocations * l.OrdersPerSecond / functions
	perSecond := rate * math.Exp(-rate*a.IdleEnvironmentLife.Seconds())
	if life := a.EnvironmentLife.Seconds(); life > 0 {
		perSecond += math.Max(1, math.Ceil(rate*seconds)) / life
	}
	return math.Min(invocations, functions*perSecond/l.OrdersPerSecond)
}

// agentLatency is the remote latency one Agent invocation of perInvocation
// records waits: the records run AgentConcurrency at a time, and each
// record makes its calls (retries included) one after another. A full
// batch of 10 at concurrency 10 waits one latency, a single record its own.
func agentLatency(u Usage, a Assumptions, perInvocation float64) float64 {
	waves := math.Ceil(perInvocation / a.concurrency())
	return waves * u.RemoteCallsPerAgentRecord() * a.RemoteLatency.Seconds()
}

// singleUse is a function nothing batches (the Submission, the Supervisor's
// sweeps the run needed): its measured invocations at their mean duration.
func singleUse(u Usage, l Level, a Assumptions, fn string) fnUse {
	n := float64(u.Invocations[fn])
	invocations := u.PerOrder(n)
	mean := u.HandlerTime[fn].Seconds() / n
	return fnUse{
		name:        fn,
		invocations: invocations,
		handlerGBs:  invocations * billedSeconds(mean) * a.memoryGB(fn),
		initGBs:     coldStarts(l, a, fn, invocations, billedSeconds(mean)) * a.InitDuration.Seconds() * a.memoryGB(fn),
	}
}

// billedSeconds is one invocation's duration as Lambda bills it: rounded
// up to the next millisecond. The model rounds the mean invocation, which
// is all Usage keeps; that can underbill by less than 1 ms an invocation.
// The tolerance keeps 0.1 s from billing as 101 ms through float error.
func billedSeconds(seconds float64) float64 {
	return math.Ceil(seconds*1000-1e-6) / 1000
}
