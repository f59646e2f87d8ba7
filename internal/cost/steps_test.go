package cost

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// threeSteps is tenOrders as an order of three steps: two HTTP steps,
// then a code step whose Agent writes the ledger twice, reads it never
// and puts one S3 object per order.
func threeSteps() Usage {
	u := tenOrders()
	u.Records[Agent] = 30
	u.HandlerTime[Agent] = 150 * time.Millisecond
	u.Requests["S3 PutObject"] = 10
	u.WRU["ledger"] = 20
	reply := func() map[string]int { return map[string]int{"SQS SendMessage": 10} }
	http := func(name string) StepUsage {
		return StepUsage{Name: name, Records: 10, HandlerTime: 45 * time.Millisecond, RemoteCalls: 10, Requests: reply(), Billed: reply()}
	}
	u.Steps = []StepUsage{http("reserve-inventory"), http("charge-payment"), {
		Name: "ship-order", Code: true, Records: 10, HandlerTime: 60 * time.Millisecond,
		Requests: map[string]int{"SQS SendMessage": 10, "DynamoDB UpdateItem": 20, "S3 PutObject": 10}, Billed: reply(),
		WRU: map[string]float64{"ledger": 20},
	}}
	return u
}

// TestStepCosts: each step's own lines are its Agent's, measured apart;
// the code step's add the ledger's writes and its PutObject; the rest is
// split evenly, so the rows add up to the order's bill.
func TestStepCosts(t *testing.T) {
	u, p, a := threeSteps(), ListPrices(), DefaultAssumptions()
	for _, l := range Levels() {
		rows := StepCosts(u, l, p, a)
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows, want 3", l.Name, len(rows))
		}
		sum := 0.0
		for _, r := range rows {
			sum += r.Total()
			if r.Shared != rows[0].Shared {
				t.Errorf("%s: %s's share %g, %s's %g: want the rest split evenly", l.Name, r.Step, r.Shared, rows[0].Step, rows[0].Shared)
			}
		}
		if want := Price(u, l, p, a).Total(); !near(sum, want) {
			t.Errorf("%s: rows add up to %g, the order costs %g", l.Name, sum, want)
		}
		charge, ship := rows[1], rows[2]
		tests := []struct {
			name      string
			got, want float64
		}{
			// A step's reply: one SendMessage an order.
			{"charge-payment SQS", find(t, charge.Own, "SQS", "handlers'").PerOrder, 1},
			{"ship-order SQS", find(t, ship.Own, "SQS", "handlers'").PerOrder, 1},
			// Two ledger writes an order, at $0.625 per million WRU.
			{"ship-order ledger", ship.Service("DynamoDB"), 2 * 0.625},
			{"charge-payment ledger", charge.Service("DynamoDB"), 0},
			// One PutObject an order at $0.005 per 1,000.
			{"ship-order S3", ship.Service("S3"), 5},
			{"charge-payment S3", charge.Service("S3"), 0},
			// One record an invocation at a million a month: 4.5 ms of
			// handler (5 billed) and 100 ms of remote latency, at the
			// Agent's memory.
			{"charge-payment duration", find(t, charge.Own, "Lambda", "duration: measured").PerOrder + find(t, charge.Own, "Lambda", "duration: remote").PerOrder, 0.105 * a.memoryGB(Agent)},
		}
		for _, tt := range tests {
			if l.Name == MillionAMonth.Name || tt.name != "charge-payment duration" {
				if !near(tt.got, tt.want) {
					t.Errorf("%s: %s = %g, want %g", l.Name, tt.name, tt.got, tt.want)
				}
			}
		}
		for _, line := range ship.Own {
			if line.Service == "Lambda" && strings.HasPrefix(line.Item, "duration: remote") {
				t.Errorf("%s: the code step waits on no remote: %+v", l.Name, line)
			}
		}
	}
}

// TestStepCostsWithoutSteps: a run measured without steps has no rows.
func TestStepCostsWithoutSteps(t *testing.T) {
	if rows := StepCosts(tenOrders(), Reference, ListPrices(), DefaultAssumptions()); rows != nil {
		t.Errorf("rows %+v, want none", rows)
	}
}

// TestS3Lines: PUT-class requests at $0.005 per 1,000, the others at
// $0.0004, deletes free.
func TestS3Lines(t *testing.T) {
	u := Usage{Orders: 10, Requests: map[string]int{
		"S3 PutObject": 10, "S3 ListObjectsV2": 10, "S3 GetObject": 20, "S3 HeadObject": 10, "S3 DeleteObject": 30, "SQS SendMessage": 50,
	}}
	lines := s3Lines(u, ListPrices())
	tests := []struct {
		item            string
		perOrder, usdPM float64
	}{
		{"PUT", 2, 10},
		{"GET", 3, 1.2},
	}
	for i, tt := range tests {
		l := lines[i]
		if l.Service != "S3" || l.Item[:len(tt.item)] != tt.item || !near(l.PerOrder, tt.perOrder) || !near(l.USDPerMillion, tt.usdPM) {
			t.Errorf("line %d = %+v, want %s %g a order, $%g per million", i, l, tt.item, tt.perOrder, tt.usdPM)
		}
	}
}

// TestRenderPrintsTheStepRows: the report has the happy path's rows by
// step, at both levels, each step with its kind, before the last line.
func TestRenderPrintsTheStepRows(t *testing.T) {
	var out bytes.Buffer
	if err := Render(&out, []Usage{threeSteps()}, ListPrices(), DefaultAssumptions(), referenceFixed()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	i := strings.Index(text, "== happy path by step")
	if i < 0 || i > strings.LastIndex(text, "cost usd_per_million=") {
		t.Fatalf("no step rows before the last line:\n%s", text)
	}
	section := text[i:]
	section = section[:strings.Index(section, "== fixed")]
	for _, want := range []string{"-- " + Reference.Name, "-- " + MillionAMonth.Name} {
		if !strings.Contains(section, want) {
			t.Errorf("the step rows lack %q:\n%s", want, section)
		}
	}
	kinds := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Fields(line); len(f) > 2 {
			kinds[f[0]] = f[1]
		}
	}
	if kinds["charge-payment"] != "HTTP" || kinds["ship-order"] != "code" {
		t.Errorf("kinds %v, want charge-payment HTTP, ship-order code:\n%s", kinds, section)
	}
}
