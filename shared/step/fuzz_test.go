package step_test

import (
	"encoding/json"
	"testing"

	"github.com/sasflow/sas/shared/step"
)

// FuzzDecodeInput: the input comes from outside (the order a client
// posted); DecodeInput accepts exactly what a strict decoder does, refuses
// the rest permanently, and never panics.
func FuzzDecodeInput(f *testing.F) {
	for _, seed := range []string{
		`{"orderId":"o-1","items":[{"sku":"A","quantity":1}]}`,
		`{"orderId":"o-1","extra":true}`,
		`{"orderId":"o-1"} []`,
		`{"items":[{"sku":"A","quantity":-1}]}`,
		`null`, ``, `{`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	type item struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	}
	type order struct {
		OrderID string `json:"orderId"`
		Items   []item `json:"items"`
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		var o order
		err := step.Request{Step: "ship-order", Input: json.RawMessage(input)}.DecodeInput(&o)
		if err != nil {
			if !step.IsPermanent(err) {
				t.Fatalf("a refusal that is not permanent: %v", err)
			}
			return
		}
		if !json.Valid(input) {
			t.Fatalf("accepted input that is not JSON: %q", input)
		}
		// What it accepts re-encodes to a value that decodes the same.
		again, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var back order
		if err := (step.Request{Input: again}).DecodeInput(&back); err != nil {
			t.Fatalf("the re-encoded input %s is refused: %v", again, err)
		}
	})
}
