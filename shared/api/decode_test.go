package api_test

import (
	"bytes"
	"strings"
	"testing"

	kit "github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

func TestDecodePage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, err string
		n               int
		cursor          string
	}{
		{"empty last page", `{"orders":[]}`, "", 0, ""},
		{"with cursor and links", `{"orders":[{"orderId":"a-1","state":"Error","updatedAt":"2026-11-22T12:00:00Z"}],"nextCursor":"eyJrIjoxfQ","links":{"next":"/orders?cursor=eyJrIjoxfQ"}}`, "", 1, "eyJrIjoxfQ"},
		{"unknown fields are tolerated", `{"orders":[{"orderId":"a-1","state":"Error","newField":{"x":1}}],"count":1}`, "", 1, ""},
		{"null orders", `{"orders":null}`, "no orders array", 0, ""},
		{"not an object", `[]`, "cannot unmarshal array", 0, ""},
		{"null document", `null`, "no orders array", 0, ""},
		{"trailing data", `{"orders":[]} {}`, "invalid character", 0, ""},
		{"too large", `{"orders":[]}` + strings.Repeat(" ", api.MaxDocumentBytes), "exceeds", 0, ""},
		{"order ID with a slash", `{"orders":[{"orderId":"a/1","state":"Error"}]}`, `order 0: orderId "a/1" is not an order ID`, 0, ""},
		{"missing state", `{"orders":[{"orderId":"a-1"}]}`, `unknown state ""`, 0, ""},
		{"wrong type", `{"orders":[{"orderId":"a-1","state":"Error","failureCount":"3"}]}`, "cannot unmarshal string", 0, ""},
		{"bad time", `{"orders":[{"orderId":"a-1","state":"Error","updatedAt":"yesterday"}]}`, "order 0", 0, ""},
		{"empty cursor", `{"orders":[],"nextCursor":""}`, "nextCursor: length 0", 0, ""},
		{"cursor too long", `{"orders":[],"nextCursor":"` + strings.Repeat("a", 2049) + `"}`, "nextCursor: length", 0, ""},
		{"cursor with a newline", `{"orders":[],"nextCursor":"a\nb"}`, "not printable ASCII", 0, ""},
		{"cursor not a string", `{"orders":[],"nextCursor":7}`, "cannot unmarshal number", 0, ""},
		{"links not an object", `{"orders":[],"links":"next"}`, "cannot unmarshal string", 0, ""},
	} {
		p, raws, err := api.DecodePage([]byte(tc.body))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && (len(p.Orders) != tc.n || len(raws) != tc.n || p.NextCursor != tc.cursor):
			t.Errorf("%s: %d orders, %d raw, cursor %q", tc.name, len(p.Orders), len(raws), p.NextCursor)
		}
	}
}

func TestDecodeOrderAndAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, err string
	}{
		{"minimal", `{"orderId":"a-1","state":"Pending"}`, ""},
		{"unknown fields are tolerated", `{"orderId":"a-1","state":"Pending","newField":[1]}`, ""},
		{"order ID too long", `{"orderId":"` + strings.Repeat("a", 65) + `","state":"Pending"}`, "is not an order ID"},
		{"order ID with a control character", `{"orderId":"a\u001b1","state":"Pending"}`, "is not an order ID"},
		{"unknown state", `{"orderId":"a-1","state":"Lost"}`, `unknown state "Lost"`},
		{"not an object", `"a-1"`, "cannot unmarshal string"},
		{"trailing data", `{"orderId":"a-1","state":"Pending"}x`, "invalid character"},
		{"too large", `{"orderId":"a-1","state":"Pending"}` + strings.Repeat(" ", api.MaxDocumentBytes), "exceeds"},
	} {
		_, errOrder := api.DecodeOrder([]byte(tc.body))
		_, errAccepted := api.DecodeAccepted([]byte(tc.body))
		for what, err := range map[string]error{"DecodeOrder": errOrder, "DecodeAccepted": errAccepted} {
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%s: %s: %v", tc.name, what, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%s: %s: error %v, want %q", tc.name, what, err, tc.err)
			}
		}
	}
}

func TestDecodeWorkflows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, err string
		n               int
	}{
		{"none", `{"default":"order","workflows":[],"truncated":false}`, "", 0},
		{"unknown fields are tolerated", `{"workflows":[{"id":"order-v1","inFlight":2,"newField":[1]}],"count":1}`, "", 1},
		{"a version without the shape of one", `{"workflows":[{"id":"legacy","deployed":false,"inFlight":1}]}`, "", 1},
		{"null workflows", `{"workflows":null}`, "no workflows array", 0},
		{"no workflows", `{"default":"order"}`, "no workflows array", 0},
		{"not an object", `[]`, "cannot unmarshal array", 0},
		{"empty ID", `{"workflows":[{"id":""}]}`, "version 0: id: length 0", 0},
		{"ID with an escape", `{"workflows":[{"id":"order-v1\u001b[2J"}]}`, "not printable ASCII", 0},
		{"ID with a space", `{"workflows":[{"id":"order v1"}]}`, "not printable ASCII", 0},
		{"ID too long", `{"workflows":[{"id":"` + strings.Repeat("a", 65) + `"}]}`, "length 65", 0},
		{"default with a newline", `{"default":"a\nb","workflows":[]}`, "default", 0},
		{"negative count", `{"workflows":[{"id":"order-v1","needsOperator":-1}]}`, "negative", 0},
		{"count not a number", `{"workflows":[{"id":"order-v1","inFlight":"3"}]}`, "cannot unmarshal string", 0},
		{"too large", `{"workflows":[]}` + strings.Repeat(" ", api.MaxDocumentBytes), "exceeds", 0},
	} {
		w, err := api.DecodeWorkflows([]byte(tc.body))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && len(w.Workflows) != tc.n:
			t.Errorf("%s: %d versions, want %d", tc.name, len(w.Workflows), tc.n)
		}
	}
}

func TestDecodeProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, title string
		ok          bool
	}{
		{`{"type":"https://sasflow.dev/problems/conflict","title":"Conflict","status":409,"detail":"d","requestId":"r"}`, "Conflict", true},
		{`{"type":"about:blank","title":"Bad Request","status":400,"errors":[{"field":"limit","detail":"must be 1..100"}],"instance":"/x"}`, "Bad Request", true},
		{`{"status":403,"message":"Forbidden"}`, "", true}, // a problem, by its status
		{`{"message":"Forbidden"}`, "", false},             // API Gateway's own answer
		{`{"title":5}`, "", false},
		{`<html>`, "", false},
		{``, "", false},
		{`{"title":"T"}` + strings.Repeat(" ", api.MaxDocumentBytes), "", false},
	} {
		p, ok := api.DecodeProblem([]byte(tc.body))
		if ok != tc.ok || p.Title != tc.title {
			t.Errorf("DecodeProblem(%.60s) = %+v, %v", tc.body, p, ok)
		}
	}
}

// FuzzDecodeDocuments: the API's answers are outside input to a client. No
// decoder may panic; what one accepts holds the invariants it promises, and
// survives being written and read again unchanged.
func FuzzDecodeDocuments(f *testing.F) {
	for _, name := range []string{"order.json", "page.json", "accepted.json", "problem.json", "order-summary.json", "workflows.json"} {
		f.Add(golden(f, name))
	}
	// The goldens are the well-formed cases; these, the edges.
	for _, seed := range []string{
		`{"orders":[{"orderId":"a-1","state":"Error","newField":1}],"nextCursor":"c"}`,
		`{"orderId":"x","state":"Error","stepIndex":-5,"steps":[{"output":"\xff","startedAt":"0000-01-01T00:00:00+23:59"}]}`,
		`{"status":403,"message":"Forbidden","errors":[{"field":"f"}]}`,
		`{"orders":[null]}`, `{"orders":[],"links":null}`, `null`, `[]`, ``,
		`{"workflows":[{"id":"order-v1","inFlight":-1}]}`, `{"workflows":[{"id":"a b"}],"newField":1}`, `{"workflows":[null]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if o, err := api.DecodeOrder(body); err == nil {
			checkIdentity(t, o.OrderID, o.State)
			again, err := api.DecodeOrder(kit.Marshal(t, o))
			if err != nil || !bytes.Equal(kit.Marshal(t, again), kit.Marshal(t, o)) {
				t.Fatalf("order changed through JSON: %v", err)
			}
		}
		if p, raws, err := api.DecodePage(body); err == nil {
			if len(raws) != len(p.Orders) {
				t.Fatalf("%d orders, %d raw", len(p.Orders), len(raws))
			}
			for _, o := range p.Orders {
				checkIdentity(t, o.OrderID, o.State)
			}
			if strings.ContainsFunc(p.NextCursor, func(r rune) bool { return r <= ' ' || r > '~' }) {
				t.Fatalf("cursor %q accepted", p.NextCursor)
			}
			again, _, err := api.DecodePage(kit.Marshal(t, p))
			if err != nil || !bytes.Equal(kit.Marshal(t, again), kit.Marshal(t, p)) {
				t.Fatalf("page changed through JSON: %v", err)
			}
		}
		if w, err := api.DecodeWorkflows(body); err == nil {
			for _, v := range w.Workflows {
				if v.ID == "" || strings.ContainsFunc(v.ID+v.Name+w.Default, func(r rune) bool { return r <= ' ' || r > '~' }) ||
					v.InFlight < 0 || v.NeedsOperator < 0 || v.Version < 0 {
					t.Fatalf("version %+v accepted", v)
				}
			}
			again, err := api.DecodeWorkflows(kit.Marshal(t, w))
			if err != nil || !bytes.Equal(kit.Marshal(t, again), kit.Marshal(t, w)) {
				t.Fatalf("workflows changed through JSON: %v", err)
			}
		}
		if a, err := api.DecodeAccepted(body); err == nil {
			checkIdentity(t, a.OrderID, a.State)
		}
		if p, ok := api.DecodeProblem(body); ok {
			if p.Type == "" && p.Title == "" && p.Status == 0 && p.Detail == "" {
				t.Fatalf("empty problem accepted")
			}
			if again, ok := api.DecodeProblem(kit.Marshal(t, p)); !ok || !bytes.Equal(kit.Marshal(t, again), kit.Marshal(t, p)) {
				t.Fatalf("problem changed through JSON")
			}
		}
	})
}

func checkIdentity(t *testing.T, id string, state workflow.ProcessState) {
	t.Helper()
	if !message.ValidOrderID(id) {
		t.Fatalf("order ID %q accepted", id)
	}
	if _, ok := workflow.ParseProcessState(string(state)); !ok {
		t.Fatalf("state %q accepted", state)
	}
}
