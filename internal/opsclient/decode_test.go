package opsclient

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode"

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
		{"order ID with a slash", `{"orders":[{"orderId":"a/1","state":"Error"}]}`, `order 0: orderId "a/1" is not an order ID`, 0, ""},
		{"missing state", `{"orders":[{"orderId":"a-1"}]}`, `unknown state ""`, 0, ""},
		{"wrong type", `{"orders":[{"orderId":"a-1","state":"Error","failureCount":"3"}]}`, "cannot unmarshal string", 0, ""},
		{"bad time", `{"orders":[{"orderId":"a-1","state":"Error","updatedAt":"yesterday"}]}`, "order 0", 0, ""},
		{"empty cursor", `{"orders":[],"nextCursor":""}`, "nextCursor: length 0", 0, ""},
		{"cursor too long", `{"orders":[],"nextCursor":"` + strings.Repeat("a", maxCursorBytes+1) + `"}`, "nextCursor: length", 0, ""},
		{"cursor with a newline", `{"orders":[],"nextCursor":"a\nb"}`, "not printable ASCII", 0, ""},
		{"cursor not a string", `{"orders":[],"nextCursor":7}`, "cannot unmarshal number", 0, ""},
	} {
		p, err := decodePage([]byte(tc.body))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && (len(p.Orders) != tc.n || len(p.rawOrders) != tc.n || p.NextCursor != tc.cursor):
			t.Errorf("%s: %d orders, cursor %q", tc.name, len(p.Orders), p.NextCursor)
		}
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
	for in, want := range map[string]string{
		"bzoy":                       "bzoy",
		"https://x.example.com/prod": "https://x.example.com/prod",
		"a b":                        "'a b'",
		"it's":                       `'it'\''s'`,
		"$(rm -rf ~)":                "'$(rm -rf ~)'",
		"":                           "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzDecodeResponses feeds any body to every decoder and printer: none may
// panic, whatever decodes must hold the invariants the printers rely on,
// and nothing printed may carry a terminal control character.
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
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if p, err := decodePage(body); err == nil {
			if len(p.Orders) != len(p.rawOrders) {
				t.Fatalf("%d orders, %d raw", len(p.Orders), len(p.rawOrders))
			}
			for _, o := range p.Orders {
				checkDecoded(t, o.OrderID, o.State)
			}
			if p.NextCursor != "" && checkCursor(p.NextCursor) != nil {
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
		if o, err := decodeOrder(body); err == nil {
			checkDecoded(t, o.OrderID, o.State)
			var out bytes.Buffer
			if err := writeOrder(&out, o, "sasctl"); err != nil {
				t.Fatal(err)
			}
			checkPrintable(t, out.String())
		}
		if a, err := decodeAccepted(body); err == nil {
			checkDecoded(t, a.OrderID, a.State)
		}
		p, msg := decodeErrorBody(body)
		if p != nil && msg != "" {
			t.Fatalf("both a problem and a message")
		}
		e := &APIError{Method: "GET", Path: "/orders/x", StatusCode: 500, Problem: p, Message: msg}
		checkPrintable(t, e.Error())
	})
}

func checkDecoded(t *testing.T, id string, state workflow.ProcessState) {
	t.Helper()
	if !message.ValidOrderID(id) {
		t.Fatalf("order ID %q accepted", id)
	}
	if _, ok := workflow.ParseProcessState(string(state)); !ok {
		t.Fatalf("state %q accepted", state)
	}
}

func checkPrintable(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			t.Fatalf("output carries %U: %q", r, s)
		}
	}
}
