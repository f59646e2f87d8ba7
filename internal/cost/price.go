package cost

import (
	"fmt"
	"math"
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
	b.Lines = append(b.Lines, sqsLines(u, l, p, a)...)
	b.Lines = append(b.Lines, line("SQS", fmt.Sprintf("admission depth reads (%d queues, at most every %v an instance)", a.AdmissionQueues, a.AdmissionRefresh),
		"requests", admissionReads(u, l, a), p.SQSRequestsPerMillion))
	b.Lines = append(b.Lines, line("SNS", "publishes (billed 64 KiB chunks)", "requests", batchedPerOrder(u, l, "SNS"), p.SNSRequestsPerMillion))
	b.Lines = append(b.Lines, s3Lines(u, p)...)
	b.Lines = append(b.Lines, dynamoLines(u, p, a)...)
	b.Lines = append(b.Lines, logLines(u, fns, p, a)...)
	b.Lines = append(b.Lines, xrayLines(u, l, p, a)...)
	// SNS reuses a data key for up to 5 minutes, so an order causes no KMS
	// request of its own: the keys and their requests are in Fixed.
	b.Lines = append(b.Lines, line("KMS", "requests (SNS reuses data keys: see fixed costs)", "requests", 0, 0))
	return b
}

// lambdaLines are the requests, the GB-seconds of the measured handler
// time, and apart from them the GB-seconds the assumed remote latency adds.
func lambdaLines(fns []fnUse, p Prices, a Assumptions) []Line {
	var inv, handler, latency, init float64
	var names []string
	for _, f := range fns {
		inv += f.invocations
		handler += f.handlerGBs
		latency += f.latencyGBs
		init += f.initGBs
		names = append(names, f.name)
	}
	gbs := p.LambdaGBSecond * 1e6
	cold := fmt.Sprintf("ASSUMPTION %v each; environments idle %v, replaced every %v", a.InitDuration, a.IdleEnvironmentLife, a.EnvironmentLife)
	if a.EveryInvocationCold {
		cold = fmt.Sprintf("ASSUMPTION %v each; every invocation a cold start", a.InitDuration)
	}
	return []Line{
		line("Lambda", "requests ("+strings.Join(names, ", ")+")", "requests", inv, p.LambdaRequestsPerMillion),
		line("Lambda", "duration: measured handler time", "GB-s", handler, gbs),
		line("Lambda", fmt.Sprintf("duration: remote latency (ASSUMPTION %v a call)", a.RemoteLatency), "GB-s", latency, gbs),
		line("Lambda", "duration: init phase of cold starts ("+cold+")", "GB-s", init, gbs),
	}
}

// sqsLines are the handlers' own requests, as billed, and the pollers'
// ReceiveMessage and DeleteMessageBatch, one each per batch. A received
// batch of small messages is assumed to be one 64 KiB chunk.
func sqsLines(u Usage, l Level, p Prices, a Assumptions) []Line {
	polls := 0.0
	for _, fn := range sqsDriven {
		batches := float64(u.Records[fn]) / recordsPerInvocation(u, l, a, fn)
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

// s3Free are the S3 requests S3 does not charge for: deletes.
var s3Free = map[string]bool{"DeleteObject": true, "DeleteObjects": true}

// s3Put are the S3 requests priced as PUT, COPY, POST or LIST; every other
// one but a delete is priced as GET.
var s3Put = map[string]bool{
	"PutObject": true, "CopyObject": true, "PostObject": true, "ListObjects": true, "ListObjectsV2": true,
	"ListObjectVersions": true, "ListBuckets": true, "CreateMultipartUpload": true, "UploadPart": true,
	"UploadPartCopy": true, "CompleteMultipartUpload": true, "ListMultipartUploads": true, "ListParts": true,
}

// s3Lines are the S3 requests the handlers made (a code step's), by the
// price class S3 bills them in; deletes are free.
func s3Lines(u Usage, p Prices) []Line {
	var put, get float64
	for k, n := range u.Requests {
		op, ok := strings.CutPrefix(k, "S3 ")
		switch {
		case !ok || s3Free[op]:
		case s3Put[op]:
			put += float64(n)
		default:
			get += float64(n)
		}
	}
	return []Line{
		line("S3", "PUT, COPY, POST, LIST requests", "requests", u.PerOrder(put), p.S3PutPer1k*1000),
		line("S3", "GET and other requests (DELETE free)", "requests", u.PerOrder(get), p.S3GetPer1k*1000),
	}
}

// dynamoLines show each table and index apart: WRU, then RRU. An index
// that transactions write is billed by a.TransactionIndexWrites, and its
// line names what DynamoDB Local reported.
func dynamoLines(u Usage, p Prices, a Assumptions) []Line {
	var out []Line
	for _, k := range sortedKeys(u.WRU) {
		item := "WRU " + k
		if txn := u.TransactionIndexWRU[k]; txn > 0 {
			item += fmt.Sprintf(" (a transaction's index writes %s; DynamoDB Local: %.3g)", a.TransactionIndexWrites, u.PerOrder(u.WRU[k]))
		}
		out = append(out, line("DynamoDB", item, "WRU", u.PerOrder(billedWRU(u, a, k)), p.DynamoDBWRUPerMillion))
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

// billedWRU is table or index k's WRU as billed: DynamoDB Local's count,
// with a transaction's index writes at once their units under
// IndexWritesOnce (Local counts them twice).
func billedWRU(u Usage, a Assumptions, k string) float64 {
	if a.TransactionIndexWrites == IndexWritesOnce {
		return u.WRU[k] - u.TransactionIndexWRU[k]/2
	}
	return u.WRU[k]
}

// BilledWRUPerOrder is the WRU of every table and index per order, as a
// bills them.
func BilledWRUPerOrder(u Usage, a Assumptions) float64 {
	t := 0.0
	for k := range u.WRU {
		t += billedWRU(u, a, k)
	}
	return u.PerOrder(t)
}

// String names the reading in the tables.
func (w IndexWrites) String() string {
	if w == IndexWritesTwice {
		return "billed twice, as Local counts them"
	}
	return "billed once, as for any index write"
}

// xrayLines are the recorded orders' traces and the wait of their
// PutTraceSegments requests. Lambda records nothing itself (PassThrough):
// the functions send each recorded order's segments under its own trace
// ID (shared/segments), so X-Ray bills one trace per recorded order, as
// many as the run measured, at a.TraceSampleRate of the orders. X-Ray
// bills per trace recorded ($5.00 a million), whatever its segments, and
// the PutTraceSegments requests themselves have no price
// (https://aws.amazon.com/xray/pricing/).
func xrayLines(u Usage, l Level, p Prices, a Assumptions) []Line {
	if a.ActiveTracing {
		return []Line{line("X-Ray", "traces recorded (Lambda's active tracing: a trace per sampled invocation)", "traces", ActiveTracingTraces(u, l, a), p.XRayTracesRecordedPerMillion)}
	}
	tr := u.Tracing
	traces, requests := 0.0, 0.0
	if tr.RecordedOrders > 0 {
		traces = a.TraceSampleRate * float64(tr.Traces) / float64(tr.RecordedOrders)
		requests = a.TraceSampleRate * float64(tr.Requests) / float64(tr.RecordedOrders)
	}
	wait := requests * billedSeconds(a.XRayRequestLatency.Seconds()) * a.memoryGB(Scheduler)
	return []Line{
		line("X-Ray", fmt.Sprintf("traces recorded (%.3g of orders, one trace each)", a.TraceSampleRate), "traces", traces, p.XRayTracesRecordedPerMillion),
		line("Lambda", fmt.Sprintf("duration: PutTraceSegments of recorded orders (ASSUMPTION %v a request)", a.XRayRequestLatency), "GB-s", wait, p.LambdaGBSecond*1e6),
	}
}

// Lambda's active tracing (the stack does not use it; ActiveTracing prices
// it for comparison) samples the invocations of each function by its own
// rule, the first each second and 5% of the rest, which cannot be
// configured (https://docs.aws.amazon.com/lambda/latest/dg/services-xray.html),
// and an invocation an SQS message triggers starts a trace of its own,
// linked to the sender's (https://docs.aws.amazon.com/xray/latest/devguide/xray-tracelinking.html):
// every sampled invocation is a trace.

// XRaySampledPerSecond is how many of rate invocations a second of one
// function Lambda's default sampling records, for arrivals spread evenly
// (bursts record fewer).
func XRaySampledPerSecond(rate float64) float64 {
	return math.Min(rate, 1) + 0.05*math.Max(rate-1, 0)
}

// ActiveTracingTraces is the traces per order Lambda's active tracing on
// every function would record at l: each function's sampled invocations a
// second, over the orders a second.
func ActiveTracingTraces(u Usage, l Level, a Assumptions) float64 {
	traces := 0.0
	if l.OrdersPerSecond > 0 {
		for _, f := range lambdaUse(u, l, a) {
			functions := 1.0
			if f.name == Agent {
				functions = a.agents()
			}
			traces += functions * XRaySampledPerSecond(f.invocations*l.OrdersPerSecond/functions) / l.OrdersPerSecond
		}
	}
	return traces
}
