package cost

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// HappyPath is the scenario the last line and the comparisons price.
const HappyPath = "happy path"

// Render prints, for each scenario, its table at both levels, then the
// fixed monthly costs, the alternatives, the assumptions and sources, and
// last the one line LastLine makes. The happy path is the scenario named
// HappyPath, or the first.
func Render(w io.Writer, scenarios []Usage, p Prices, a Assumptions, f FixedParams) error {
	if len(scenarios) == 0 {
		return errors.New("cost: no scenario to render")
	}
	happy := scenarios[0]
	for _, u := range scenarios {
		if u.Scenario == HappyPath {
			happy = u
			break
		}
	}
	ew := &errWriter{w: w}
	for _, u := range scenarios {
		renderScenario(ew, u, p, a)
	}
	renderSteps(ew, happy, p, a)
	renderFixed(ew, p, a, f)
	comps := Compare(happy, p, a)
	m := Model{Usage: happy, Assumptions: a, Fixed: f}
	out := m.Price(p)
	three := a
	three.SFNStandardTransitions = a.Steps + 1
	other := StepFunctionsStandard(taskSeconds(happy, a), p, three)
	other.Name += fmt.Sprintf(" counting %d transitions (entering the first state too; AWS does not say)", a.Steps+1)
	renderComparisons(ew, out.Reference, comps, other)
	renderLevers(ew, m, out, p)
	renderAssumptions(ew, p, a, f)
	fmt.Fprintln(ew, LastLine(Summary{
		USDPerMillion: out.Reference, WRUPerOrder: BilledWRUPerOrder(happy, a), SFNStandardPerMillion: comps[0].Total(),
		USDPerMillionAtMillionAMonth: out.MillionAMonth, FixedPerMonth: out.FixedMonth,
	}))
	return ew.err
}

// Summary is what the last line reports, for the happy path.
type Summary struct {
	// USDPerMillion is the variable dollars per million orders at the
	// reference rate, USDPerMillionAtMillionAMonth at a million orders a
	// month; FixedPerMonth the fixed dollars a month.
	USDPerMillion, USDPerMillionAtMillionAMonth, FixedPerMonth float64
	// WRUPerOrder is the billed write units of an order.
	WRUPerOrder float64
	// SFNStandardPerMillion is the Step Functions Standard comparison.
	SFNStandardPerMillion float64
}

// LastLine is the report's machine-read summary.
func LastLine(s Summary) string {
	return fmt.Sprintf("cost usd_per_million=%.2f wru_per_order=%.2f sfn_standard_usd_per_million=%.2f usd_per_million_1m_month=%.2f fixed_usd_per_month=%.2f",
		s.USDPerMillion, s.WRUPerOrder, s.SFNStandardPerMillion, s.USDPerMillionAtMillionAMonth, s.FixedPerMonth)
}

// renderLevers prints each lever and each other reading as before → after
// of the happy path at both levels and of the fixed costs.
func renderLevers(w io.Writer, m Model, base Outcome, p Prices) {
	row := func(tw io.Writer, name string, after Outcome, kept string) {
		fmt.Fprintf(tw, "%s\t%.2f → %.2f\t%.2f → %.2f\t%.2f → %.2f\t%s\n", name,
			base.Reference, after.Reference, base.MillionAMonth, after.MillionAMonth, base.FixedMonth, after.FixedMonth, kept)
	}
	fmt.Fprintln(w, "== levers: the happy path with one change, before → after ==")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "lever\t$/M at %s\t$/M at %s\tfixed $/month\tin the stack?\n", Reference.Name, MillionAMonth.Name)
	for _, l := range Levers() {
		row(tw, l.Name, l.Apply(m).Price(p), l.Kept)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== other readings of what AWS does not document, before → after ==")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "reading\t$/M at %s\t$/M at %s\tfixed $/month\t\n", Reference.Name, MillionAMonth.Name)
	for _, r := range Readings() {
		row(tw, r.Name, r.Apply(m).Price(p), "")
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func renderScenario(w io.Writer, u Usage, p Prices, a Assumptions) {
	fmt.Fprintf(w, "== %s: %d orders, variable cost per order ==\n", u.Scenario, u.Orders)
	for _, l := range Levels() {
		fmt.Fprintf(w, "-- %s --\n", l.describe(u))
		renderLines(w, Price(u, l, p, a).Lines)
	}
}

// renderSteps prints what each step of the happy path costs, at both
// levels: its own Agent's lines by service, measured apart, and its even
// share of the rest (StepCosts).
func renderSteps(w io.Writer, u Usage, p Prices, a Assumptions) {
	if len(u.Steps) == 0 {
		return
	}
	fmt.Fprintf(w, "== %s by step, $ per million orders: each step's own Agent measured apart, the rest of the order split evenly among its %d steps ==\n", u.Scenario, len(u.Steps))
	for _, l := range Levels() {
		fmt.Fprintf(w, "-- %s --\n", l.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "step\tkind\tLambda\tSQS\tDynamoDB\tS3\tlogs\town\tshared\ttotal")
		for _, r := range StepCosts(u, l, p, a) {
			kind := "HTTP"
			if r.Code {
				kind = "code"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n", r.Step, kind,
				r.Service("Lambda"), r.Service("SQS"), r.Service("DynamoDB"), r.Service("S3"), r.Service("CloudWatch Logs"),
				r.OwnTotal(), r.Shared, r.Total())
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// renderLines is a service | units per order | $ per million orders table
// with its total.
func renderLines(w io.Writer, lines []Line) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "service\tunits per order\t$ per million orders")
	for _, l := range lines {
		fmt.Fprintf(tw, "%s %s\t%.4g %s\t%.4f\n", l.Service, l.Item, l.PerOrder, l.Unit, l.USDPerMillion)
	}
	fmt.Fprintf(tw, "total\t\t%.2f\n", total(lines))
	tw.Flush()
	fmt.Fprintln(w)
}

func renderFixed(w io.Writer, p Prices, a Assumptions, f FixedParams) {
	fmt.Fprintln(w, "== fixed monthly costs (30-day month, whatever the traffic) ==")
	lines := Fixed(p, a, f)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "item\tunits per month\t$ per month")
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%.0f %s\t%.4f\n", l.Item, l.PerMonth, l.Unit, l.USDPerMonth)
	}
	fmt.Fprintf(tw, "total\t\t%.2f\n", FixedTotal(lines))
	tw.Flush()
	fmt.Fprintln(w)
}

// renderComparisons prints a summary table, then each alternative's lines.
func renderComparisons(w io.Writer, ours float64, comps []Comparison, reading Comparison) {
	fmt.Fprintf(w, "== the same workflow elsewhere, at %s ==\n", Reference.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "alternative\t$ per million orders\tsource")
	fmt.Fprintf(tw, "this stack (happy path, variable cost)\t%.2f\tthe tables above\n", ours)
	for _, c := range comps {
		fmt.Fprintf(tw, "%s\t%.2f\t%s\n", c.Name, c.Total(), c.Source)
	}
	fmt.Fprintf(tw, "%s\t%.2f\t%s\n", reading.Name, reading.Total(), reading.Source)
	tw.Flush()
	fmt.Fprintln(w)
	for _, c := range comps {
		fmt.Fprintf(w, "-- %s --\n", c.Name)
		renderLines(w, c.Lines)
	}
}

func renderAssumptions(w io.Writer, p Prices, a Assumptions, f FixedParams) {
	fmt.Fprintln(w, "== assumptions ==")
	for _, s := range assumptionNotes(a, f) {
		fmt.Fprintln(w, "- "+s)
	}
	fmt.Fprintf(w, "== prices: %s, on-demand list prices, arm64, no free tier, checked %s ==\n", p.Region, p.Checked)
	for _, s := range Sources() {
		fmt.Fprintf(w, "- %s (source: %s)\n", s.Prices, s.Page)
	}
	fmt.Fprintln(w)
}

// assumptionNotes say in words what the tables assume.
func assumptionNotes(a Assumptions, f FixedParams) []string {
	return []string{
		fmt.Sprintf("remote latency: %v a remote call (the local remote answers at once); an Agent works up to %d records of a batch at once, so a full batch waits one latency, a lone record its own", a.RemoteLatency, a.AgentConcurrency),
		fmt.Sprintf("function memory: %s (others %d MB); Lambda duration is each function's mean invocation rounded up to 1 ms", memoryText(a), DefaultMemoryMB),
		fmt.Sprintf("batching at %s: every SQS batch full (scheduler and agent batch sizes from shared/topology), one ReceiveMessage and one DeleteMessageBatch per batch, each received batch one 64 KiB chunk; at %s every record is its own invocation, receive and delete", Reference.Name, MillionAMonth.Name),
		fmt.Sprintf("Notifier stream batches: shards = max(1, ceil(stream records a second / %d)); records per invocation = min(%d, max(1, stream records a second / (%d polls a second × shards))); each PublishBatch carries min(10, the events of one invocation); Lambda's stream reads are free", StreamWritesPerShard, StreamBatchSize, StreamPollsPerSecond),
		fmt.Sprintf("logs: %d B of API access log a request; %d B of Lambda platform lines an invocation (system log level INFO: platform.start and platform.report); 1 GB = 2^30 bytes; log storage not priced", a.AccessLogBytes, a.PlatformLogBytes),
		fmt.Sprintf("tracing: %.3g of orders recorded (TRACE_SAMPLE_RATE), each one X-Ray trace of the functions' own segments (Lambda's tracing is PassThrough and records nothing); PutTraceSegments assumed to take %v a request", a.TraceSampleRate, a.XRayRequestLatency),
		fmt.Sprintf("cold starts: init phase %v (ASSUMPTION) billed per cold start; an environment idle %v or alive %v is replaced (ASSUMPTIONS: AWS documents neither); the readings table prices every invocation cold", a.InitDuration, a.IdleEnvironmentLife, a.EnvironmentLife),
		fmt.Sprintf("DynamoDB: a transaction's index writes %s; the readings table prices the other reading", a.TransactionIndexWrites),
		fmt.Sprintf("fixed: %d Supervisor runs a month of %v each, %d idle SQS pollers long-polling %v, %d alarm metrics, %d custom metrics, %d dashboard, %d KMS keys; a month is 30 days", f.SupervisorRuns, f.SupervisorDuration, pollers(f), f.LongPollWait, f.AlarmMetrics, f.CustomMetrics, f.Dashboards, f.KMSKeys),
		fmt.Sprintf("alternatives: %d Standard state transitions an order (AWS bills one \"each time a step of your workflow is executed\"; one more is printed beside it); Express billed at %d MB and rounded up to 100 ms; durable: %d operations (start + a step each), %d B written each, kept %d days; each task at the Agent's memory and per-record handler time plus one remote call; %d status events and %.0f WRU of order record each", a.SFNStandardTransitions, a.ExpressMemoryMB, a.DurableOperations, a.DurableBytesPerOperation, a.DurableRetentionDays, a.StatusEvents, a.OrderRecordWRU),
		"by step: a step's own lines are its Agent's invocations (one function, one queue), the pollers' receives and deletes of its queue and the requests its invocations made (its reply; a code step's ledger reads and writes, on the ledger table, and its S3 requests), all measured per step; the rest of the order (API, Submission, Scheduler, state and orders tables, Notifier, Timer, Deadline, SNS, function logs, traces) is an ALLOCATION, split evenly among the steps, since a Scheduler batch or a stream record is not measured per step",
		"not priced: data transfer, DynamoDB and log storage, S3 storage of a code step's objects, SNS deliveries to the clients' SQS queues (free) and those queues",
	}
}

func memoryText(a Assumptions) string {
	if len(a.MemoryMB) == 0 {
		return "every function the default"
	}
	parts := make([]string, 0, len(a.MemoryMB))
	for _, k := range sortedKeys(a.MemoryMB) {
		parts = append(parts, fmt.Sprintf("%s %d MB", k, a.MemoryMB[k]))
	}
	return strings.Join(parts, ", ")
}

// errWriter keeps the first write error, so Render can print freely and
// report once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}
