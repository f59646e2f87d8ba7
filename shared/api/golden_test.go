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

// TestWireTypes holds each wire type to its golden documents and, for the
// documents a client reads, holds its decoder to them: what the servers
// write, the clients' decoders accept, losing nothing.
func TestWireTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		check  func(testing.TB, string, string)
		decode func(t *testing.T, doc []byte) (any, error) // nil: no client reads it alone
	}{
		{"order", kit.CheckType[api.Order], func(_ *testing.T, b []byte) (any, error) { return api.DecodeOrder(b) }},
		{"step-history", kit.CheckType[api.StepHistory], nil},
		{"order-summary", kit.CheckType[api.OrderSummary], nil},
		{"page", kit.CheckType[api.Page], func(t *testing.T, b []byte) (any, error) {
			p, raws, err := api.DecodePage(b)
			if err == nil && len(raws) != len(p.Orders) {
				t.Errorf("page.json: %d raw orders for %d orders", len(raws), len(p.Orders))
			}
			return p, err
		}},
		{"accepted", kit.CheckType[api.Accepted], func(_ *testing.T, b []byte) (any, error) { return api.DecodeAccepted(b) }},
		{"problem", kit.CheckType[api.Problem], func(_ *testing.T, b []byte) (any, error) {
			p, ok := api.DecodeProblem(b)
			if !ok {
				return nil, os.ErrInvalid
			}
			return p, nil
		}},
		{"workflows", kit.CheckType[api.Workflows], func(_ *testing.T, b []byte) (any, error) { return api.DecodeWorkflows(b) }},
		{"workflow-version", kit.CheckType[api.WorkflowVersion], nil},
		{"event", kit.CheckType[api.Event], func(_ *testing.T, b []byte) (any, error) { return api.DecodeEvent(string(b)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, "testdata", tc.name)
			if tc.decode == nil {
				return
			}
			doc := golden(t, tc.name+".json")
			v, err := tc.decode(t, doc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := kit.Marshal(t, v); !bytes.Equal(got, doc) {
				t.Errorf("decoded and written again:\n%s\nwant\n%s", got, doc)
			}
		})
	}
}

// TestGoldensAgree: the documents nest, so a member that changes in one must
// change in the others: the order holds the step history, the page the
// summary, and the summary is the order's without its history.
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
	var o api.Order
	if err := json.Unmarshal(golden(t, "order.json"), &o); err != nil {
		t.Fatal(err)
	}
	if got := kit.Marshal(t, o.Summary()); !bytes.Equal(got, golden(t, "order-summary.json")) {
		t.Errorf("order.json's summary is\n%s\nnot order-summary.json", got)
	}
}

// TestClientDocuments: a client's GET /orders/{id} and its listing are the
// operators' documents without the owner, its unique ID, the trace ID and
// the failure texts (lastError, a step's error and compensationError),
// which may quote what AWS or a remote service answered; the reasons stay.
// The client's decoders read them.
func TestClientDocuments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ operators, client string }{
		{"order.json", "client-order.json"},
		{"order-summary.json", "client-order-summary.json"},
	} {
		var doc map[string]any
		if err := json.Unmarshal(golden(t, tc.operators), &doc); err != nil {
			t.Fatal(err)
		}
		delete(doc, "owner")
		delete(doc, "ownerId")
		delete(doc, "lastError")
		delete(doc, "traceId")
		steps, _ := doc["steps"].([]any)
		for _, s := range steps {
			delete(s.(map[string]any), "error")
			delete(s.(map[string]any), "compensationError")
		}
		want, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(golden(t, tc.client), &got); err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(got); !bytes.Equal(b, want) {
			t.Errorf("%s is not %s without the owner and the failure texts:\n%s\nwant\n%s", tc.client, tc.operators, b, want)
		}
		if got["reason"] == nil || got["reasonText"] == nil {
			t.Errorf("%s shows no reason", tc.client)
		}
	}
	o, err := api.DecodeOrder(golden(t, "client-order.json"))
	if err != nil || o.LastError != "" || o.Owner != "" || o.OwnerID != "" || o.Reason == "" || o.Steps[1].CompensationReason == "" {
		t.Fatalf("DecodeOrder(client-order.json) = %+v, %v", o, err)
	}
}
