package cost

import "math"

// fnUse is one function's Lambda use per order at a level.
type fnUse struct {
	name        string
	invocations float64
	// handlerGBs is the GB-seconds of the measured handler time;
	// latencyGBs what the remote's latency adds (the Agent only).
	handlerGBs, latencyGBs float64
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
			out = append(out, singleUse(u, a, fn))
		}
	}
	return out
}

// batchedUse is a function an event source hands batches: its records at
// l's batch fill make its invocations, and an invocation runs the
// per-record handler time once per record.
func batchedUse(u Usage, l Level, a Assumptions, fn string) fnUse {
	records := float64(u.Records[fn])
	perInvocation := l.RecordsPerInvocation(fn, u.StreamRecordsPerOrder())
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
	}
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
func singleUse(u Usage, a Assumptions, fn string) fnUse {
	n := float64(u.Invocations[fn])
	invocations := u.PerOrder(n)
	mean := u.HandlerTime[fn].Seconds() / n
	return fnUse{
		name:        fn,
		invocations: invocations,
		handlerGBs:  invocations * billedSeconds(mean) * a.memoryGB(fn),
	}
}

// billedSeconds is one invocation's duration as Lambda bills it: rounded
// up to the next millisecond. The model rounds the mean invocation, which
// is all Usage keeps; that can underbill by less than 1 ms an invocation.
// The tolerance keeps 0.1 s from billing as 101 ms through float error.
func billedSeconds(seconds float64) float64 {
	return math.Ceil(seconds*1000-1e-6) / 1000
}
