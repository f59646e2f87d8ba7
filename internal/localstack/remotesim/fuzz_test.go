package remotesim_test

import (
	"math"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/localstack/remotesim"
)

// FuzzDecodeFaults: POST /v1/faults is outside input. A decoded
// configuration always validates and is accepted by SetFaults.
func FuzzDecodeFaults(f *testing.F) {
	f.Add(`{"transient":0.5,"latency":0.1,"latencyMin":"1ms","latencyMax":"2ms","rejectSteps":["charge-payment"],"seed":7}`)
	f.Add(`{"transient":1,"permanent":0}`)
	f.Add(`{"rejectUndo":["charge-payment"],"rejectSteps":["x"]}`)
	f.Add(`{"latencyMin":"-1s"}`)
	f.Add(`{"hang":NaN}`)
	f.Add(`{} {}`)
	f.Fuzz(func(t *testing.T, body string) {
		faults, err := remotesim.DecodeFaults(strings.NewReader(body))
		if err != nil {
			return
		}
		for _, p := range []float64{faults.Transient, faults.Permanent, faults.Hang, faults.ApplyThenFail, faults.Latency} {
			if math.IsNaN(p) || p < 0 || p > 1 {
				t.Fatalf("probability %v accepted", p)
			}
		}
		for _, s := range append(faults.RejectSteps, faults.RejectUndo...) {
			if s == "" || strings.ToLower(s) != s {
				t.Fatalf("step name %q accepted", s)
			}
		}
		if faults.LatencyMin < 0 || faults.LatencyMax < faults.LatencyMin {
			t.Fatalf("latency range %v..%v accepted", faults.LatencyMin, faults.LatencyMax)
		}
		if err := remotesim.New().SetFaults(faults); err != nil {
			t.Fatalf("SetFaults rejected a decoded configuration: %v", err)
		}
	})
}

// FuzzDecodeStepRequest: a step request body is outside input.
func FuzzDecodeStepRequest(f *testing.F) {
	f.Add(`{"orderId":"o1","step":"reserve-inventory","input":{"items":[]},"previous":{"a":{}}}`, "reserve-inventory")
	f.Add(`{"orderId":"o1","step":"x","input":null}`, "x")
	f.Add(`{"orderId":"","step":"x","input":1}`, "x")
	f.Fuzz(func(t *testing.T, body, step string) {
		req, err := remotesim.DecodeStepRequest(strings.NewReader(body), step)
		if err != nil {
			return
		}
		if req.Step != step || req.OrderID == "" || len(req.OrderID) > 64 || len(req.Input) == 0 {
			t.Fatalf("accepted %+v for step %q", req, step)
		}
	})
}

// FuzzDecodeCompensateRequest: a compensation request body is outside input.
func FuzzDecodeCompensateRequest(f *testing.F) {
	f.Add(`{"orderId":"o1","step":"reserve-inventory","effectKey":"o1/reserve-inventory","input":{"items":[]},"previous":{"a":{}}}`, "reserve-inventory")
	f.Add(`{"orderId":"o1","step":"x","effectKey":"","input":{}}`, "x")
	f.Add(`{"orderId":"o1","step":"x","effectKey":"k","input":null}`, "x")
	f.Add(`{"orderId":"o1","step":"x","input":{}}`, "x")
	f.Add(`{"orderId":"o1","step":"x","effectKey":"k","input":{},"extra":1}`, "x")
	f.Fuzz(func(t *testing.T, body, step string) {
		req, err := remotesim.DecodeCompensateRequest(strings.NewReader(body), step)
		if err != nil {
			return
		}
		if req.Step != step || req.OrderID == "" || len(req.OrderID) > 64 || len(req.Input) == 0 ||
			string(req.Input) == "null" || req.EffectKey == "" || len(req.EffectKey) > remotesim.MaxKeyBytes {
			t.Fatalf("accepted %+v for step %q", req, step)
		}
	})
}
