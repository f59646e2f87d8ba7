// Package cost turns what a run of the local stack measured into what an
// order costs in AWS at list prices: the price list, the model of what
// Lambda's pollers batch at a traffic level, and the same workflow priced
// on Step Functions and Lambda durable functions for comparison. It is pure:
// cmd/cost measures, this package prices.
package cost

import "time"

// Usage is what one scenario's run measured on the local engines, as totals
// over Orders orders.
type Usage struct {
	// Scenario names the run: "happy path", "one retried step",
	// "compensated".
	Scenario string
	Orders   int
	// APIRequests are the HTTP API requests the clients made.
	APIRequests int
	// Requests are the AWS API requests the handlers made, by "Service
	// Operation" as the SDK names them ("SQS SendMessage", "SQS
	// SendMessageBatch", "SNS Publish", "SNS PublishBatch", "DynamoDB
	// UpdateItem", ...). Lambda's pollers are not in it: the model derives
	// their receives and deletes from Records.
	Requests map[string]int
	// Billed are the same requests in the units SQS and SNS bill: one per
	// started 64 KiB of a request's payload (a batch's payloads summed).
	// Keys as Requests; only SQS and SNS keys.
	Billed map[string]int
	// Entries are the messages the batch sends carried ("SQS
	// SendMessageBatch", "SNS PublishBatch"): at a level whose batches are
	// smaller than the run's, the same messages take more requests.
	Entries map[string]int
	// WRU and RRU are the DynamoDB capacity units DynamoDB reported
	// (ReturnConsumedCapacity INDEXES), keyed by table role and index:
	// "orders", "orders/ByOwner", "state", "state/InFlightByDeadline", ...
	WRU, RRU map[string]float64
	// Records are the event records each event-source-driven function
	// consumed, by function: "scheduler" and "agent" (SQS messages),
	// "notifier" (stream records). The model turns them into invocations,
	// and for SQS into ReceiveMessage and DeleteMessageBatch requests, at a
	// traffic level.
	Records map[string]int
	// Invocations are the invocations of the functions nothing batches:
	// "submission" (one per API request that reached it) and "supervisor"
	// (sweeps the run needed; the deployed schedule's sweeps are fixed
	// monthly cost, see Fixed).
	Invocations map[string]int
	// HandlerTime is how long each function's handler ran, summed over the
	// run, by function as in Records and Invocations. It was measured on
	// the local engines, whose calls are slower than AWS's, and without the
	// remote service's latency (the local remote answers at once).
	HandlerTime map[string]time.Duration
	// RemoteCalls are the HTTP calls the agents made to the remote service.
	RemoteCalls int
	// LogBytes are the bytes each function's logger wrote, by function;
	// WarnLogBytes those of its WARN and ERROR lines.
	LogBytes, WarnLogBytes map[string]int64
	// TransactionIndexWRU are the index WRU (part of WRU) that
	// transactions consumed, as DynamoDB Local reports them: twice the
	// units of an index write (see Assumptions.TransactionIndexWrites).
	TransactionIndexWRU map[string]float64
	// Tracing is what the run's recorded orders sent X-Ray.
	Tracing Tracing
	// Steps are the workflow's steps in order, each with what its Agent's
	// invocations used, measured apart from the rest (StepCosts). Their
	// records, handler time, remote calls and requests are also in the
	// totals above.
	Steps []StepUsage
}

// StepUsage is what one step's Agent invocations used over a run: their
// records and handler time, the remote calls they made and the AWS
// requests they made (the reply to the Scheduler, and a code step's
// ledger and S3 requests), as Usage keys them.
type StepUsage struct {
	Name string
	// Code is true for a code step: Go code run around the ledger
	// (shared/codestep) instead of a call to the remote service.
	Code        bool
	Records     int
	HandlerTime time.Duration
	RemoteCalls int
	// Requests, Billed, Entries, WRU, RRU and TransactionIndexWRU as in
	// Usage: the ledger's units are under "ledger".
	Requests, Billed, Entries map[string]int
	WRU, RRU                  map[string]float64
	TransactionIndexWRU       map[string]float64
}

// Tracing is what a run's recorded orders sent X-Ray (shared/segments).
type Tracing struct {
	// RecordedOrders are the orders the Submission sampled.
	RecordedOrders int
	// Traces are the distinct trace IDs of their segments: one per order
	// when each order is one trace.
	Traces int
	// Segments are the segment documents; Requests the PutTraceSegments
	// requests that carried them (one per invocation that recorded any).
	Segments, Requests int
}
