package cost

import "maps"

// Model is everything a price depends on: one scenario's measurements and
// the assumptions and fixed parameters they are priced with. A Lever
// changes a copy of it.
type Model struct {
	Usage       Usage
	Assumptions Assumptions
	Fixed       FixedParams
}

// clone deep-copies the maps a lever may change.
func (m Model) clone() Model {
	c := m
	u := &c.Usage
	u.Records, u.Invocations, u.HandlerTime = maps.Clone(u.Records), maps.Clone(u.Invocations), maps.Clone(u.HandlerTime)
	u.Requests, u.Billed, u.Entries = maps.Clone(u.Requests), maps.Clone(u.Billed), maps.Clone(u.Entries)
	u.LogBytes, u.WarnLogBytes = maps.Clone(u.LogBytes), maps.Clone(u.WarnLogBytes)
	c.Assumptions.MemoryMB = maps.Clone(c.Assumptions.MemoryMB)
	c.Fixed.IdlePollers = maps.Clone(c.Fixed.IdlePollers)
	return c
}

// Outcome is a model's three figures: the variable dollars per million
// orders at both levels and the fixed dollars a month.
type Outcome struct {
	Reference, MillionAMonth, FixedMonth float64
}

// Price is m's Outcome at prices p.
func (m Model) Price(p Prices) Outcome {
	return Outcome{
		Reference:     Price(m.Usage, Reference, p, m.Assumptions).Total(),
		MillionAMonth: Price(m.Usage, MillionAMonth, p, m.Assumptions).Total(),
		FixedMonth:    FixedTotal(Fixed(p, m.Assumptions, m.Fixed)),
	}
}

// Lever is one change to the deployment, priced against the deployment as
// it is.
type Lever struct {
	Name string
	// Kept says whether the stack makes this change, and why or why not.
	Kept  string
	apply func(*Model)
}

// Apply is m with the lever pulled.
func (l Lever) Apply(m Model) Model {
	c := m.clone()
	l.apply(&c)
	return c
}

// Levers are the changes the report prices at low volume and at the
// reference rate.
func Levers() []Lever {
	return []Lever{
		{"application log level WARN (only WARN and ERROR lines)", "no: the transition metrics and the runbooks read the INFO lines",
			func(m *Model) { m.Usage.LogBytes = m.Usage.WarnLogBytes }},
		{"Lambda system log level WARN (no platform.start or platform.report lines)", "no: platform.report's maxMemoryUsedMB and billedDurationMs size the functions' memory",
			func(m *Model) { m.Assumptions.PlatformLogBytes = 0 }},
		{"Agents' event source mappings without maximum concurrency (2 idle pollers each, not 5)", "no: maximum concurrency is what keeps the remote services within their limits",
			func(m *Model) {
				for q := range m.Fixed.IdlePollers {
					if m.Fixed.IdlePollers[q] > 2 {
						m.Fixed.IdlePollers[q] = 2
					}
				}
			}},
		{"no fast path (no Timer, deadline queue or Deadline function): recovery waits for the minute's sweep", "no: recovery within seconds of CompleteBy, not up to a minute after",
			func(m *Model) {
				u := &m.Usage
				for _, fn := range []string{Timer, Deadline} {
					delete(u.Records, fn)
					delete(u.HandlerTime, fn)
					delete(u.LogBytes, fn)
					delete(u.WarnLogBytes, fn)
				}
				delete(u.Requests, sendBatch)
				delete(u.Billed, sendBatch)
				delete(u.Entries, sendBatch)
				delete(m.Fixed.IdlePollers, "deadline queue")
			}},
		{"1 s batching window on the SQS mappings", "no: it adds up to a second to every hop of every order",
			func(m *Model) { m.Assumptions.BatchingWindow = 1e9 }},
		{"the Notifier and the Timer as one stream reader", "not yet: one reader's failure would hold back the other's records; the largest saving left at low volume",
			func(m *Model) {
				u := &m.Usage
				u.HandlerTime[Notifier] += u.HandlerTime[Timer]
				u.LogBytes[Notifier] += u.LogBytes[Timer]
				delete(u.Records, Timer)
				delete(u.HandlerTime, Timer)
				delete(u.LogBytes, Timer)
			}},
		{"the Supervisor at 128 MB", "no: a sweep of a full page of expired records needs the headroom",
			func(m *Model) { m.Assumptions.MemoryMB[Supervisor] = 128 }},
		{"every function at 256 MB", "no: the handlers wait on I/O, so more memory buys no shorter duration (REPORT lines)",
			func(m *Model) {
				for fn := range m.Assumptions.MemoryMB {
					m.Assumptions.MemoryMB[fn] = 256
				}
			}},
		{"Lambda's active tracing on every function instead of per-order segments", "no: a trace per sampled invocation, none of them an order's path",
			func(m *Model) { m.Assumptions.ActiveTracing = true }},
		{"every order traced (TRACE_SAMPLE_RATE=1)", "no: 1% keeps a recent trace at every volume",
			func(m *Model) { m.Assumptions.TraceSampleRate = 1 }},
	}
}

// Readings are the other readings of what AWS does not document, priced
// beside the ones the model uses, as levers the deployment cannot pull.
func Readings() []Lever {
	return []Lever{
		{Name: "every invocation a cold start (AWS documents no environment lifetime)", apply: func(m *Model) { m.Assumptions.EveryInvocationCold = true }},
		{Name: "a transaction's index writes billed twice (DynamoDB Local's count; AWS documents none)", apply: func(m *Model) { m.Assumptions.TransactionIndexWrites = IndexWritesTwice }},
	}
}
