package cost

import (
	"fmt"
	"time"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/topology"
)

// FixedParams are what the deployed stack costs whether or not orders
// flow, in a 30-day month.
type FixedParams struct {
	// SupervisorRuns is the Supervisor's scheduled runs a month:
	// rate(1 minute) over 30 days is 43,200.
	SupervisorRuns int
	// SupervisorDuration is one sweep that finds nothing to recover
	// (ASSUMPTION: a Query and a log line; REPORT lines show it).
	SupervisorDuration time.Duration
	// SupervisorRRU is one such sweep's read: a Query of the in-flight
	// index that returns nothing reads at least one 4 KB unit, eventually
	// consistent (a GSI read is): 0.5 RRU
	// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).
	SupervisorRRU float64
	// IdlePollers is the long pollers each SQS event source mapping keeps
	// on an idle queue. The Lambda guide ("Configuring scaling behavior for
	// SQS event source mappings",
	// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html) says that at low traffic Lambda polls
	// with five concurrent batches and can optimize down to two, except
	// when maximum concurrency is set: the Scheduler's two queues have
	// none (2 each), the Agents' queues have it (5 each).
	IdlePollers map[string]int
	// LongPollWait is how long each idle ReceiveMessage waits (the SQS
	// maximum, 20 s): a poller makes one request per wait, and an empty
	// receive is billed (https://aws.amazon.com/sqs/pricing/).
	LongPollWait time.Duration
	// AlarmMetrics, CustomMetrics and Dashboards are what the stack
	// creates. CloudWatch prices an alarm per metric it evaluates, so a
	// metric math alarm costs one alarm metric per metric in its
	// expression. With the two Agents of order-v1: 5 queues × (DLQ not
	// empty + oldest message) + 8 functions' errors + the iterator age and
	// DLQ of the Notifier and of the Timer + orders shed for 15 minutes +
	// ERROR log lines + batch item failures + the Notifier's skipped
	// records + API 5xx + the Supervisor's heartbeat are 28 alarms of one
	// metric; function throttles sum 8 metrics, the orders table's
	// throttles 4 (reads and writes of the table and its index), the state
	// table's 6 (and its two indexes): 46 alarm metrics in 31 alarms. Each
	// further Agent (a step of the workflow catalog) adds 4: its queue's
	// two alarms, its errors, its throttles. The transition metric
	// filters make about 10 custom metrics (one per transition value the
	// logs carry: the common ones, and "waiting" for a step whose retry
	// policy waits, which has no alarm: its SNS notice tells the
	// operators), and the shed-orders, ERROR-lines, batch-item-failures
	// and skipped-records filters one each; one dashboard.
	AlarmMetrics, CustomMetrics, Dashboards int
	// KMSKeys are the two topics' customer managed keys. Key rotation is
	// on, and a rotated key costs $1 a month more per rotation (up to two):
	// this prices the first year.
	KMSKeys int
	// TopicPublishers is each encrypted topic's publishing principals. The
	// SNS guide estimates KMS requests per topic as R = B / D × 2P (B the
	// billing period, D the 5-minute data key reuse, P the publishers); it
	// assumes every publisher publishes throughout, an upper bound for the
	// alert topic, which publishes rarely.
	TopicPublishers map[string]int
	// DataKeyReuse is D: SNS reuses a data key for up to 5 minutes.
	DataKeyReuse time.Duration
}

// DefaultFixed are the stack's fixed costs as deployed: the stack of the
// deployed workflow catalog (shared/catalog), whose steps each add an
// Agent, its queue and its alarms.
func DefaultFixed() FixedParams { return FixedFor(catalog.MustDeployed().AgentNames()) }

// FixedFor are the fixed costs of the stack whose Agents perform agents.
func FixedFor(agents []string) FixedParams {
	pollers := map[string]int{"scheduler queue": 2, "response queue": 2, "deadline queue": 2}
	for _, step := range agents {
		// An Agent's mapping idles with its maximum concurrency.
		pollers[step+" queue"] = topology.DefaultCapacity().AgentMaxConcurrency()
	}
	return FixedParams{
		SupervisorRuns:     SecondsPerMonth / 60,
		SupervisorDuration: 50 * time.Millisecond,
		SupervisorRRU:      0.5,
		IdlePollers:        pollers,
		LongPollWait:       20 * time.Second,
		AlarmMetrics:       38 + 4*len(agents),
		CustomMetrics:      14,
		Dashboards:         1,
		KMSKeys:            2,
		// Order events: the Notifier. Alerts: the Scheduler, the Agents,
		// the Supervisor, its fast path and CloudWatch alarms.
		TopicPublishers: map[string]int{"order events": 1, "alerts": 4 + len(agents)},
		DataKeyReuse:    5 * time.Minute,
	}
}

// FixedLine is one fixed cost a month.
type FixedLine struct {
	Item        string
	Unit        string
	PerMonth    float64
	USDPerMonth float64
}

// Fixed is the stack's fixed monthly cost, line by line.
func Fixed(p Prices, a Assumptions, f FixedParams) []FixedLine {
	runs := float64(f.SupervisorRuns)
	sweep := billedSeconds(f.SupervisorDuration.Seconds())
	gbs := runs * sweep * a.memoryGB(Supervisor)
	polls := idlePolls(f)
	kms := kmsRequests(f)
	return []FixedLine{
		{"Supervisor schedule: Lambda requests", "requests", runs, runs * p.LambdaRequestsPerMillion / 1e6},
		{fmt.Sprintf("Supervisor schedule: Lambda duration (%v a sweep)", f.SupervisorDuration), "GB-s", gbs, gbs * p.LambdaGBSecond},
		{"Supervisor schedule: in-flight index Query", "RRU", runs * f.SupervisorRRU, runs * f.SupervisorRRU * p.DynamoDBRRUPerMillion / 1e6},
		{fmt.Sprintf("SQS idle long polls (%d pollers, %v each)", pollers(f), f.LongPollWait), "requests", polls, polls * p.SQSRequestsPerMillion / 1e6},
		{"CloudWatch alarms", "alarm metrics", float64(f.AlarmMetrics), float64(f.AlarmMetrics) * p.AlarmMonth},
		{"CloudWatch custom metrics", "metrics", float64(f.CustomMetrics), float64(f.CustomMetrics) * p.CustomMetricMonth},
		{"CloudWatch dashboards", "dashboards", float64(f.Dashboards), float64(f.Dashboards) * p.DashboardMonth},
		{"KMS customer managed keys", "keys", float64(f.KMSKeys), float64(f.KMSKeys) * p.KMSKeyMonth},
		{"KMS requests (SNS data keys, R = B/D × 2P per topic)", "requests", kms, kms * p.KMSRequestsPer10k / 1e4},
		// A sweep records segments only for the recorded orders it
		// recovers, in their traces: no fixed X-Ray cost.
	}
}

// FixedTotal is the dollars a month of lines.
func FixedTotal(lines []FixedLine) float64 {
	t := 0.0
	for _, l := range lines {
		t += l.USDPerMonth
	}
	return t
}

func pollers(f FixedParams) int {
	n := 0
	for _, v := range f.IdlePollers {
		n += v
	}
	return n
}

// idlePolls is a month of ReceiveMessage requests: each poller makes one
// per long-poll wait.
func idlePolls(f FixedParams) float64 {
	if f.LongPollWait <= 0 {
		return 0
	}
	return float64(pollers(f)) * SecondsPerMonth / f.LongPollWait.Seconds()
}

// kmsRequests is R = B / D × 2P summed over the topics.
func kmsRequests(f FixedParams) float64 {
	if f.DataKeyReuse <= 0 {
		return 0
	}
	r := 0.0
	for _, p := range f.TopicPublishers {
		r += SecondsPerMonth / f.DataKeyReuse.Seconds() * 2 * float64(p)
	}
	return r
}
