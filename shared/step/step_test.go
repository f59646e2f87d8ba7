package step_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
)

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	for _, tt := range []struct {
		name                 string
		err                  error
		permanent, uncertain bool
		text                 string
	}{
		{"nil", nil, false, false, ""},
		{"plain is transient", base, false, false, "boom"},
		{"Transient changes nothing", step.Transient(base), false, false, "boom"},
		{"permanent", step.Permanent(base), true, false, "permanent: boom"},
		{"wrapped permanent", fmt.Errorf("ship: %w", step.Permanent(base)), true, false, "ship: permanent: boom"},
		{"uncertain", step.Uncertain(base), false, true, "boom (the remote may have applied it)"},
		{"both", step.Permanent(step.Uncertain(base)), true, true, "permanent: boom (the remote may have applied it)"},
		{"reject", step.Reject("no_address", "none given"), true, false, "permanent: no_address: none given"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := step.IsPermanent(tt.err); got != tt.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tt.permanent)
			}
			if got := step.IsUncertain(tt.err); got != tt.uncertain {
				t.Errorf("IsUncertain = %v, want %v", got, tt.uncertain)
			}
			if tt.err != nil && tt.err.Error() != tt.text {
				t.Errorf("text %q, want %q", tt.err.Error(), tt.text)
			}
		})
	}
}

func TestMarksKeepTheChainAndDoNotRepeat(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	p := step.Permanent(base)
	if !errors.Is(p, base) {
		t.Error("Permanent lost its error from the chain")
	}
	if step.Permanent(p) != p || step.Permanent(nil) != nil || step.Uncertain(nil) != nil {
		t.Error("a mark is added twice, or to nil")
	}
	u := step.Uncertain(base)
	if step.Uncertain(u) != u {
		t.Error("Uncertain marked twice")
	}
}

func TestRejectCarriesItsFault(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("ship: %w", step.Reject("carrier_refused", "no service to the island"))
	var f step.Faulter
	if !errors.As(err, &f) {
		t.Fatal("Reject's error has no Faulter in its chain")
	}
	if got, want := f.Fault(), (message.Fault{Code: "carrier_refused", Message: "no service to the island"}); got != want {
		t.Errorf("Fault() = %+v, want %+v", got, want)
	}
}

func TestDecodeInputIsStrictAndPermanent(t *testing.T) {
	t.Parallel()
	type order struct {
		OrderID string `json:"orderId"`
	}
	for _, tt := range []struct {
		name, input string
		ok          bool
	}{
		{"exact", `{"orderId":"o-1"}`, true},
		{"unknown member", `{"orderId":"o-1","extra":1}`, false},
		{"trailing data", `{"orderId":"o-1"} {}`, false},
		{"not JSON", `{"orderId":`, false},
		{"wrong type", `{"orderId":1}`, false},
		{"empty", ``, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var o order
			err := step.Request{OrderID: "o-1", Step: "ship-order", Input: json.RawMessage(tt.input)}.DecodeInput(&o)
			if tt.ok != (err == nil) {
				t.Fatalf("DecodeInput(%s) = %v, want ok %v", tt.input, err, tt.ok)
			}
			if err != nil && (!step.IsPermanent(err) || !strings.Contains(err.Error(), "ship-order")) {
				t.Fatalf("DecodeInput's refusal %v is not permanent, or names not the step", err)
			}
			if err == nil && o.OrderID != "o-1" {
				t.Fatalf("decoded %+v", o)
			}
		})
	}
}

func TestOutput(t *testing.T) {
	t.Parallel()
	out, err := step.Output(map[string]string{"label": "<a&b>"})
	if err != nil || string(out) != `{"label":"<a&b>"}` {
		t.Fatalf("Output = %s, %v; want the value unescaped", out, err)
	}
	if _, err := step.Output(math.Inf(1)); !step.IsPermanent(err) {
		t.Fatalf("Output of a value JSON cannot hold: %v, want permanent", err)
	}
}

func TestFuncIsAStep(t *testing.T) {
	t.Parallel()
	var s step.Step = step.Func(func(_ context.Context, req step.Request) (json.RawMessage, error) {
		return json.RawMessage(`"` + req.OrderID + `"`), nil
	})
	if out, err := s.Do(context.Background(), step.Request{OrderID: "o-9"}); err != nil || string(out) != `"o-9"` {
		t.Fatalf("Do = %s, %v", out, err)
	}
}
