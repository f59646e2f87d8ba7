package cost

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestLastLine(t *testing.T) {
	tests := []struct {
		s    Summary
		want string
	}{
		{Summary{12.034, 22.646, 14.714, 10, 79.8467}, "cost usd_per_million=12.03 wru_per_order=10.00 sfn_standard_usd_per_million=79.85 usd_per_million_1m_month=22.65 fixed_usd_per_month=14.71"},
		{Summary{}, "cost usd_per_million=0.00 wru_per_order=0.00 sfn_standard_usd_per_million=0.00 usd_per_million_1m_month=0.00 fixed_usd_per_month=0.00"},
	}
	for _, tt := range tests {
		if got := LastLine(tt.s); got != tt.want {
			t.Errorf("LastLine(%+v) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestRenderEndsWithTheLastLine(t *testing.T) {
	retried := tenOrders()
	retried.Scenario = "one retried step"
	retried.WRU = map[string]float64{"state": 100}
	happy := tenOrders()
	// The happy path is found by name, not by position.
	scenarios := []Usage{retried, happy}
	var out bytes.Buffer
	p, a := ListPrices(), DefaultAssumptions()
	if err := Render(&out, scenarios, p, a, referenceFixed()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	f := referenceFixed()
	want := LastLine(Summary{
		USDPerMillion: Price(happy, Reference, p, a).Total(), USDPerMillionAtMillionAMonth: Price(happy, MillionAMonth, p, a).Total(),
		FixedPerMonth: FixedTotal(Fixed(p, a, f)), WRUPerOrder: BilledWRUPerOrder(happy, a), SFNStandardPerMillion: Compare(happy, p, a)[0].Total(),
	})
	if !strings.HasSuffix(text, "\n"+want+"\n") {
		t.Errorf("output does not end with %q:\n%s", want, text)
	}
	if n := strings.Count(text, "cost usd_per_million="); n != 1 {
		t.Errorf("%d last lines", n)
	}
	for _, s := range []string{"== one retried step", "== happy path", MillionAMonth.Name, "== fixed monthly costs", "Step Functions Standard", "checked 2026-11-26", "remote latency", "== levers", "== other readings", fmt.Sprintf("counting %d transitions", a.Steps+1)} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if strings.Contains(text, "http") {
		t.Error("the printed report links outside")
	}
}

func TestRenderErrors(t *testing.T) {
	if err := Render(&bytes.Buffer{}, nil, ListPrices(), DefaultAssumptions(), referenceFixed()); err == nil {
		t.Error("no error without scenarios")
	}
	boom := errors.New("disk full")
	err := Render(failingWriter{boom}, []Usage{tenOrders()}, ListPrices(), DefaultAssumptions(), referenceFixed())
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }
