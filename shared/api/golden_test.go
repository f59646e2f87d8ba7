package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	kit "github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/api"
)

// The golden documents in testdata pin the wire types (see the golden kit
// for what each one holds); the servers' tests check that they write them
// for fixed records.

// golden returns testdata/name compacted, the bytes json.Marshal writes; the
// fuzzers here seed from it too.
func golden(tb testing.TB, name string) []byte {
	tb.Helper()
	return kit.Read(tb, filepath.Join("testdata", name))
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTypesKeepTheirGoldens holds each wire type to its golden documents.
func TestTypesKeepTheirGoldens(t *testing.T) {
	t.Parallel()
	for name, check := range map[string]func(testing.TB, string, string){
		"order":         kit.CheckType[api.Order],
		"step-history":  kit.CheckType[api.StepHistory],
		"order-summary": kit.CheckType[api.OrderSummary],
		"page":          kit.CheckType[api.Page],
		"accepted":      kit.CheckType[api.Accepted],
		"problem":       kit.CheckType[api.Problem],
		"event":         kit.CheckType[api.Event],
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t, "testdata", name)
		})
	}
}

// TestGoldensAgree: the documents nest, so a member that changes in one must
// change in the others: the order holds the step history, the page the
// summary.
func TestGoldensAgree(t *testing.T) {
	t.Parallel()
	var order struct{ Steps []json.RawMessage }
	var page struct{ Orders []json.RawMessage }
	if err := json.Unmarshal(golden(t, "order.json"), &order); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(golden(t, "page.json"), &page); err != nil {
		t.Fatal(err)
	}
	if step := golden(t, "step-history.json"); !slices.ContainsFunc(order.Steps, func(s json.RawMessage) bool { return bytes.Equal(s, step) }) {
		t.Errorf("order.json has no step like step-history.json")
	}
	if len(page.Orders) != 1 || !bytes.Equal(page.Orders[0], golden(t, "order-summary.json")) {
		t.Errorf("page.json's order is not order-summary.json")
	}
}

// TestDecodersReadTheGoldens: what the servers write, the clients' decoders
// accept, losing nothing.
func TestDecodersReadTheGoldens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		decode func([]byte) (any, error)
	}{
		{"order.json", func(b []byte) (any, error) { return api.DecodeOrder(b) }},
		{"page.json", func(b []byte) (any, error) {
			p, raws, err := api.DecodePage(b)
			if err == nil && len(raws) != len(p.Orders) {
				t.Errorf("page.json: %d raw orders for %d orders", len(raws), len(p.Orders))
			}
			return p, err
		}},
		{"accepted.json", func(b []byte) (any, error) { return api.DecodeAccepted(b) }},
		{"problem.json", func(b []byte) (any, error) {
			p, ok := api.DecodeProblem(b)
			if !ok {
				return nil, os.ErrInvalid
			}
			return p, nil
		}},
		{"event.json", func(b []byte) (any, error) { return api.DecodeEvent(string(b)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := golden(t, tc.name)
			v, err := tc.decode(doc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := mustMarshal(t, v); !bytes.Equal(got, doc) {
				t.Errorf("decoded and written again:\n%s\nwant\n%s", got, doc)
			}
		})
	}
}
