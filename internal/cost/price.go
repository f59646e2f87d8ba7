package cost

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Line is one billed item per order: its units per order and what those
// cost per million orders.
type Line struct {
	Service string
	Item    string
	Unit    string
	// PerOrder is the units of one order.
	PerOrder float64
	// USDPerMillion is the dollars a million orders pay for them.
	USDPerMillion float64
}

// line prices perOrder units at a price per million units.
func line(service, item, unit string, perOrder, perMillionUnits float64) Line {
	return Line{Service: service, Item: item, Unit: unit, PerOrder: perOrder, USDPerMillion: perOrder * perMillionUnits}
}

// Bill is one scenario's variable cost per order at one level.
type Bill struct {
	Scenario string
	Level    Level
	Lines    []Line
}

// Total is the bill's dollars per million orders.
func (b Bill) Total() float64 { return total(b.Lines) }

func total(lines []Line) float64 {
	t := 0.0
	for _, l := range lines {
		t += l.USDPerMillion
	}
	return t
}

// Price is what u's orders cost per order at level l: one line per service
// (DynamoDB one per table and index), at prices p. Fixed monthly costs are
// not in it (see Fixed).
func Price(u Usage, l Level, p Prices, a Assumptions) Bill {
	b := Bill{Scenario: u.Scenario, Level: l}
	if u.Orders <= 0 {
		return b
	}
	fns := lambdaUse(u, l, a)
	b.Lines = append(b.Lines, line("API Gateway", "HTTP API requests", "requests", u.PerOrder(float64(u.APIRequests)), p.HTTPAPIRequestsPerMillion))
	b.Lines = append(b.Lines, lambdaLines(fns, p, a)...)
	b.Lines = append(b.Lines, sqsLines(u, l, p)...)
	b.Lines = append(b.Lines, line("SQS", fmt.Sprintf("admission depth reads (%d queues, at most every %v an instance)", a.AdmissionQueues, a.AdmissionRefresh),
		"requests", admissionReads(u, l, a), p.SQSRequestsPerMillion))
	b.Lines = append(b.Lines, line("SNS", "publishes (billed 64 KiB chunks)", "requests", batchedPerOrder(u, l, "SNS"), p.SNSRequestsPerMillion))
	b.Lines = append(b.Lines, dynamoLines(u, p)...)
	b.Lines = append(b.Lines, logLines(u, fns, p, a)...)
	b.Lines = append(b.Lines, xrayLine(fns, l, p))
	// SNS reuses a data key for up to 5 minutes, so an order causes no KMS
	// request of its own: the keys and their requests are in Fixed.
	b.Lines = append(b.Lines, line("KMS", "requests (SNS reuses data keys: see fixed costs)", "requests", 0, 0))
	return b
}

// lambdaLines are the requests, the GB-seconds of the measured handler
// time, and apart from them the GB-seconds the assumed remote latency adds.
func lambdaLines(fns []fnUse, p Prices, a Assumptions) []Line {
	var inv, handler, latency float64
	var names []string
	for _, f := range fns {
		inv += f.invocations
		handler += f.handlerGBs
		latency += f.latencyGBs
		names = append(names, f.name)
	}
	gbs := p.LambdaGBSecond * 1e6
	return []Line{
		line("Lambda", "requests ("+strings.Join(names, ", ")+")", "requests", inv, p.LambdaRequestsPerMillion),
		line("Lambda", "duration: measured handler time", "GB-s", handler, gbs),
		line("Lambda", fmt.Sprintf("duration: remote latency (ASSUMPTION %v a call)", a.RemoteLatency), "GB-s", latency, gbs),
	}
}

// sqsLines are the handlers' own requests, as billed, and the pollers'
// ReceiveMessage and DeleteMessageBatch, one each per batch. A received
// batch of small messages is assumed to be one 64 KiB chunk.
func sqsLines(u Usage, l Level, p Prices) []Line {
	polls := 0.0
	for _, fn := range sqsDriven {
		batches := float64(u.Records[fn]) / l.RecordsPerInvocation(fn, 0)
		polls += 2 * batches
	}
	return []Line{
		line("SQS", "handlers' requests (billed 64 KiB chunks)", "requests", batchedPerOrder(u, l, "SQS"), p.SQSRequestsPerMillion),
		line("SQS", "pollers' receives + deletes (one each per batch)", "requests", u.PerOrder(polls), p.SQSRequestsPerMillion),
	}
}

// The batch sends of the functions that read the state table's stream:
// the Notifier's PublishBatch of events, the Timer's SendMessageBatch of
// Deadlines, as the SDK names them.
const (
	publishBatch = "SNS PublishBatch"
	sendBatch    = "SQS SendMessageBatch"
)

// streamBatched are the batch sends above, by the function that makes them.
var streamBatched = map[string]string{publishBatch: Notifier, sendBatch: Timer}

// batchedPerOrder is what service's requests of an order are billed at l.
// A stream consumer's batch send carries the messages of one stream batch,
// up to ten a request: at l, a request carries min(10, the messages of one
// invocation), which may be fewer than in the run (at 1M orders a month an
// invocation holds one record, so every message is its own request). Never
// fewer requests than the run billed.
func batchedPerOrder(u Usage, l Level, service string) float64 {
	total := u.BilledPerOrder(service)
	for key, fn := range streamBatched {
		if !strings.HasPrefix(key, service+" ") {
			continue
		}
		msgs := float64(u.Entries[key])
		if msgs == 0 || u.Records[fn] == 0 {
			continue
		}
		perInvocation := l.RecordsPerInvocation(fn, u.StreamRecordsPerOrder()) * msgs / float64(u.Records[fn])
		fill := math.Min(10, math.Max(1, perInvocation))
		billed := u.PerOrder(float64(u.Billed[key]))
		total += math.Max(billed, u.PerOrder(msgs)/fill) - billed
	}
	return total
}

// admissionReads are the Submission's GetQueueAttributes per order at l.
// An instance reads every queue at most once a refresh: when orders come
// further apart than that, every order reads; when they come closer, the
// instances busy at once (the rate times one request's handler time)
// each read once a refresh. A run's single in-process Submission is no
// measure of that, so the line is modelled rather than counted.
func admissionReads(u Usage, l Level, a Assumptions) float64 {
	if a.AdmissionQueues == 0 || a.AdmissionRefresh <= 0 || l.OrdersPerSecond <= 0 {
		return 0
	}
	refresh := a.AdmissionRefresh.Seconds()
	perRequest := 0.0
	if n := u.Invocations[Submission]; n > 0 {
		perRequest = u.HandlerTime[Submission].Seconds() / float64(n)
	}
	share := math.Min(1, math.Max(1/(refresh*l.OrdersPerSecond), perRequest/refresh))
	return float64(a.AdmissionQueues) * share
}

// dynamoLines show each table and index apart: WRU, then RRU.
func dynamoLines(u Usage, p Prices) []Line {
	var out []Line
	for _, k := range sortedKeys(u.WRU) {
		out = append(out, line("DynamoDB", "WRU "+k, "WRU", u.PerOrder(u.WRU[k]), p.DynamoDBWRUPerMillion))
	}
	for _, k := range sortedKeys(u.RRU) {
		out = append(out, line("DynamoDB", "RRU "+k, "RRU", u.PerOrder(u.RRU[k]), p.DynamoDBRRUPerMillion))
	}
	return out
}

// logLines are the functions' own log bytes, the API's access log lines
// and Lambda's platform lines, priced per GB ingested.
func logLines(u Usage, fns []fnUse, p Prices, a Assumptions) []Line {
	invocations := 0.0
	for _, f := range fns {
		invocations += f.invocations
	}
	perByte := p.LogsIngestionPerGB / GB * 1e6
	access := u.PerOrder(float64(u.APIRequests)) * float64(a.AccessLogBytes)
	return []Line{
		line("CloudWatch Logs", "function logs", "bytes", u.LogBytesPerOrder(), perByte),
		line("CloudWatch Logs", fmt.Sprintf("API access logs (ASSUMPTION %d B a request)", a.AccessLogBytes), "bytes", access, perByte),
		line("CloudWatch Logs", fmt.Sprintf("Lambda platform lines (%d B an invocation: system log level INFO, platform.start and platform.report)", a.PlatformLogBytes), "bytes", invocations*float64(a.PlatformLogBytes), perByte),
	}
}

// Active tracing (shared/trace): Lambda samples the invocations that start
// a trace, the first each second and 5% of the rest (a rate that cannot be
// configured for Lambda), and an order's trace is recorded whole or not at
// all. The Submission starts each order's trace, and the SQS-driven
// functions continue it; the stream readers (Notifier, Timer) start a trace
// of their own for each invocation, which no order's trace holds. The
// Supervisor's schedule is a fixed cost (see Fixed).
var traceRoots = []string{Submission, Notifier, Timer}

// XRaySampledPerSecond is how many of rate invocations a second of one
// function Lambda's default sampling records, for arrivals spread evenly
// (bursts record fewer).
func XRaySampledPerSecond(rate float64) float64 {
	return math.Min(rate, 1) + 0.05*math.Max(rate-1, 0)
}

// xrayLine is the traces recorded per order at l: each root function's
// sampled invocations a second, over the orders a second.
func xrayLine(fns []fnUse, l Level, p Prices) Line {
	traces := 0.0
	if l.OrdersPerSecond > 0 {
		for _, f := range fns {
			if slices.Contains(traceRoots, f.name) {
				traces += XRaySampledPerSecond(f.invocations*l.OrdersPerSecond) / l.OrdersPerSecond
			}
		}
	}
	return line("X-Ray", "traces recorded (active tracing: 1 a second and 5% of the rest, per function that starts traces)", "traces", traces, p.XRayTracesRecordedPerMillion)
}
