package cost

import (
	"math"
	"strings"
	"testing"
	"time"
)

// tenOrders is a run of 10 orders with round numbers, so the expectations
// below can be worked out by hand: per order 1 API request, 2 agent
// records (4.5 ms each, one remote call each), 3 scheduler records (2 ms
// each), 3 stream records (1 ms each), 1 submission (2.3 ms), 6 WRU.
func tenOrders() Usage {
	return Usage{
		Scenario:    HappyPath,
		Orders:      10,
		APIRequests: 10,
		// Requests are what the handlers called; Billed what SQS and SNS
		// bill. The model must read Billed.
		Requests:    map[string]int{"SQS SendMessage": 999, "SQS SendMessageBatch": 999, "SNS Publish": 999},
		Billed:      map[string]int{"SQS SendMessage": 40, "SQS SendMessageBatch": 10, "SNS Publish": 30},
		WRU:         map[string]float64{"orders": 10, "orders/ByOwner": 10, "state": 40},
		RRU:         map[string]float64{"state": 5},
		Records:     map[string]int{Agent: 20, Scheduler: 30, Notifier: 30},
		Invocations: map[string]int{Submission: 10},
		HandlerTime: map[string]time.Duration{
			Agent:      90 * time.Millisecond,
			Scheduler:  60 * time.Millisecond,
			Notifier:   30 * time.Millisecond,
			Submission: 23 * time.Millisecond,
		},
		RemoteCalls: 20,
		LogBytes:    map[string]int64{Agent: 6144, Scheduler: 4096},
	}
}

const tolerance = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) <= tolerance*math.Max(1, math.Abs(b)) }

// find is the bill line whose item starts with item.
func find(t *testing.T, lines []Line, service, item string) Line {
	t.Helper()
	for _, l := range lines {
		if l.Service == service && strings.HasPrefix(l.Item, item) {
			return l
		}
	}
	t.Fatalf("no line %s %s in %+v", service, item, lines)
	return Line{}
}

func TestPriceLines(t *testing.T) {
	// $ per million orders of one GB-s, one log byte.
	gbs := 0.0000133334 * 1e6
	logByte := 0.5 / GB * 1e6
	type want struct {
		service, item   string
		perOrder, usdPM float64
	}
	tests := []struct {
		level Level
		want  []want
	}{
		{Reference, []want{
			{"API Gateway", "HTTP API", 1, 1.00},
			// 1 submission + 3/10 scheduler + 2/10 agent + 3/75 notifier
			// (300 stream records a second / 4 polls = 75 a batch).
			{"Lambda", "requests", 1.54, 0.308},
			// GB-s per order at 0.25 GB: agent 0.2 × 45 ms, scheduler
			// 0.3 × 20 ms, notifier 0.04 × 75 ms, submission 1 × 3 ms
			// (2.3 ms rounded up).
			{"Lambda", "duration: measured", 0.002625, 0.002625 * gbs},
			// One 100 ms latency per full agent batch: 0.2 × 0.1 × 0.25.
			{"Lambda", "duration: remote latency", 0.0025, 0.0025 * gbs},
			{"SQS", "handlers'", 5, 2.00},
			// (3 scheduler + 2 agent batches) × (receive + delete) / 10.
			{"SQS", "pollers'", 1, 0.40},
			{"SNS", "publishes", 3, 1.50},
			{"DynamoDB", "WRU orders/ByOwner", 1, 0.625},
			{"DynamoDB", "WRU state", 4, 2.50},
			{"DynamoDB", "RRU state", 0.5, 0.0625},
			{"CloudWatch Logs", "function logs", 1024, 1024 * logByte},
			{"CloudWatch Logs", "API access logs", 400, 400 * logByte},
			// 1.54 invocations × 400 B of platform.start and platform.report.
			{"CloudWatch Logs", "Lambda platform", 616, 616 * logByte},
			{"KMS", "requests", 0, 0},
		}},
		{MillionAMonth, []want{
			// Nothing batches: 1 + 3 + 2 + 3 invocations.
			{"Lambda", "requests", 9, 1.80},
			// agent 2 × 5 ms (4.5 rounded up), scheduler 3 × 2 ms,
			// notifier 3 × 1 ms, submission 1 × 3 ms, at 0.25 GB.
			{"Lambda", "duration: measured", 0.00275, 0.00275 * gbs},
			// Every agent record waits its own 100 ms: 2 × 0.1 × 0.25.
			{"Lambda", "duration: remote latency", 0.025, 0.025 * gbs},
			{"SQS", "handlers'", 5, 2.00},
			// 50 records × (receive + delete) / 10.
			{"SQS", "pollers'", 10, 4.00},
			{"DynamoDB", "WRU orders", 1, 0.625},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.level.Name, func(t *testing.T) {
			b := Price(tenOrders(), tt.level, ListPrices(), twoSteps())
			for _, w := range tt.want {
				got := find(t, b.Lines, w.service, w.item)
				if !near(got.PerOrder, w.perOrder) || !near(got.USDPerMillion, w.usdPM) {
					t.Errorf("%s %s = %g a order, $%g per million; want %g, $%g",
						w.service, w.item, got.PerOrder, got.USDPerMillion, w.perOrder, w.usdPM)
				}
			}
		})
	}
}

func TestPriceTotalAddsTheLines(t *testing.T) {
	a := twoSteps()
	a.InitDuration = 0 // coldStarts has its own test
	u := tenOrders()
	u.Tracing = Tracing{RecordedOrders: 10, Traces: 10, Requests: 40}
	b := Price(u, Reference, ListPrices(), a)
	gbs := 0.0000133334 * 1e6
	logByte := 0.5 / GB * 1e6
	// Admission reads: one instance (2.3 ms a request) reads 2 queues 4
	// times a second for 100 orders, 0.08 reads an order at $0.40.
	// X-Ray: 1% of orders, one trace each, and their 4 requests' 20 ms at
	// 128 MB.
	want := 1.00 + 0.308 + 0.005125*gbs + 2.00 + 0.40 + 1.50 + 0.625 + 0.625 + 2.50 + 0.0625 + (1424+616)*logByte + 0.032 +
		0.01*5 + 0.01*4*0.02*0.125*gbs
	if !near(b.Total(), want) {
		t.Errorf("total %g, want %g", b.Total(), want)
	}
}

func TestPriceReadsBilledNotRequests(t *testing.T) {
	tests := []struct {
		name     string
		billed   map[string]int
		sqs, sns float64
	}{
		{"billed chunks", map[string]int{"SQS SendMessageBatch": 20, "SQS SendMessage": 10, "SNS PublishBatch": 5}, 3, 0.5},
		{"no billed requests", nil, 0, 0},
		{"other services ignored", map[string]int{"DynamoDB UpdateItem": 100, "SNSX Publish": 7}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tenOrders()
			u.Requests = map[string]int{"SQS SendMessage": 1000, "SNS Publish": 1000}
			u.Billed = tt.billed
			b := Price(u, Reference, ListPrices(), twoSteps())
			if got := find(t, b.Lines, "SQS", "handlers'").PerOrder; !near(got, tt.sqs) {
				t.Errorf("SQS %g a order, want %g", got, tt.sqs)
			}
			if got := find(t, b.Lines, "SNS", "publishes").PerOrder; !near(got, tt.sns) {
				t.Errorf("SNS %g a order, want %g", got, tt.sns)
			}
		})
	}
}

// TestPublishBatchesFollowTheLevel: the Notifier's events fill a
// PublishBatch only when a stream batch holds ten of them; at 1M orders a
// month each event is its own request, however the run batched them.
func TestPublishBatchesFollowTheLevel(t *testing.T) {
	u := tenOrders()
	// 30 stream records, 30 events published in 3 requests of 10, and one
	// alert published alone.
	u.Requests = map[string]int{"SNS PublishBatch": 3, "SNS Publish": 1}
	u.Billed = map[string]int{"SNS PublishBatch": 3, "SNS Publish": 1}
	u.Entries = map[string]int{"SNS PublishBatch": 30}
	for _, tt := range []struct {
		level Level
		want  float64
	}{{Reference, 0.4}, {MillionAMonth, 3.1}} {
		b := Price(u, tt.level, ListPrices(), twoSteps())
		if got := find(t, b.Lines, "SNS", "publishes").PerOrder; !near(got, tt.want) {
			t.Errorf("%s: SNS %g a order, want %g", tt.level.Name, got, tt.want)
		}
	}
}

func TestAgentLatencyModel(t *testing.T) {
	tests := []struct {
		name        string
		level       Level
		concurrency int
		calls       int // remote calls for the 20 agent records
		memoryMB    int
		latencyGBs  float64
	}{
		// A batch of 10 at concurrency 10 waits once: 0.2 inv × 0.1 s × 0.25 GB.
		{"full batch, concurrency 10", Reference, 10, 20, 256, 0.005},
		// At concurrency 5 the batch waits twice.
		{"full batch, concurrency 5", Reference, 5, 20, 256, 0.01},
		// Each record retried once: two calls one after the other.
		{"full batch, retried calls", Reference, 10, 40, 256, 0.01},
		// Unbatched: each record its own latency, 2 inv × 0.1 s × 0.25 GB.
		{"no batching", MillionAMonth, 10, 20, 256, 0.05},
		{"no batching, retried, 512 MB", MillionAMonth, 10, 40, 512, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tenOrders()
			u.RemoteCalls = tt.calls
			a := twoSteps()
			a.AgentConcurrency = tt.concurrency
			a.MemoryMB = map[string]int{Agent: tt.memoryMB}
			b := Price(u, tt.level, ListPrices(), a)
			if got := find(t, b.Lines, "Lambda", "duration: remote latency").PerOrder; !near(got, tt.latencyGBs) {
				t.Errorf("latency %g GB-s a order, want %g", got, tt.latencyGBs)
			}
		})
	}
}

func TestPriceWithoutOrders(t *testing.T) {
	u := tenOrders()
	u.Orders = 0
	b := Price(u, Reference, ListPrices(), twoSteps())
	if len(b.Lines) != 0 || b.Total() != 0 {
		t.Errorf("a run without orders priced %+v", b)
	}
	if u.WRUPerOrder() != 0 {
		t.Errorf("WRU per order without orders: %g", u.WRUPerOrder())
	}
}

func TestWRUPerOrder(t *testing.T) {
	if got := tenOrders().WRUPerOrder(); !near(got, 6) {
		t.Errorf("WRU per order %g, want 6", got)
	}
}

func TestBilledSecondsRoundsUpToTheMillisecond(t *testing.T) {
	tests := []struct{ in, want float64 }{
		{0, 0},
		{0.001, 0.001},
		{0.0010001, 0.002},
		{0.0023, 0.003},
		{0.1, 0.1}, // not 101 ms through float error
		{0.1045, 0.105},
		{0.209, 0.209},
	}
	for _, tt := range tests {
		if got := billedSeconds(tt.in); !near(got, tt.want) {
			t.Errorf("billedSeconds(%g) = %g, want %g", tt.in, got, tt.want)
		}
	}
}

func TestDurationRoundingIsPerInvocation(t *testing.T) {
	// 10 submissions of 2.3 ms bill 10 × 3 ms, not 23 ms rounded once.
	u := Usage{Orders: 10, Invocations: map[string]int{Submission: 10},
		HandlerTime: map[string]time.Duration{Submission: 23 * time.Millisecond}}
	b := Price(u, Reference, ListPrices(), twoSteps())
	if got := find(t, b.Lines, "Lambda", "duration: measured").PerOrder; !near(got, 0.003*0.125) {
		t.Errorf("GB-s a order %g, want %g", got, 0.003*0.125)
	}
}

func TestAdmissionReadsFollowTheLevel(t *testing.T) {
	t.Parallel()
	a := twoSteps()
	u := Usage{Orders: 100, Invocations: map[string]int{Submission: 100}, HandlerTime: map[string]time.Duration{Submission: 3 * time.Second}}
	tests := []struct {
		level Level
		want  float64
	}{
		// Orders 2.6 s apart: every order reads both queues.
		{MillionAMonth, 2},
		// 100 a second, 30 ms each: 3 instances busy, each reading both
		// queues 4 times a second, 24 reads for 100 orders.
		{Reference, 0.24},
		// 5 a second, 200 ms apart: at 1 instance, 4 reads of 2 queues a
		// second for 5 orders.
		{Level{Name: "5/s", OrdersPerSecond: 5}, 1.6},
	}
	for _, tt := range tests {
		if got := admissionReads(u, tt.level, a); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: %v reads an order, want %v", tt.level.Name, got, tt.want)
		}
	}
}

func TestXRaySampling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ rate, want float64 }{
		{0, 0}, {0.5, 0.5}, {1, 1}, {21, 2}, {101, 6},
	} {
		if got := XRaySampledPerSecond(tc.rate); !near(got, tc.want) {
			t.Errorf("XRaySampledPerSecond(%g) = %g, want %g", tc.rate, got, tc.want)
		}
	}
}

// TestTracingPricesOneTracePerRecordedOrder: X-Ray bills the recorded
// share of orders, one trace each as the run measured, whatever the
// traffic; Lambda's active tracing, for comparison, a trace per sampled
// invocation of every function, which at a trickle is nearly every one.
func TestTracingPricesOneTracePerRecordedOrder(t *testing.T) {
	t.Parallel()
	u := tenOrders()
	u.Tracing = Tracing{RecordedOrders: 10, Traces: 10, Segments: 60, Requests: 50}
	a := twoSteps()
	a.TraceSampleRate = 0.01
	for _, l := range Levels() {
		lines := xrayLines(u, l, ListPrices(), a)
		if !near(lines[0].PerOrder, 0.01) || !near(lines[0].USDPerMillion, 0.05) {
			t.Errorf("%s: %+v, want 0.01 traces, $0.05 a million orders", l.Name, lines[0])
		}
	}
	a.ActiveTracing = true
	low := xrayLines(u, MillionAMonth, ListPrices(), a)[0].PerOrder
	// Under one invocation a second a function records every one; the
	// Scheduler's 1.5 a second record 1 + 5% of the rest.
	if inv := Price(u, MillionAMonth, ListPrices(), twoSteps()).Lines[1].PerOrder; low < 0.8*inv || low > inv {
		t.Errorf("active tracing at 1M a month: %v traces an order, want nearly one per invocation (%v)", low, inv)
	}
}
