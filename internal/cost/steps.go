package cost

import "time"

// StepRow is what one step of the order costs per million orders at a
// level: its own Agent's lines, measured apart, and its share of the rest.
type StepRow struct {
	Step string
	Code bool
	// Own are the lines of the step's Agent alone: its invocations (Lambda
	// requests, duration, the remote latency of an HTTP step, platform log
	// lines), the pollers' receives and deletes of its queue, the requests
	// it made (its reply, and a code step's ledger reads and writes and its
	// S3 requests). They are priced from the step's own measurement
	// (StepUsage), as one Agent function with one queue.
	Own []Line
	// Shared is the step's share of the rest of the order's bill: the API,
	// the Submission, the Scheduler's dispatches and state writes, the
	// Notifier, the Timer and the Deadline function, SNS, the functions'
	// own log lines and the traces. The measurement cannot tell which step
	// a Scheduler batch or a stream record worked for, so the rest is split
	// evenly among the steps (an ALLOCATION, not a measurement): every step
	// is one dispatch and one reply, and rows add up to the order's total.
	Shared float64
}

// OwnTotal is the dollars per million orders of the step's own lines.
func (r StepRow) OwnTotal() float64 { return total(r.Own) }

// Total is the step's cost per million orders, its share included.
func (r StepRow) Total() float64 { return r.OwnTotal() + r.Shared }

// Service is the dollars per million orders of the step's own lines of
// service ("Lambda", "SQS", "DynamoDB", "S3", "CloudWatch Logs").
func (r StepRow) Service(service string) float64 {
	t := 0.0
	for _, l := range r.Own {
		if l.Service == service {
			t += l.USDPerMillion
		}
	}
	return t
}

// StepCosts is what each of u's steps costs per million orders at l, in
// the workflow's order. The rows' totals add up to Price(u, l, p, a)'s.
func StepCosts(u Usage, l Level, p Prices, a Assumptions) []StepRow {
	if len(u.Steps) == 0 || u.Orders <= 0 {
		return nil
	}
	// One step is one Agent function with one queue, and makes none of the
	// Submission's admission reads.
	one := a
	one.Agents, one.AdmissionQueues = 1, 0
	rows := make([]StepRow, len(u.Steps))
	own := 0.0
	for i, s := range u.Steps {
		rows[i] = StepRow{Step: s.Name, Code: s.Code, Own: nonZero(Price(u.step(i), l, p, one).Lines)}
		own += rows[i].OwnTotal()
	}
	shared := (Price(u, l, p, a).Total() - own) / float64(len(rows))
	for i := range rows {
		rows[i].Shared = shared
	}
	return rows
}

// step is the usage of u's step i alone, over u's orders.
func (u Usage) step(i int) Usage {
	s := u.Steps[i]
	return Usage{
		Scenario: u.Scenario + ": " + s.Name, Orders: u.Orders,
		Requests: s.Requests, Billed: s.Billed, Entries: s.Entries,
		WRU: s.WRU, RRU: s.RRU, TransactionIndexWRU: s.TransactionIndexWRU,
		Records:     map[string]int{Agent: s.Records},
		HandlerTime: map[string]time.Duration{Agent: s.HandlerTime},
		RemoteCalls: s.RemoteCalls,
	}
}

// nonZero drops the lines a step has no units of.
func nonZero(lines []Line) []Line {
	out := lines[:0:0]
	for _, l := range lines {
		if l.PerOrder != 0 {
			out = append(out, l)
		}
	}
	return out
}
