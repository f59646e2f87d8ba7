package opsclient

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// TestReadsTheServersDocuments: the client reads the golden documents the
// server is held to (shared/api/testdata), keeps each body as sent for
// --json, and prints them.
func TestReadsTheServersDocuments(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "shared", "api", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var out bytes.Buffer
	body := read("order.json")
	o, err := decodeOrder(body)
	if err != nil || !bytes.Equal(o.Raw, body) || len(o.Steps) != 2 || o.Owner == "" {
		t.Fatalf("decodeOrder(order.json) = %+v, %v", o, err)
	}
	if err := writeOrder(&out, o, "sasctl", o.UpdatedAt, DefaultTimelineWidth); err != nil || !strings.Contains(out.String(), "the refund window has closed") {
		t.Errorf("writeOrder: %v\n%s", err, out.String())
	}
	body = read("page.json")
	p, err := decodePage(body)
	if err != nil || !bytes.Equal(p.Raw, body) || len(p.Orders) != 1 || len(p.rawOrders) != 1 || p.NextCursor == "" {
		t.Fatalf("decodePage(page.json) = %+v, %v", p, err)
	}
	body = read("accepted.json")
	if a, err := decodeAccepted(body); err != nil || !bytes.Equal(a.Raw, body) || a.State != workflow.CompensationPending {
		t.Errorf("decodeAccepted(accepted.json) = %+v, %v", a, err)
	}
	body = read("workflows.json")
	ws, err := decodeWorkflows(body)
	if err != nil || !bytes.Equal(ws.Raw, body) || len(ws.Workflows.Workflows) != 2 || !ws.Truncated {
		t.Fatalf("decodeWorkflows(workflows.json) = %+v, %v", ws, err)
	}
	out.Reset()
	if err := writeWorkflows(&out, ws.Workflows, "sasctl"); err != nil || !strings.Contains(out.String(), "keep: 4+ open") {
		t.Errorf("writeWorkflows: %v\n%s", err, out.String())
	}
	if p, msg := decodeErrorBody(read("problem.json")); p == nil || msg != "" || len(p.Errors) != 1 || p.RequestID == "" {
		t.Errorf("decodeErrorBody(problem.json) = %+v, %q", p, msg)
	}
}

func TestDecodeErrorBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, title, msg string
	}{
		{`{"type":"https://sasflow.dev/problems/conflict","title":"Conflict","status":409,"detail":"d","requestId":"r"}`, "Conflict", ""},
		{`{"message":"Forbidden"}`, "", "Forbidden"},
		{`{"message":"Forbidden","status":403}`, "", ""}, // a problem, by its status
		{`<html>`, "", ""},
		{`{"message":5}`, "", ""},
		{``, "", ""},
	} {
		p, msg := decodeErrorBody([]byte(tc.body))
		title := ""
		if p != nil {
			title = p.Title
		}
		if title != tc.title || msg != tc.msg {
			t.Errorf("decodeErrorBody(%s) = %v, %q", tc.body, p, msg)
		}
	}
}

func TestTruncateAndSanitize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven runes", 10, "eleven ru…"},
		{"ééééé", 3, "éé…"},
		{"a\tb\nc\r", 10, "a b c "},
		{"\x1b[31mred", 20, "\uFFFD[31mred"},
		{"\u0085\u009b\u202e\u2066x", 20, "\uFFFD\uFFFD\uFFFD\uFFFDx"},
		{"bad \xff utf8", 20, "bad \uFFFD utf8"},
		{"xy", 1, "…"},
	} {
		if got := sanitize(tc.in, tc.width); got != tc.want {
			t.Errorf("sanitize(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	checkEach(t, "shellQuote", shellQuote, map[string]string{
		"bzoy":                       "bzoy",
		"https://x.example.com/prod": "https://x.example.com/prod",
		"a b":                        "'a b'",
		"it's":                       `'it'\''s'`,
		"$(rm -rf ~)":                "'$(rm -rf ~)'",
		"":                           "''",
	})
}

// FuzzDecodeResponses feeds any body to every decoder and printer: none may
// panic, whatever decodes keeps its body for --json, and nothing printed
// may carry a terminal control character. What api's decoders check of the
// documents themselves, api's FuzzDecodeDocuments holds them to.
func FuzzDecodeResponses(f *testing.F) {
	for _, seed := range []string{
		`{"orders":[{"orderId":"err-00","state":"Error","step":"charge-payment","failureCount":3,"lastError":"503","updatedAt":"2026-11-22T12:00:00Z"}],"nextCursor":"bzoy","links":{"next":"/orders?cursor=bzoy"}}`,
		`{"orders":[]}`,
		`{"orderId":"comp-1","workflow":"order-v1","state":"CompensationFailed","status":"compensation-failed","step":"reserve-inventory","stepIndex":0,"completeBy":"2026-11-22T12:00:00Z","steps":[{"name":"reserve-inventory","state":"succeeded","attempts":1,"output":{"r":1},"compensation":"failed","compensationAttempts":4,"compensationError":"500\u001b[2J"}]}`,
		`{"orderId":"err-00","state":"Pending","links":{"self":"/orders/err-00"}}`,
		`{"type":"about:blank","title":"Conflict","status":409,"detail":"no","requestId":"r"}`,
		`{"message":"Forbidden"}`,
		`{"orderId":"x","state":"Error","stepIndex":-5,"steps":[]}`,
		`null`, `[]`, `"x"`, ``, `{"orders":[null]}`,
		`{"default":"order","workflows":[{"id":"order-v1","name":"order","version":1,"deployed":true,"inFlight":3,"needsOperator":1}],"truncated":true}`,
		`{"default":"x\u202ey","workflows":[{"id":"gone-v9","name":"\u001b[2J","needsOperator":2}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if p, err := decodePage(body); err == nil {
			if len(p.Orders) != len(p.rawOrders) {
				t.Fatalf("%d orders, %d raw", len(p.Orders), len(p.rawOrders))
			}
			if !bytes.Equal(p.Raw, body) {
				t.Fatalf("page body not kept")
			}
			if p.NextCursor != "" && api.CheckCursor(p.NextCursor) != nil {
				t.Fatalf("cursor %q accepted", p.NextCursor)
			}
			var out bytes.Buffer
			if err := writeOrders(&out, p.Orders); err != nil {
				t.Fatal(err)
			}
			checkPrintable(t, out.String())
			joined, err := ordersJSON(p.rawOrders)
			if err != nil || !json.Valid(joined) {
				t.Fatalf("joined pages: %v", err)
			}
			if err := writeJSON(io.Discard, p.Raw); err != nil {
				t.Fatalf("decoded page does not re-indent: %v", err)
			}
		}
		if ws, err := decodeWorkflows(body); err == nil {
			if !bytes.Equal(ws.Raw, body) {
				t.Fatalf("workflows body not kept")
			}
			var out bytes.Buffer
			if err := writeWorkflows(&out, ws.Workflows, "sasctl"); err != nil {
				t.Fatal(err)
			}
			checkPrintable(t, out.String())
		}
		if o, err := decodeOrder(body); err == nil {
			if !bytes.Equal(o.Raw, body) {
				t.Fatalf("order body not kept")
			}
			var out bytes.Buffer
			if err := writeOrder(&out, o, "sasctl", time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), DefaultTimelineWidth); err != nil {
				t.Fatal(err)
			}
			checkPrintable(t, out.String())
		}
		if a, err := decodeAccepted(body); err == nil && !bytes.Equal(a.Raw, body) {
			t.Fatalf("accepted body not kept")
		}
		p, msg := decodeErrorBody(body)
		if p != nil && msg != "" {
			t.Fatalf("both a problem and a message")
		}
		e := &APIError{Method: "GET", Path: "/orders/x", StatusCode: 500, Problem: p, Message: msg}
		checkPrintable(t, e.Error())
	})
}

func checkPrintable(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			t.Fatalf("output carries %U: %q", r, s)
		}
	}
}
