package cost

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestLastLine(t *testing.T) {
	tests := []struct {
		x, y, z float64
		want    string
	}{
		{12.034, 10, 79.8467, "cost usd_per_million=12.03 wru_per_order=10.00 sfn_standard_usd_per_million=79.85"},
		{0, 0, 0, "cost usd_per_million=0.00 wru_per_order=0.00 sfn_standard_usd_per_million=0.00"},
		{1234.5678, 9.5, 75.001, "cost usd_per_million=1234.57 wru_per_order=9.50 sfn_standard_usd_per_million=75.00"},
	}
	for _, tt := range tests {
		if got := LastLine(tt.x, tt.y, tt.z); got != tt.want {
			t.Errorf("LastLine(%g, %g, %g) = %q, want %q", tt.x, tt.y, tt.z, got, tt.want)
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
	want := LastLine(Price(happy, Reference, p, a).Total(), 6, Compare(happy, p, a)[0].Total())
	if !strings.HasSuffix(text, "\n"+want+"\n") {
		t.Errorf("output does not end with %q:\n%s", want, text)
	}
	if n := strings.Count(text, "cost usd_per_million="); n != 1 {
		t.Errorf("%d last lines", n)
	}
	for _, s := range []string{"== one retried step", "== happy path", MillionAMonth.Name, "== fixed monthly costs", "Step Functions Standard", "checked 2026-11-23", "remote latency"} {
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
