package submission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

func TestCreateOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp := f.do(t, postOrder(validBody))
	a := readAccepted(t, resp)
	if !message.ValidOrderID(a.OrderID) || len(a.OrderID) != 36 || a.OrderID[14] != '4' {
		t.Fatalf("orderId %q is not a random UUID v4", a.OrderID)
	}
	if resp.Headers[ReplayedHeader] != "" {
		t.Fatalf("a new order is marked replayed")
	}

	o := f.order(t, a.OrderID)
	wantOrder := workflow.Order{
		OrderID:    a.OrderID,
		CustomerID: "c-42",
		Currency:   "EUR",
		Items: []workflow.Item{
			{SKU: "BOOK-1", Quantity: 2, UnitPriceCents: 1999},
			{SKU: "PEN", Quantity: 1, UnitPriceCents: 250},
		},
		TotalCents:  4248,
		RequestHash: mustDecode(t, validBody).Hash(),
		CreatedAt:   testNow,
		Owner:       ownerA.Name,
		OwnerID:     ownerA.ID,
		// Twice the retention: its record may be reopened for one.
		ExpiresAt: testNow.Add(2 * workflow.DefaultRetention).Truncate(time.Second),
	}
	if !reflect.DeepEqual(o, wantOrder) {
		t.Fatalf("stored order %+v, want %+v", o, wantOrder)
	}

	s := f.state(t, a.OrderID)
	wantInput := `{"orderId":"` + a.OrderID + `","customerId":"c-42","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2,"unitPriceCents":1999},{"sku":"PEN","quantity":1,"unitPriceCents":250}],"totalCents":4248}`
	// The first step is claimed in the same write, as a Scheduler's claim
	// would leave it: by this request, attempt 1, one step budget to go.
	first := workflow.Reference().Steps[0]
	wantState := workflow.NewState(a.OrderID, workflow.Reference(), json.RawMessage(wantInput), testNow, testNow.Add(first.Lease()))
	wantState.OwnerID = ownerA.ID // the record keeps the ID alone
	wantState.ProcessState, wantState.Attempt, wantState.LockedBy = workflow.Processing, 1, "submission/req-1"
	wantState.Steps[0].State, wantState.Steps[0].Attempts, wantState.Steps[0].StartedAt = workflow.StepProcessing, 1, &testNow
	// Outside Lambda the order starts a trace of its own, at its time.
	tr, err := trace.Parse(s.Trace)
	if err != nil || !strings.HasPrefix(tr.Root, fmt.Sprintf("1-%08x-", testNow.Unix())) || tr.Parent != "" {
		t.Fatalf("stored trace %q (%v), want a new Root at %v and no Parent", s.Trace, err, testNow)
	}
	wantState.Trace = s.Trace
	// Its orders item outlives it if it ends by then (workflow/retention.go).
	wantState.OpenUntil = testNow.Add(workflow.DefaultRetention - workflow.Reference().LongestRun())
	if !reflect.DeepEqual(s, wantState) {
		t.Fatalf("stored state %+v\nwant %+v", s, wantState)
	}

	// Its request goes straight to the first step's Agent.
	sent := f.out.sent()
	if len(sent) != 1 {
		t.Fatalf("sent %d messages, want 1", len(sent))
	}
	m, err := message.DecodeAgentRequest(sent[0].body)
	if err != nil {
		t.Fatalf("agent request: %v", err)
	}
	want := message.AgentRequest{V: message.Version, Kind: message.KindAgentRequest, OrderID: a.OrderID, Workflow: "order-v1",
		Step: first.Name, StepIndex: 0, Attempt: 1, CompleteBy: testNow.Add(first.Lease()),
		IdempotencyKey: workflow.IdempotencyKey(a.OrderID, first.Name), Input: json.RawMessage(wantInput)}
	if sent[0].queueURL != testFirstAgentURL || sent[0].delay != 0 || !reflect.DeepEqual(m, want) {
		t.Fatalf("sent %+v\n(%+v)\nwant %+v", sent[0], m, want)
	}

	var accepted map[string]any
	for _, l := range f.logs.Records(t) {
		if l["msg"] == "order accepted" {
			accepted = l
		}
	}
	if accepted == nil || accepted["orderId"] != a.OrderID || accepted["requestId"] != "req-1" {
		t.Fatalf("no 'order accepted' log with orderId and requestId: %v", f.logs.Records(t))
	}
	// The request goes in the order's trace, and so does the log line.
	if sent[0].trace != s.Trace || accepted[trace.LogKey] != tr.Root {
		t.Fatalf("sent in trace %q, logged traceId %v; want the order's %s", sent[0].trace, accepted[trace.LogKey], s.Trace)
	}
}

// TestCreateOrderContinuesTheInvocationsTrace: in Lambda with active
// tracing the order goes in the invocation's trace; the record keeps its
// Root and sampling decision, the request names the invocation as Parent.
// TestCreateOrderSamplesOnce: a new order takes the invocation's trace ID
// and the Submission's own sampling decision, never Lambda's, and carries
// both on its record and its first message; a recorded order's message
// names the Submission's segment as its parent.
func TestCreateOrderSamplesOnce(t *testing.T) {
	t.Parallel()
	const inv = "Root=1-67a1e8c2-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:0"
	for _, tc := range []struct {
		name      string
		rate      float64
		recording bool
		want      string
	}{
		{"none sampled", 0, false, "Sampled=0"},
		{"all sampled", 1, false, "Sampled=1"},
		{"sampled and recorded", 1, true, "Sampled=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			cfg := testConfig()
			cfg.TraceSampleRate = tc.rate
			f.h = mustNew(t, cfg, f.store, f.out.sender(), admitFunc(f.admit), actor.Deps{Clock: f.clk, Log: slog.New(slog.DiscardHandler)})
			//lint:ignore SA1029 aws-lambda-go stores the invocation's trace header under this string key
			ctx := context.WithValue(context.Background(), "x-amzn-trace-id", inv)
			rec := trace.NewRecording(f.clk.Now)
			if tc.recording {
				ctx = trace.WithRecording(ctx, rec)
			}
			resp, err := f.h.Handle(ctx, postOrder(validBody))
			if err != nil {
				t.Fatal(err)
			}
			a := readAccepted(t, resp)
			root := "Root=1-67a1e8c2-0123456789abcdef01234567;"
			if got := f.state(t, a.OrderID).Trace; got != root+tc.want {
				t.Errorf("stored trace %q, want the invocation's Root and %s", got, tc.want)
			}
			sent := f.out.sent()
			if len(sent) != 1 {
				t.Fatalf("sent %+v", sent)
			}
			segs := rec.Segments()
			if !tc.recording {
				if sent[0].trace != root+tc.want || len(segs) != 0 {
					t.Errorf("sent %q and %d segments, want %s%s and none", sent[0].trace, len(segs), root, tc.want)
				}
				return
			}
			if len(segs) != 1 || segs[0].Name != SegmentName || segs[0].Annotations["order_id"] != a.OrderID {
				t.Fatalf("segments %+v, want the Submission's of order %s", segs, a.OrderID)
			}
			if want := root + "Parent=" + segs[0].ID + ";" + tc.want; sent[0].trace != want {
				t.Errorf("sent %q, want %q: the next actor's segment hangs under the Submission's", sent[0].trace, want)
			}
		})
	}
}

func TestCreateOrderAcceptedVariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  events.APIGatewayV2HTTPRequest
	}{
		{"charset parameter", postOrder(validBody, "content-type", "application/json; charset=UTF-8")},
		{"header case", request("POST", "/orders", map[string]string{"Content-Type": "Application/JSON"}, validBody)},
		{"base64 body", func() events.APIGatewayV2HTTPRequest {
			r := postOrder(base64.StdEncoding.EncodeToString([]byte(validBody)))
			r.IsBase64Encoded = true
			return r
		}()},
		{"body at the cap", postOrder(validBody + strings.Repeat(" ", DefaultMaxBodyBytes-len(validBody)))},
		{"explicit route key", func() events.APIGatewayV2HTTPRequest {
			r := postOrder(validBody)
			r.RouteKey, r.RequestContext.RouteKey = "POST /orders", "POST /orders"
			return r
		}()},
		{"named stage", func() events.APIGatewayV2HTTPRequest {
			r := postOrder(validBody)
			r.RawPath, r.RequestContext.Stage = "/prod/orders", "prod"
			return r
		}()},
		{"route key only", func() events.APIGatewayV2HTTPRequest {
			r := postOrder(validBody)
			r.RouteKey, r.RawPath, r.RequestContext.HTTP = "POST /orders", "", events.APIGatewayV2HTTPRequestContextHTTPDescription{}
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			readAccepted(t, f.do(t, tt.req))
			// Only CreateOrder writes here: each write is one order.
			if creates, orders := f.called("CreateOrder"), f.store.Writes(); creates != 1 || orders != 1 || len(f.out.sent()) != 1 {
				t.Fatalf("creates %d, orders %d, sent %d; want 1, 1, 1", creates, orders, len(f.out.sent()))
			}
		})
	}
}

// TestCreateOrderRejects covers every client mistake on POST /orders: the
// right status and problem, and nothing written or sent.
func TestCreateOrderRejects(t *testing.T) {
	t.Parallel()
	big := strings.Repeat(" ", DefaultMaxBodyBytes+1-len(validBody)) + validBody
	b64 := func(r events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
		r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(r.Body)), true
		return r
	}
	tests := []struct {
		name       string
		req        events.APIGatewayV2HTTPRequest
		status     int
		typ        string
		wantFields []string
	}{
		{"no content type", request("POST", "/orders", nil, validBody), 415, ProblemMediaType, nil},
		{"text/plain", postOrder(validBody, "content-type", "text/plain"), 415, ProblemMediaType, nil},
		{"json suffix type", postOrder(validBody, "content-type", "application/problem+json"), 415, ProblemMediaType, nil},
		{"latin1", postOrder(validBody, "content-type", "application/json; charset=iso-8859-1"), 415, ProblemMediaType, nil},
		{"unparsable content type", postOrder(validBody, "content-type", "application/json; ="), 415, ProblemMediaType, nil},
		{"empty idempotency key", postOrder(validBody, "idempotency-key", ""), 400, ProblemMalformed, nil},
		{"long idempotency key", postOrder(validBody, "Idempotency-Key", strings.Repeat("k", 256)), 400, ProblemMalformed, nil},
		{"control in idempotency key", postOrder(validBody, "idempotency-key", "a\tb"), 400, ProblemMalformed, nil},
		{"non-ASCII idempotency key", postOrder(validBody, "IDEMPOTENCY-KEY", "clé"), 400, ProblemMalformed, nil},
		{"too large", postOrder(big), 413, ProblemTooLarge, nil},
		{"too large base64", b64(postOrder(big)), 413, ProblemTooLarge, nil},
		{"bad base64", func() events.APIGatewayV2HTTPRequest {
			r := postOrder("not base64!")
			r.IsBase64Encoded = true
			return r
		}(), 400, ProblemMalformed, nil},
		{"not UTF-8", b64(postOrder("{\"customerId\":\"\xc3\x28\"}")), 400, ProblemMalformed, nil},
		{"empty body", postOrder(""), 400, ProblemMalformed, nil},
		{"malformed JSON", postOrder(`{"customerId":`), 400, ProblemMalformed, []string{"customerId"}},
		{"not an object", postOrder(`["c-42"]`), 400, ProblemMalformed, nil},
		{"wrong type", postOrder(strings.Replace(validBody, `"quantity":2`, `"quantity":"2"`, 1)), 400, ProblemMalformed, []string{"items[0].quantity"}},
		{"unknown field", postOrder(strings.Replace(validBody, `{"customerId"`, `{"coupon":"FREE","customerId"`, 1)), 400, ProblemMalformed, []string{"coupon"}},
		{"duplicate field", postOrder(strings.Replace(validBody, `{"customerId":"c-42"`, `{"customerId":"c-42","customerId":"c-43"`, 1)), 400, ProblemMalformed, []string{"customerId"}},
		{"trailing data", postOrder(validBody + `{"customerId":"c-43"}`), 400, ProblemMalformed, nil},
		{"deep nesting", postOrder(`{"items":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "}"), 400, ProblemMalformed, []string{"items[0]"}},
		{"missing fields", postOrder(`{}`), 422, ProblemValidation, []string{"customerId", "currency", "items"}},
		{"invalid client ID", postOrder(strings.Replace(validBody, `"currency"`, `"clientId":"shop web","currency"`, 1)), 422, ProblemValidation, []string{"clientId"}},
		{"client ID not a string", postOrder(strings.Replace(validBody, `"currency"`, `"clientId":["shop"],"currency"`, 1)), 400, ProblemMalformed, []string{"clientId"}},
		{"invalid fields", postOrder(`{"customerId":"c 42","currency":"eur","items":[{"sku":"","quantity":0,"unitPriceCents":-5},{"sku":"S","quantity":1001,"unitPriceCents":100000001}]}`),
			422, ProblemValidation, []string{"customerId", "currency", "items[0].sku", "items[0].quantity", "items[0].unitPriceCents", "items[1].quantity", "items[1].unitPriceCents"}},
		{"too many items", postOrder(`{"customerId":"c","currency":"EUR","items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"S","quantity":1,"unitPriceCents":1},`, 51), ",") + `]}`),
			422, ProblemValidation, []string{"items"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			resp := f.do(t, tt.req)
			p := readProblem(t, resp, tt.status)
			if p.Type != tt.typ {
				t.Errorf("type = %q, want %q", p.Type, tt.typ)
			}
			if p.RequestID != "req-1" {
				t.Errorf("requestId = %q", p.RequestID)
			}
			var fields []string
			for _, fe := range p.Errors {
				if fe.Detail == "" {
					t.Errorf("field error %q has no detail", fe.Field)
				}
				fields = append(fields, fe.Field)
			}
			if !reflect.DeepEqual(fields, tt.wantFields) {
				t.Errorf("fields = %q, want %q", fields, tt.wantFields)
			}
			if tt.status == 415 && resp.Headers["Accept-Post"] != "application/json" {
				t.Errorf("415 without Accept-Post")
			}
			f.wroteNothing(t, "bad input")
		})
	}
}

func TestCreateOrderValidationDetail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	p := readProblem(t, f.do(t, postOrder(strings.Replace(validBody, `"quantity":2`, `"quantity":0`, 1))), 422)
	want := []api.FieldError{{Field: "items[0].quantity", Detail: "must be within 1..1000"}}
	if !reflect.DeepEqual(p.Errors, want) {
		t.Fatalf("errors = %+v, want %+v", p.Errors, want)
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const key = "checkout-7731"
	first := f.do(t, postOrder(validBody, "Idempotency-Key", key))
	a := readAccepted(t, first)
	if k, err := f.store.GetKey(t.Context(), ownerA.Key(), key); err != nil || k.OrderID != a.OrderID || a.OrderID[14] != '4' {
		t.Fatalf("orderId %q, key %+v, %v: want a random ID the key names", a.OrderID, k, err)
	}
	if got := f.order(t, a.OrderID).IdempotencyKey; got != key {
		t.Fatalf("stored IdempotencyKey %q", got)
	}

	// The retry lays the same order out differently and sends the key in
	// another case; it is still the same request.
	retry := `{"currency":"EUR","customerId":"c-42","items":[{"sku":"BOOK-1","unitPriceCents":1999,"quantity":2},{"sku":"PEN","quantity":1,"unitPriceCents":250}]}`
	second := f.do(t, postOrder(retry, "idempotency-key", key))
	b := readAccepted(t, second)
	if b != a || second.Body != first.Body {
		t.Fatalf("replay answered %s, first answer was %s", second.Body, first.Body)
	}
	if second.Headers[ReplayedHeader] != "true" {
		t.Fatalf("replay not marked with %s", ReplayedHeader)
	}
	if creates, orders := f.called("CreateOrder"), f.store.Writes(); creates != 2 || orders != 1 {
		t.Fatalf("creates %d, orders %d; want 2 attempts, 1 order", creates, orders)
	}
	if n := len(f.out.sent()); n != 1 {
		t.Fatalf("sent %d schedule messages, want 1: a replay must not send again", n)
	}
}

// TestCreateOrderClientID: the client ID goes to the order and to its state
// record, whose stream the event publisher reads; it is part of what an
// Idempotency-Key replay must repeat.
func TestCreateOrderClientID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	body := strings.Replace(validBody, `"currency"`, `"clientId":"shop.web-1","currency"`, 1)
	a := readAccepted(t, f.do(t, postOrder(body, "Idempotency-Key", "k-client")))
	o, s := f.order(t, a.OrderID), f.state(t, a.OrderID)
	if o.ClientID != "shop.web-1" || s.ClientID != "shop.web-1" || o.RequestHash != mustDecode(t, body).Hash() {
		t.Fatalf("order %+v, state client %q", o, s.ClientID)
	}
	readAccepted(t, f.do(t, postOrder(body, "Idempotency-Key", "k-client")))
	p := readProblem(t, f.do(t, postOrder(validBody, "Idempotency-Key", "k-client")), 422)
	if p.Type != ProblemIdempotencyKey {
		t.Fatalf("the same key without the client ID: %+v", p)
	}

	plain := readAccepted(t, f.do(t, postOrder(validBody)))
	if o, s := f.order(t, plain.OrderID), f.state(t, plain.OrderID); o.ClientID != "" || s.ClientID != "" {
		t.Fatalf("an order without a client ID got %q, %q", o.ClientID, s.ClientID)
	}
	resp := f.do(t, request("GET", "/orders/"+a.OrderID, nil, ""))
	if !strings.Contains(resp.Body, `"clientId":"shop.web-1"`) {
		t.Fatalf("status %s", resp.Body)
	}
}

func TestIdempotencyKeyReuse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	first := readAccepted(t, f.do(t, postOrder(validBody, "Idempotency-Key", "k1")))
	other := strings.Replace(validBody, `"quantity":2`, `"quantity":3`, 1)
	p := readProblem(t, f.do(t, postOrder(other, "Idempotency-Key", "k1")), 422)
	if p.Type != ProblemIdempotencyKey || p.Detail != "Idempotency-Key was already used with a different request" {
		t.Fatalf("problem %+v", p)
	}
	if o := f.order(t, first.OrderID); o.Items[0].Quantity != 2 {
		t.Fatalf("the first order was overwritten: %+v", o)
	}
	if n := len(f.out.sent()); n != 1 {
		t.Fatalf("sent %d messages, want 1", n)
	}
}

func TestDistinctOrdersWithoutKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := readAccepted(t, f.do(t, postOrder(validBody)))
	b := readAccepted(t, f.do(t, postOrder(validBody)))
	if a.OrderID == b.OrderID {
		t.Fatal("two requests without a key made one order")
	}
	if orders := f.store.Writes(); orders != 2 || len(f.out.sent()) != 2 {
		t.Fatalf("orders %d, sent %d; want 2, 2", orders, len(f.out.sent()))
	}
}

func TestSendFailureStillAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.out.err = errors.New("sqs: throttled")
	a := readAccepted(t, f.do(t, postOrder(validBody)))
	// Claimed with a deadline: the Supervisor retries the step once it
	// passes, as it does for a dispatch whose Agent died.
	first := workflow.Reference().Steps[0]
	if st := f.state(t, a.OrderID); st.ProcessState != workflow.Processing || st.Attempt != 1 ||
		!st.CompleteBy.Equal(testNow.Add(first.Lease())) || !st.InFlight {
		t.Fatalf("order written as %s, attempt %d, complete by %v, in flight %v", st.ProcessState, st.Attempt, st.CompleteBy, st.InFlight)
	}
	var warned bool
	for _, l := range f.logs.Records(t) {
		if l["level"] == "WARN" && l["orderId"] == a.OrderID && strings.Contains(l["error"].(string), "throttled") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no warning logged: %v", f.logs.Records(t))
	}
}

func TestCreateOrderStoreFailures(t *testing.T) {
	t.Parallel()
	secret := errors.New("dynamodb: ProvisionedThroughputExceededException arn:aws:dynamodb:secret-table")
	exists := fmt.Errorf("create order: %w", workflow.ErrExists)
	tests := []struct {
		name  string
		fault fault
		key   string
	}{
		{"create fails", failing(failure{method: "CreateOrder", err: secret}), ""},
		{"random ID collides", failing(failure{method: "CreateOrder", err: exists}), ""},
		{"replay read fails", failing(failure{method: "CreateOrder", err: exists}, failure{method: "GetOrder", err: secret}), "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.fault)
			req := postOrder(validBody)
			if tt.key != "" {
				req = postOrder(validBody, "idempotency-key", tt.key)
			}
			resp := f.do(t, req)
			p := readProblem(t, resp, 500)
			if p.Type != ProblemInternal || p.Detail != "internal error" || strings.Contains(resp.Body, "secret") || strings.Contains(resp.Body, "exists") {
				t.Fatalf("500 leaks or is wrong: %s", resp.Body)
			}
			if len(f.out.sent()) != 0 || f.store.Writes() != 0 {
				t.Fatalf("sent %d schedule messages, wrote %d times for an order that was not written", len(f.out.sent()), f.store.Writes())
			}
			var logged bool
			for _, l := range f.logs.Records(t) {
				logged = logged || (l["level"] == "ERROR" && l["requestId"] == "req-1" && l["orderId"] != nil)
			}
			if !logged {
				t.Fatalf("failure not logged with requestId and orderId: %v", f.logs.Records(t))
			}
		})
	}
}

func TestGetOrder(t *testing.T) {
	t.Parallel()
	const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	started := testNow.Add(time.Second)
	finished := testNow.Add(3 * time.Second)
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{"orderId":"x","customerId":"secret-customer"}`), testNow, time.Time{})
	st.ProcessState, st.StepIndex, st.Step = workflow.Processing, 1, "charge-payment"
	st.LockedBy, st.Attempt, st.FailureCount = "scheduler-invocation-9", 3, 1
	st.ClientID, st.EventSeq, st.Resubmits = "shop.web-1", 2, 1
	// A timeout being retried: the client is told its reason, not the text.
	st.CompleteBy, st.UpdatedAt, st.LastError = testNow.Add(time.Minute), finished, "step charge-payment attempt 2 did not complete by 2025-02-04T10:15:32Z"
	ownBy(&st, callerA)
	st.Steps[0] = workflow.StepRecord{Name: "reserve-inventory", State: workflow.StepSucceeded, Attempts: 1,
		StartedAt: &started, FinishedAt: &finished, Output: json.RawMessage(`{"reservationId":"r-1"}`)}
	st.Steps[1] = workflow.StepRecord{Name: "charge-payment", State: workflow.StepProcessing, Attempts: 2, Failures: 1,
		StartedAt: &started, Output: json.RawMessage(`{not json`)}

	f := newFixture(t, nil)
	f.put(st)
	resp := f.do(t, request("GET", "/orders/"+id, nil, ""))
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "application/json" || resp.Headers["Cache-Control"] != "no-store" {
		t.Fatalf("status %d, headers %v, body %s", resp.StatusCode, resp.Headers, resp.Body)
	}
	want := `{"orderId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","workflow":"order-v1","state":"Processing","status":"processing","priority":"normal","step":"charge-payment","stepIndex":1,` +
		`"failureCount":1,"attempt":3,"completeBy":"2025-02-04T10:16:30Z","reason":"timed-out","reasonText":"step charge-payment did not complete in time",` +
		`"clientId":"shop.web-1","eventSeq":2,"cancelled":false,"resubmits":1,` +
		`"createdAt":"2025-02-04T10:15:30Z","updatedAt":"2025-02-04T10:15:33Z","steps":[` +
		`{"name":"reserve-inventory","state":"succeeded","attempts":1,"failures":0,"startedAt":"2025-02-04T10:15:31Z","finishedAt":"2025-02-04T10:15:33Z","output":{"reservationId":"r-1"}},` +
		`{"name":"charge-payment","state":"processing","attempts":2,"failures":1,"startedAt":"2025-02-04T10:15:31Z"}]}`
	if resp.Body != want {
		t.Fatalf("body\n%s\nwant\n%s", resp.Body, want)
	}
	for _, leak := range []string{"scheduler-invocation-9", "lockedBy", "secret-customer", "owner", "lastError", "did not complete by"} {
		if strings.Contains(resp.Body, leak) {
			t.Fatalf("status exposes %q", leak)
		}
	}
	ops := f.do(t, request("GET", "/ops/orders/"+id, nil, ""))
	if want := `"lastError":"` + st.LastError + `","reason":"timed-out"`; ops.StatusCode != 200 || !strings.Contains(ops.Body, want) {
		t.Fatalf("GET /ops/orders/{id} = %d %s, want %s", ops.StatusCode, ops.Body, want)
	}
}

func TestGetOrderOmitsZeroCompleteBy(t *testing.T) {
	t.Parallel()
	const id = "abc"
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), testNow, testNow)
	st.ProcessState, st.CompleteBy = workflow.Processed, time.Time{}
	ownBy(&st, callerA)
	f := newFixture(t, nil)
	f.put(st)
	resp := f.do(t, request("GET", "/orders/"+id, nil, ""))
	if resp.StatusCode != 200 || strings.Contains(resp.Body, "completeBy") || strings.Contains(resp.Body, "lastError") {
		t.Fatalf("status %d body %s", resp.StatusCode, resp.Body)
	}
}

func TestGetOrderProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		path   string
		fault  fault
		status int
		typ    string
	}{
		{"not found", "/orders/7c9e6679-7425-40de-944b-e07fc1f90ae7", nil, 404, ProblemNotFound},
		{"bad ID characters", "/orders/abc_def", nil, 400, ProblemMalformed},
		{"ID too long", "/orders/" + strings.Repeat("a", 65), nil, 400, ProblemMalformed},
		{"encoded slash", "/orders/a%2Fb", nil, 400, ProblemMalformed},
		{"store fails", "/orders/abc", failing(failure{method: "GetState", err: errors.New("dynamodb: timeout")}), 500, ProblemInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.fault)
			resp := f.do(t, request("GET", tt.path, nil, ""))
			if p := readProblem(t, resp, tt.status); p.Type != tt.typ {
				t.Fatalf("type %q, want %q", p.Type, tt.typ)
			}
			if resp.Headers["Cache-Control"] != "no-store" {
				t.Fatal("problem for a GET without Cache-Control: no-store")
			}
			if strings.Contains(resp.Body, "dynamodb") {
				t.Fatalf("leaks the cause: %s", resp.Body)
			}
		})
	}
}

// TestOrderRoutes: the routes of one order resolve however API Gateway
// presents them: GET answers the order, a cancel stops it.
func TestOrderRoutes(t *testing.T) {
	t.Parallel()
	byRouteKey := func(r events.APIGatewayV2HTTPRequest, routeKey string) events.APIGatewayV2HTTPRequest {
		r.RouteKey, r.PathParameters = routeKey, map[string]string{"id": orderA}
		return r
	}
	onStage := func(r events.APIGatewayV2HTTPRequest, stage string) events.APIGatewayV2HTTPRequest {
		r.RequestContext.Stage = stage
		return r
	}
	tests := []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int // 200: the order read; 202: the order cancelled
	}{
		{"GET $default", request("GET", "/orders/"+orderA, nil, ""), 200},
		{"GET explicit route key", byRouteKey(request("GET", "/orders/"+orderA, nil, ""), "GET /orders/{id}"), 200},
		{"GET named stage", onStage(request("GET", "/v1/orders/"+orderA, nil, ""), "v1"), 200},
		{"GET route key and parameters only", byRouteKey(request("", "", nil, ""), "GET /orders/{id}"), 200},
		{"cancel $default", post("/orders/" + orderA + "/cancel"), 202},
		{"cancel named stage", as(onStage(post("/ops/orders/"+orderA+"/cancel"), "ops"), callerOp), 202},
		{"cancel route key and parameters only", as(byRouteKey(request("", "", nil, ""), "POST /orders/{id}/cancel"), callerOp), 202},
		{"cancel with a body", request("POST", "/orders/"+orderA+"/cancel", map[string]string{"content-type": "text/plain"}, "please"), 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			f.put(at(orderA, workflow.Pending, 0, 0))
			resp := f.do(t, tt.req)
			if tt.status == 202 {
				readOperatorAccepted(t, resp, orderA, workflow.Cancelled)
				return
			}
			var got struct{ OrderID string }
			if err := json.Unmarshal([]byte(resp.Body), &got); resp.StatusCode != 200 || err != nil || got.OrderID != orderA {
				t.Fatalf("status %d body %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/", 404, ""},
		{"GET", "/order", 404, ""},
		{"GET", "/ordersx", 404, ""},
		{"GET", "/orders/", 404, ""},
		{"GET", "/orders/a/b", 404, ""},
		{"POST", "/orders/abc/undo", 404, ""},
		{"POST", "/orders/abc/cancel/", 404, ""},
		{"POST", "/orders/abc/cancel/x", 404, ""},
		{"POST", "/orders//cancel", 404, ""},
		{"POST", "/orders/abc/Cancel", 404, ""},
		{"PUT", "/prod/orders", 405, "GET, POST"}, // on stage "prod", set below
		{"PUT", "/orders", 405, "GET, POST"},
		{"DELETE", "/orders", 405, "GET, POST"},
		{"GET", "/orders/abc/retry", 405, "POST"},
		{"PUT", "/orders/abc/retry", 405, "POST"},
		{"GET", "/orders/abc/cancel", 405, "POST"},
		{"DELETE", "/orders/abc/cancel", 405, "POST"},
		{"DELETE", "/orders/abc", 405, "GET"},
		{"POST", "/orders/abc", 405, "GET"},
		{"HEAD", "/orders/abc", 405, "GET"},
		{"", "/orders/abc", 405, "GET"},
		{"GET", "/ops", 404, ""},
		{"GET", "/ops/", 404, ""},
		{"GET", "/ops/orders/", 404, ""},
		{"GET", "/ops/ordersx", 404, ""},
		{"GET", "/ops/orders/abc/x", 404, ""},
		{"POST", "/ops/orders/abc/retry", 404, ""},
		{"POST", "/ops/orders", 405, "GET"},
		{"DELETE", "/ops/orders/abc", 405, "GET"},
		{"GET", "/ops/workflows/", 404, ""},
		{"GET", "/ops/workflows/order-v1", 404, ""},
		{"GET", "/ops/workflow", 404, ""},
		{"POST", "/ops/workflows", 405, "GET"},
		{"DELETE", "/ops/workflows", 405, "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			req := request(tt.method, tt.path, map[string]string{"content-type": "application/json"}, validBody)
			if strings.HasPrefix(tt.path, "/prod/") {
				req.RequestContext.Stage = "prod"
			}
			resp := f.do(t, req)
			p := readProblem(t, resp, tt.status)
			if resp.Headers["Allow"] != tt.allow {
				t.Fatalf("Allow = %q, want %q (%+v)", resp.Headers["Allow"], tt.allow, p)
			}
			f.wroteNothing(t, "a rejected request")
		})
	}
}

func TestHandleRecoversPanic(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(_ *memstore.Store, method string, _ workflow.Change) error {
		if method == "GetState" {
			panic("boom")
		}
		return nil
	})
	resp := f.do(t, request("GET", "/orders/abc", nil, ""))
	if p := readProblem(t, resp, 500); p.RequestID != "req-1" || strings.Contains(resp.Body, "boom") {
		t.Fatalf("problem %s", resp.Body)
	}
}

func TestRandomOrderIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := randomOrderID()
		if !message.ValidOrderID(id) || len(id) != 36 || strings.Count(id, "-") != 4 || id[14] != '4' || !strings.ContainsAny(id[19:20], "89ab") {
			t.Fatalf("%q is not a UUID of version 4", id)
		}
		if seen[id] {
			t.Fatalf("%s drawn twice", id)
		}
		seen[id] = true
	}
}

// FuzzHandle throws arbitrary requests at the handler over a store and a
// sender that always succeed: it must never panic and never answer 5xx.
func FuzzHandle(f *testing.F) {
	f.Add("POST", "/orders", "application/json", true, "k", []byte(validBody), uint8(0), callerA)
	f.Add("POST", "/orders", "application/json; charset=utf-8", false, "", []byte(validBody), uint8(1), callerA)
	f.Add("POST", "/orders", "application/json", false, "", []byte("!!"), uint8(2), callerA)
	f.Add("POST", "/orders", "text/plain", true, "\x00", []byte("{}"), uint8(0), callerA)
	f.Add("GET", "/orders/abc", "", false, "", []byte(nil), uint8(0), callerA)
	f.Add("GET", "/orders/../x", "", false, "", []byte(nil), uint8(0), callerA)
	f.Add("DELETE", "/orders", "", false, "", []byte(nil), uint8(0), callerA)
	f.Add("GET", "/orders", "", false, "", []byte("state=Error&limit=2&cursor=x"), uint8(3), callerA)
	f.Add("GET", "/orders", "", false, "", []byte("state=Error&state=Pending&limit=%zz"), uint8(3), callerA)
	f.Add("POST", "/orders/abc/retry", "", false, "", []byte(nil), uint8(0), callerA)
	f.Add("POST", "/orders/abc/cancel", "", false, "", []byte(nil), uint8(0), callerA)
	f.Add("GET", "/ops/orders/abc", "", false, "", []byte(nil), uint8(0), callerA)
	f.Add("GET", "/ops/workflows", "", false, "", []byte("x=1"), uint8(0), callerA)
	f.Add("GET", "/ops/orders", "", false, "", []byte("state=Error&limit=2&cursor=x"), uint8(3), callerB)
	f.Add("GET", "/ops/orders", "", false, "", []byte("state=Processed&limit=2"), uint8(3), callerB)
	f.Add("GET", "/orders", "", false, "", []byte("limit=2&cursor=x"), uint8(3), callerB)
	f.Add("POST", "/orders", "application/json", true, "k", []byte(validBody), uint8(0), "")
	f.Add("GET", "/orders/abc", "", false, "", []byte(nil), uint8(0), "arn:aws:sts::123456789012:assumed-role/r")
	f.Add("GET", "/orders/abc", "", false, "", []byte(nil), uint8(0), "arn:aws:s3:::bucket")
	for _, b := range orderSamples(f) {
		f.Add("POST", "/orders", "application/json", false, "", b, uint8(0), callerA)
	}
	// Cursors the store gives, for the seeded order o-1, in the links the
	// handler gives.
	byState := statestore.EncodeCursor(statestore.Cursor{State: "Error", After: statestore.SortKey(testNow, "o-1")})
	byOwner := statestore.EncodeOwnerCursor(statestore.OwnerCursor{Owner: statestore.OwnerTag(ownerA.Key()), After: statestore.SortKey(testNow, "o-1")})
	f.Add("GET", "/ops/orders", "", false, "", []byte(ListQuery{State: workflow.Error, Limit: 1, Cursor: byState}.Encode()), uint8(3), callerA)
	f.Add("GET", "/orders", "", false, "", []byte(ListQuery{Limit: 1, Cursor: byOwner}.Encode()), uint8(3), callerA)
	f.Add("GET", "/orders", "", false, "", []byte("limit=1"), uint8(3), callerA)
	f.Fuzz(func(t *testing.T, method, path, contentType string, hasKey bool, key string, body []byte, bodyMode uint8, userArn string) {
		// The store's state follows the fuzzed order ID, so retry and cancel
		// meet every state, and its writes succeed as far as the state allows.
		stateOf := func(id string) workflow.State {
			st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), testNow, testNow)
			states := workflow.ProcessStates()
			st.ProcessState = states[len(id)%len(states)]
			st.Cancelled = len(id)%2 == 0
			return st
		}
		// Every record is read from the in-memory store the first time it
		// is asked for, and its writes are the store's own, fenced as on
		// DynamoDB. A listing without an owner is an error of the store,
		// which would be a 500. Handle serves this one request on this
		// goroutine, so the hook needs no lock.
		seeded := map[string]bool{}
		fx := newFixture(t, func(store *memstore.Store, call string, c workflow.Change) error {
			if call == "GetState" && !seeded[c.OrderID] {
				seeded[c.OrderID] = true
				store.Put(stateOf(c.OrderID))
			}
			return nil
		})
		// The caller's own order, so that both listings have a record to
		// show and, a page of one at a time, a cursor to give.
		if owner, err := caller(as(request(method, path, nil, ""), userArn)); err == nil {
			st := stateOf("o-1")
			st.Owner, st.OwnerID = owner.Name, owner.ID
			seeded["o-1"] = true
			if err := fx.store.CreateOrder(context.Background(), workflow.Order{OrderID: "o-1", Owner: owner.Name, OwnerID: owner.ID, CreatedAt: testNow}, st); err != nil {
				t.Fatal(err)
			}
		}

		headers := map[string]string{"content-type": contentType}
		if hasKey {
			headers["idempotency-key"] = key
		}
		req := as(request(method, path, headers, string(body)), userArn)
		switch bodyMode % 4 {
		case 1: // a binary body as API Gateway passes it
			req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		case 2: // flagged base64 but not necessarily so
			req.IsBase64Encoded = true
		case 3: // the body is the query string instead
			req.Body, req.RawQueryString = "", string(body)
		}
		resp := fx.do(t, req)
		if resp.StatusCode < 200 || resp.StatusCode >= 500 {
			t.Fatalf("status %d for %s %q: %s", resp.StatusCode, method, path, resp.Body)
		}
		if !json.Valid([]byte(resp.Body)) {
			t.Fatalf("body is not JSON: %q", resp.Body)
		}
		if _, err := caller(req); err != nil && resp.StatusCode < 400 {
			t.Fatalf("status %d for a request without an identity (%q)", resp.StatusCode, userArn)
		}
		if resp.StatusCode >= 400 && resp.Headers["Content-Type"] != "application/problem+json" {
			t.Fatalf("error %d without problem content type", resp.StatusCode)
		}
		if resp.StatusCode == 202 {
			var a acceptedResponse
			if err := json.Unmarshal([]byte(resp.Body), &a); err != nil || !message.ValidOrderID(a.OrderID) {
				t.Fatalf("202 body %s", resp.Body)
			}
			if _, ok := workflow.ParseProcessState(a.State); !ok {
				t.Fatalf("202 with state %q", a.State)
			}
			owner, err := caller(req)
			if err != nil {
				t.Fatalf("202 for a request without an identity: %v", err)
			}
			if hasKey && method == "POST" && path == "/orders" {
				if k, err := fx.store.GetKey(t.Context(), owner.Key(), key); err != nil || k.OrderID != a.OrderID {
					t.Fatalf("orderId %s, but the key %q names %+v, %v", a.OrderID, key, k, err)
				}
			}
		}
	})
}

// TestLargestValidOrderFitsTheInputBound: the workflow's payload bounds
// count on workflow.MaxInputBytes; the largest order the validation admits
// (every field at its longest) must make an input under it, so the 413 the
// handler keeps for a larger one is never a valid order's answer.
func TestLargestValidOrderFitsTheInputBound(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("C", 64)
	var items []string
	for i := range MaxItems {
		sku := fmt.Sprintf("%s%02d", strings.Repeat("S", 62), i)
		items = append(items, fmt.Sprintf(`{"sku":%q,"quantity":%d,"unitPriceCents":%d}`, sku, MaxQuantity, MaxUnitPriceCents))
	}
	body := fmt.Sprintf(`{"customerId":%q,"clientId":%q,"currency":"EUR","items":[%s]}`, id, strings.Repeat("c", 64), strings.Join(items, ","))
	f := newFixture(t, nil)
	a := readAccepted(t, f.do(t, postOrder(body)))
	input := f.state(t, a.OrderID).Input
	if len(input) > workflow.MaxInputBytes/2 {
		t.Fatalf("the largest valid order makes an input of %d bytes, too close to the bound of %d", len(input), workflow.MaxInputBytes)
	}
}

// TestRetention: an order says when it expires once it ended, and from
// then on it is missing to its owner, to the operators and to their
// listings, although DynamoDB may not have deleted it yet; its key, which
// is forgotten by then, makes a new order.
func TestRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const key = "checkout-ttl"
	a := readAccepted(t, f.do(t, postOrder(validBody, "Idempotency-Key", key)))
	get := func(path string) events.APIGatewayV2HTTPResponse { return f.do(t, request("GET", path, nil, "")) }
	if resp := get("/orders/" + a.OrderID); resp.StatusCode != 200 || strings.Contains(resp.Body, "expiresAt") {
		t.Fatalf("an open order: %d %s, want no expiresAt", resp.StatusCode, resp.Body)
	}

	// The first step is rejected and its undo completes: Compensated.
	st := f.state(t, a.OrderID)
	m, err := f.h.machine(st.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(1500 * time.Millisecond)
	written, err := f.store.Apply(context.Background(), m.StepRejected(a.OrderID, 0, st.Attempt, "no", false, "sched", f.clk.Now()))
	if err == nil {
		written, err = f.store.Apply(context.Background(), m.UndoCompleted(a.OrderID, 0, written.Attempt, json.RawMessage(`{}`), workflow.State{}, "sched", f.clk.Now()))
	}
	if err != nil || written.ProcessState != workflow.Compensated {
		t.Fatalf("ending the order: %s, %v", written.ProcessState, err)
	}
	wantExpiry := testNow.Add(time.Second + workflow.DefaultRetention)
	var order api.Order
	if resp := get("/orders/" + a.OrderID); resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &order) != nil ||
		order.ExpiresAt == nil || !order.ExpiresAt.Equal(wantExpiry) {
		t.Fatalf("a Compensated order: %d %s, want expiresAt %s", resp.StatusCode, resp.Body, wantExpiry.Format(time.RFC3339))
	}
	listed := func() []string {
		t.Helper()
		var ids []string
		for path, req := range map[string]events.APIGatewayV2HTTPRequest{"/orders": ownOrders("", callerA), "/ops/orders": getOrders("state=Compensated")} {
			resp := f.do(t, req)
			var p api.Page
			if resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &p) != nil {
				t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Body)
			}
			for _, o := range p.Orders {
				ids = append(ids, o.OrderID)
				if o.ExpiresAt == nil || !o.ExpiresAt.Equal(wantExpiry) {
					t.Errorf("GET %s shows expiresAt %v, want %s", path, o.ExpiresAt, wantExpiry)
				}
			}
		}
		return ids
	}
	if ids := listed(); len(ids) != 2 {
		t.Fatalf("listed %v, want the order in both listings", ids)
	}

	f.clk.Set(wantExpiry)
	for _, path := range []string{"/orders/" + a.OrderID, "/ops/orders/" + a.OrderID} {
		if p := readProblem(t, get(path), 404); p.Type != ProblemNotFound {
			t.Errorf("GET %s of an expired order: %+v", path, p)
		}
	}
	if ids := listed(); len(ids) != 0 {
		t.Errorf("listed %v after it expired, want nothing", ids)
	}
	// The key is forgotten the retention after the order's creation: it
	// makes a new order, with an ID of its own.
	again := f.do(t, postOrder(validBody, "Idempotency-Key", key))
	if b := readAccepted(t, again); b.OrderID == a.OrderID || again.Headers[ReplayedHeader] != "" {
		t.Errorf("the key of an expired order made %s (replayed %q), want a new order", b.OrderID, again.Headers[ReplayedHeader])
	}
}
