package cost

import (
	"math"
	"testing"
	"time"
)

func TestColdStarts(t *testing.T) {
	t.Parallel()
	a := DefaultAssumptions()
	a.IdleEnvironmentLife, a.EnvironmentLife = 5*time.Minute, 3*time.Hour
	// A trickle: one invocation an hour finds its environment gone.
	trickle := Level{OrdersPerSecond: 1.0 / 3600}
	if got := coldStarts(trickle, a, Scheduler, 1, 0.01); math.Abs(got-1) > 0.01 {
		t.Errorf("one an hour: %v cold starts an invocation, want about 1", got)
	}
	// A hundred a second: only the environments' replacement, one each
	// 3 hours of the 1 busy environment (100 × 10 ms).
	if got := coldStarts(Reference, a, Scheduler, 1, 0.01); !near(got, 1.0/(3*3600)/100) {
		t.Errorf("at 100/s: %v cold starts an order", got)
	}
	// The Agents' invocations spread over their functions, each colder.
	one, two := a, a
	one.Agents, two.Agents = 1, 2
	slow := Level{OrdersPerSecond: 1.0 / 600}
	if coldStarts(slow, two, Agent, 2, 0.1) <= coldStarts(slow, one, Agent, 2, 0.1) {
		t.Error("two Agents are no colder than one")
	}
	a.EveryInvocationCold = true
	if got := coldStarts(Reference, a, Scheduler, 1.5, 0.01); got != 1.5 {
		t.Errorf("the upper bound: %v, want every invocation", got)
	}
}

func TestBatchingWindowGathersRecords(t *testing.T) {
	t.Parallel()
	u := tenOrders() // 3 scheduler records an order
	a := DefaultAssumptions()
	a.BatchingWindow = time.Second
	// 0.386 orders a second × 3 records over 2 queues: 1 + 0.58 a batch.
	want := 1 + 3*MillionAMonth.OrdersPerSecond/2
	if got := recordsPerInvocation(u, MillionAMonth, a, Scheduler); !near(got, want) {
		t.Errorf("records a batch %v, want %v", got, want)
	}
	// Full batches stay full; without a window a trickle is one a batch.
	if got := recordsPerInvocation(u, Reference, a, Scheduler); got != 10 {
		t.Errorf("at 100/s: %v, want 10", got)
	}
	a.BatchingWindow = 0
	if got := recordsPerInvocation(u, MillionAMonth, a, Scheduler); got != 1 {
		t.Errorf("no window: %v, want 1", got)
	}
	// A window never makes a batch bigger than its size.
	a.BatchingWindow = time.Hour
	if got := recordsPerInvocation(u, MillionAMonth, a, Scheduler); got != 10 {
		t.Errorf("an hour's window: %v, want the batch size", got)
	}
}

func TestTransactionIndexWritesReadings(t *testing.T) {
	t.Parallel()
	u := Usage{Orders: 1, WRU: map[string]float64{"orders": 2, "orders/ByOwner": 2}, TransactionIndexWRU: map[string]float64{"orders/ByOwner": 2}}
	a := DefaultAssumptions()
	if got := BilledWRUPerOrder(u, a); got != 3 {
		t.Errorf("AWS's reading: %v WRU, want 3 (the index entry once)", got)
	}
	a.TransactionIndexWrites = IndexWritesTwice
	if got := BilledWRUPerOrder(u, a); got != 4 {
		t.Errorf("Local's reading: %v WRU, want 4", got)
	}
}

// TestEveryLeverMoves: a lever that changes nothing is a lever whose code
// does not reach the model.
func TestEveryLeverMoves(t *testing.T) {
	t.Parallel()
	u := tenOrders()
	u.Records[Timer] = u.Records[Notifier]
	u.HandlerTime[Timer] = u.HandlerTime[Notifier]
	u.WarnLogBytes = map[string]int64{Scheduler: 10}
	u.Tracing = Tracing{RecordedOrders: 10, Traces: 10, Requests: 40}
	u.TransactionIndexWRU = map[string]float64{"orders/ByOwner": u.WRU["orders/ByOwner"]}
	m := Model{Usage: u, Assumptions: DefaultAssumptions(), Fixed: DefaultFixed()}
	base := m.Price(ListPrices())
	for _, l := range append(Levers(), Readings()...) {
		after := l.Apply(m).Price(ListPrices())
		if after == base {
			t.Errorf("%q changes nothing", l.Name)
		}
	}
	if again := m.Price(ListPrices()); again != base {
		t.Error("a lever changed the model it was applied to")
	}
}
