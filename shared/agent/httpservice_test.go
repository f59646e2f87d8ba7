package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/step"
)

func stepRequest() agent.Request {
	return agent.Request{
		OrderID:        "order-1",
		Step:           testStep,
		StepIndex:      0,
		Attempt:        3,
		IdempotencyKey: "order-1/" + testStep,
		Input:          json.RawMessage(`{"items":[]}`),
		Previous:       map[string]json.RawMessage{"validate": json.RawMessage(`{"ok":true}`)},
	}
}

// undoRequest is the compensation of stepRequest's step, keyed as the
// Scheduler keys it (workflow.CompensationKey).
func undoRequest() agent.Request {
	r := stepRequest()
	r.Action = message.Compensate
	r.EffectKey = r.IdempotencyKey
	r.IdempotencyKey = r.EffectKey + "/undo"
	return r
}

// received is a request a recording server was sent.
type received struct {
	method, path, key, ctype, accept string
	raw                              []byte
	body                             map[string]json.RawMessage
}

// recordingServer answers every request with answer and passes on what it
// was sent; it returns its URL.
func recordingServer(t *testing.T, answer string) (string, <-chan received) {
	t.Helper()
	got := make(chan received, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := received{method: r.Method, path: r.URL.Path, key: r.Header.Get("Idempotency-Key"),
			ctype: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept")}
		s.raw, _ = io.ReadAll(r.Body)
		_ = json.Unmarshal(s.raw, &s.body)
		got <- s
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// checkBody asserts a request body's members, each as JSON text.
func checkBody(t *testing.T, body map[string]json.RawMessage, want map[string]string) {
	t.Helper()
	if len(body) != len(want) {
		t.Errorf("body fields %v, want %v", body, want)
	}
	for k, v := range want {
		if string(body[k]) != v {
			t.Errorf("body %s = %s, want %s", k, body[k], v)
		}
	}
}

// serveSim serves sim to the test and returns its URL. sim closes first: it
// releases the hanging calls the server's Close waits for.
func serveSim(t *testing.T, sim *remotesim.Sim) string {
	t.Helper()
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	return srv.URL
}

// simService serves the real simulator and returns an HTTPService calling it.
func simService(t *testing.T) (*remotesim.Sim, *agent.HTTPService) {
	t.Helper()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	return sim, agent.NewHTTPService(serveSim(t, sim), agent.NewHTTPClient(5*time.Second))
}

func TestHTTPServiceSendsTheStep(t *testing.T) {
	t.Parallel()
	url, got := recordingServer(t, `{"confirmation":"c1"}`)
	svc := agent.NewHTTPService(url+"/", agent.NewHTTPClient(5*time.Second))
	out, err := svc.Do(context.Background(), stepRequest())
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if string(out) != `{"confirmation":"c1"}` {
		t.Errorf("output %s", out)
	}
	s := <-got
	if s.method != http.MethodPost || s.path != "/v1/steps/"+testStep || s.key != "order-1/"+testStep || s.ctype != "application/json" {
		t.Errorf("request %s %s key %q type %q", s.method, s.path, s.key, s.ctype)
	}
	checkBody(t, s.body, map[string]string{"orderId": `"order-1"`, "step": `"` + testStep + `"`, "input": `{"items":[]}`, "previous": `{"validate":{"ok":true}}`})
	if e := svc.Endpoint(stepRequest()); e != url+"/v1/steps/"+testStep {
		t.Errorf("Endpoint = %s", e)
	}
}

// TestHTTPServiceSendsOutputsAsTheyCame: the outputs a request carries
// reach the remote as the bytes the system stored, not HTML-escaped.
func TestHTTPServiceSendsOutputsAsTheyCame(t *testing.T) {
	t.Parallel()
	const out = "{\"h\":\"<b>&amp;</b> é😀\u2028\"}"
	for _, tc := range []struct {
		name string
		call func(*agent.HTTPService, agent.Request) error
		req  agent.Request
	}{
		{"step", func(s *agent.HTTPService, r agent.Request) error { _, err := s.Do(context.Background(), r); return err }, stepRequest()},
		{"undo", func(s *agent.HTTPService, r agent.Request) error {
			_, err := s.Undo(context.Background(), r)
			return err
		}, undoRequest()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, got := recordingServer(t, `{}`)
			tc.req.Previous = map[string]json.RawMessage{"validate": json.RawMessage(out)}
			if err := tc.call(agent.NewHTTPService(url, agent.NewHTTPClient(5*time.Second)), tc.req); err != nil {
				t.Fatal(err)
			}
			if s := <-got; !strings.Contains(string(s.raw), `"previous":{"validate":`+out+`}`) {
				t.Errorf("sent %s, want the output %s as it is", s.raw, out)
			}
		})
	}
}

// TestConflictGoldensClassify: the contract's 409 in_progress is retried,
// its 409 compensated is final.
func TestConflictGoldensClassify(t *testing.T) {
	t.Parallel()
	for file, permanent := range map[string]bool{"problem-in-progress.json": false, "problem-compensated.json": true} {
		doc := golden.Read(t, filepath.Join("..", "remote", "testdata", file))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write(doc)
		}))
		_, err := agent.NewHTTPService(srv.URL, agent.NewHTTPClient(5*time.Second)).Do(context.Background(), stepRequest())
		srv.Close()
		var re *agent.RemoteError
		if !errors.As(err, &re) || step.IsPermanent(err) != permanent {
			t.Errorf("%s: %v, permanent %v; want permanent %v", file, err, step.IsPermanent(err), permanent)
		}
	}
}

func TestHTTPServiceClassifies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		wantOut    string
		wantErr    bool
		permanent  bool
		uncertain  bool
		wantCode   string
		wantMsg    string
		retryAfter time.Duration
	}{
		{name: "200 JSON compacted", status: 200, body: "{ \"a\" : 1 }\n", wantOut: `{"a":1}`},
		{name: "201", status: 201, body: `[1,2]`, wantOut: `[1,2]`},
		{name: "204 empty", status: 204, wantOut: ""},
		// A 2xx the agent cannot use: the remote applied the step and will
		// replay the same answer, so it fails, uncertainly.
		{name: "200 not JSON is permanent and uncertain", status: 200, body: "<html>", wantErr: true, permanent: true, uncertain: true,
			wantCode: agent.CodeBadResponse},
		{name: "200 too large is permanent and uncertain", status: 200, body: `"` + strings.Repeat("x", agent.MaxResponseBytes) + `"`,
			wantErr: true, permanent: true, uncertain: true, wantCode: agent.CodeResponseTooLarge},
		{name: "503 transient with Retry-After", status: 503, header: map[string]string{"Retry-After": "3"},
			body: `{"code":"unavailable","message":"later"}`, wantErr: true, wantCode: "unavailable", retryAfter: 3 * time.Second},
		{name: "500 transient", status: 500, body: "oops", wantErr: true, wantCode: "http_500"},
		{name: "429 transient", status: 429, wantErr: true, wantCode: "http_429"},
		{name: "408 transient", status: 408, wantErr: true, wantCode: "http_408"},
		{name: "422 problem is permanent", status: 422, body: `{"code":"rejected","message":"out of stock"}`,
			wantErr: true, permanent: true, wantCode: "rejected", wantMsg: "out of stock"},
		{name: "400 RFC 9457 problem", status: 400, header: map[string]string{"Content-Type": "application/problem+json"},
			body:    `{"type":"about:blank","title":"Bad Request","detail":"sku missing"}`,
			wantErr: true, permanent: true, wantCode: "http_400", wantMsg: "sku missing"},
		{name: "409 typed problem", status: 409, body: `{"type":"https://errors.example.com/conflict","title":"Conflict"}`,
			wantErr: true, permanent: true, wantCode: "https://errors.example.com/conflict", wantMsg: "Conflict"},
		// Another call with the key is at work: ask again.
		{name: "409 in_progress is transient with Retry-After", status: 409, header: map[string]string{"Retry-After": "2"},
			body: `{"code":"in_progress","message":"busy"}`, wantErr: true, wantCode: remote.CodeInProgress, wantMsg: "busy", retryAfter: 2 * time.Second},
		{name: "409 compensated is permanent", status: 409, body: `{"code":"compensated","message":"undone"}`,
			wantErr: true, permanent: true, wantCode: remote.CodeCompensated, wantMsg: "undone"},
		{name: "409 idempotency_conflict is permanent", status: 409, header: map[string]string{"Retry-After": "2"},
			body: `{"code":"idempotency_conflict","message":"another body"}`, wantErr: true, permanent: true, wantCode: "idempotency_conflict"},
		{name: "200 markup and multi-byte UTF-8 as they came", status: 200, body: "{\"h\": \"<b>&amp;</b> é😀\u2028\"}",
			wantOut: "{\"h\":\"<b>&amp;</b> é😀\u2028\"}"},
		// SQS does not carry it; the escape means the same.
		{name: "200 U+FFFF escaped", status: 200, body: "\"a\uFFFFb\"", wantOut: `"a\uffffb"`},
		{name: "200 not UTF-8 is permanent and uncertain", status: 200, body: "{\"a\":\"\xff\"}", wantErr: true, permanent: true, uncertain: true,
			wantCode: agent.CodeBadResponse},
		{name: "404 plain text", status: 404, body: "not here", wantErr: true, permanent: true, wantCode: "http_404", wantMsg: "Not Found"},
		{name: "redirect not followed", status: 302, header: map[string]string{"Location": "/elsewhere"},
			wantErr: true, permanent: true, wantCode: "http_302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			out, err := agent.NewHTTPService(srv.URL, agent.NewHTTPClient(5*time.Second)).Do(context.Background(), stepRequest())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Do = %s, %v; want error %v", out, err, tt.wantErr)
			}
			if !tt.wantErr {
				if string(out) != tt.wantOut {
					t.Errorf("output %q, want %q", out, tt.wantOut)
				}
				return
			}
			if step.IsPermanent(err) != tt.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, step.IsPermanent(err), tt.permanent)
			}
			if step.IsUncertain(err) != tt.uncertain || agent.FaultOf(err).Uncertain != tt.uncertain {
				t.Errorf("IsUncertain(%v) = %v, want %v", err, step.IsUncertain(err), tt.uncertain)
			}
			var re *agent.RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a RemoteError", err)
			}
			if re.Code != tt.wantCode || (tt.wantMsg != "" && re.Message != tt.wantMsg) {
				t.Errorf("remote error %+v, want code %q message %q", re, tt.wantCode, tt.wantMsg)
			}
			if d, _ := agent.RetryAfter(err); d != tt.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", d, tt.retryAfter)
			}
			if tt.permanent {
				if f := agent.FaultOf(err); f.Code != tt.wantCode {
					t.Errorf("FaultOf = %+v, want code %s", f, tt.wantCode)
				}
			}
		})
	}
}

func TestHTTPServiceNetworkErrorsAreTransient(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := agent.NewHTTPService(srv.URL, agent.NewHTTPClient(5*time.Second)).Do(ctx, stepRequest())
		if err == nil || step.IsPermanent(err) || !errors.Is(err, context.Canceled) {
			t.Errorf("Do = %v, want a transient context error", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := agent.NewHTTPService(url, agent.NewHTTPClient(5*time.Second)).Do(context.Background(), stepRequest())
		if err == nil || step.IsPermanent(err) {
			t.Errorf("Do = %v, want a transient error", err)
		}
	})
	t.Run("connection dropped mid-response", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"partial":`)
			panic(http.ErrAbortHandler)
		}))
		defer srv.Close()
		_, err := agent.NewHTTPService(srv.URL, agent.NewHTTPClient(5*time.Second)).Do(context.Background(), stepRequest())
		if err == nil || step.IsPermanent(err) {
			t.Errorf("Do = %v, want a transient error", err)
		}
	})
}

func TestHTTPServiceBadInputIsPermanent(t *testing.T) {
	t.Parallel()
	r := stepRequest()
	r.Input = json.RawMessage(`{broken`)
	_, err := agent.NewHTTPService("http://127.0.0.1:1", agent.NewHTTPClient(time.Second)).Do(context.Background(), r)
	if !step.IsPermanent(err) {
		t.Errorf("Do with input that is not JSON = %v, want permanent", err)
	}
}

// TestRequestsGolden: what the agent posts for a fixed request is
// shared/remote's golden document byte for byte, on the contract's route
// and under the right key: the simulator, and any service written from the
// contract, reads exactly these bodies.
func TestRequestsGolden(t *testing.T) {
	t.Parallel()
	const id = "9b2f0c1e-5d7a-4c3b-8e6f-0a1b2c3d4e5f"
	perform := agent.Request{
		OrderID: id, Step: "charge-payment", StepIndex: 1, Attempt: 2, IdempotencyKey: id + "/charge-payment",
		Input: json.RawMessage(`{"orderId": "` + id + `", "customerId": "c-42", "currency": "EUR",
			"items": [{"sku": "BOOK-1", "quantity": 2, "unitPriceCents": 1250}], "totalCents": 2500}`),
		Previous: map[string]json.RawMessage{"reserve-inventory": json.RawMessage(`{"reservation": "r-1"}`)},
	}
	undo := perform
	undo.Action, undo.EffectKey, undo.IdempotencyKey = message.Compensate, perform.IdempotencyKey, perform.IdempotencyKey+"/undo"

	url, posts := recordingServer(t, `{}`)
	svc := agent.NewHTTPService(url, agent.NewHTTPClient(5*time.Second))

	tests := []struct {
		golden, path string
		req          agent.Request
		call         func(context.Context, agent.Request) (json.RawMessage, error)
	}{
		{"step-request.json", "/v1/steps/charge-payment", perform, svc.Do},
		{"compensate-request.json", "/v1/steps/charge-payment/compensate", undo, svc.Undo},
	}
	for _, tc := range tests {
		if _, err := tc.call(context.Background(), tc.req); err != nil {
			t.Fatalf("%s: %v", tc.golden, err)
		}
		got := <-posts
		golden.Equal(t, filepath.Join("..", "remote", "testdata", tc.golden), got.raw)
		if got.path != tc.path || got.key != tc.req.IdempotencyKey {
			t.Errorf("%s: posted to %s under key %q", tc.golden, got.path, got.key)
		}
	}
}

func decodeUndo(t *testing.T, out json.RawMessage) remotesim.Undo {
	t.Helper()
	var u remotesim.Undo
	if err := json.Unmarshal(out, &u); err != nil {
		t.Fatalf("undo output %s: %v", out, err)
	}
	return u
}

func TestHTTPServiceCompensatesOnce(t *testing.T) {
	t.Parallel()
	sim, svc := simService(t)
	ctx := context.Background()
	effect, undo := undoRequest().EffectKey, undoRequest().IdempotencyKey
	if _, err := svc.Do(ctx, stepRequest()); err != nil {
		t.Fatalf("Do: %v", err)
	}
	// The first undo is applied but its answer lost: a transient error, and
	// the retry under the same key must not undo again.
	sim.Script(undo, remotesim.ApplyThenFail)
	if _, err := svc.Undo(ctx, undoRequest()); err == nil || step.IsPermanent(err) {
		t.Fatalf("Undo through ApplyThenFail = %v, want a transient error", err)
	}
	first, err := svc.Undo(ctx, undoRequest())
	if err != nil {
		t.Fatalf("Undo: %v", err)
	}
	again, err := svc.Undo(ctx, undoRequest())
	if err != nil || string(again) != string(first) {
		t.Errorf("Undo again = %s, %v; want the stored %s", again, err, first)
	}
	u := decodeUndo(t, first)
	if !u.Undone || u.EffectKey != effect || u.OrderID != "order-1" || u.Step != testStep || !u.UndoneAt.Equal(t0) {
		t.Errorf("undo %+v", u)
	}
	if n := sim.CompensationCount(effect); n != 1 {
		t.Errorf("CompensationCount = %d, want 1", n)
	}
	if n := sim.EffectCount(effect); n != 1 {
		t.Errorf("EffectCount = %d, want 1", n)
	}
}

// TestHTTPServiceCompensateBeforeTheStep: an undo that finds nothing to undo
// succeeds, and a late try of the step then fails permanently with the fault
// code "compensated", so the Agent reports it rather than retrying.
func TestHTTPServiceCompensateBeforeTheStep(t *testing.T) {
	t.Parallel()
	sim, svc := simService(t)
	ctx := context.Background()
	out, err := svc.Undo(ctx, undoRequest())
	if err != nil {
		t.Fatalf("Undo: %v", err)
	}
	if u := decodeUndo(t, out); u.Undone {
		t.Errorf("undo of nothing %+v", u)
	}
	_, err = svc.Do(ctx, stepRequest())
	if !step.IsPermanent(err) {
		t.Fatalf("Do after the undo = %v, want a permanent error", err)
	}
	var re *agent.RemoteError
	if !errors.As(err, &re) || re.Status != http.StatusConflict {
		t.Errorf("Do after the undo = %v, want a 409 RemoteError", err)
	}
	if f := agent.FaultOf(err); f.Code != remote.CodeCompensated {
		t.Errorf("FaultOf = %+v, want code compensated", f)
	}
	if n := sim.EffectCount(undoRequest().EffectKey); n != 0 {
		t.Errorf("the step applied %d times after its undo", n)
	}
}

func TestHTTPServiceCompensateClassifies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		prepare   func(*remotesim.Sim)
		req       func() agent.Request
		permanent bool
		wantCode  string
		wantCalls int
	}{
		{name: "rejected undo is permanent", prepare: func(s *remotesim.Sim) { s.RejectUndo(testStep) },
			req: undoRequest, permanent: true, wantCode: "rejected", wantCalls: 1},
		{name: "503 is transient", prepare: func(s *remotesim.Sim) { s.Script(undoRequest().IdempotencyKey, remotesim.Transient) },
			req: undoRequest, wantCode: "unavailable", wantCalls: 1},
		{name: "no effect key is permanent and not sent", prepare: func(*remotesim.Sim) {},
			req: func() agent.Request { r := undoRequest(); r.EffectKey = ""; return r }, permanent: true, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, svc := simService(t)
			tt.prepare(sim)
			_, err := svc.Undo(context.Background(), tt.req())
			if err == nil || step.IsPermanent(err) != tt.permanent {
				t.Fatalf("Undo = %v, want permanent %v", err, tt.permanent)
			}
			var re *agent.RemoteError
			if tt.wantCode != "" && (!errors.As(err, &re) || re.Code != tt.wantCode) {
				t.Errorf("Undo = %v, want remote code %q", err, tt.wantCode)
			}
			if sim.Calls() != tt.wantCalls || len(sim.Compensations()) != 0 {
				t.Errorf("calls %d compensations %v, want %d calls and none", sim.Calls(), sim.Compensations(), tt.wantCalls)
			}
		})
	}
}

func TestHTTPServiceSendsTheCompensation(t *testing.T) {
	t.Parallel()
	url, got := recordingServer(t, `{"undone":true}`)
	svc := agent.NewHTTPService(url+"/", agent.NewHTTPClient(5*time.Second))

	req := undoRequest()
	out, err := svc.Undo(context.Background(), req)
	if err != nil || string(out) != `{"undone":true}` {
		t.Fatalf("Undo = %s, %v", out, err)
	}
	s := <-got
	if s.method != http.MethodPost || s.path != "/v1/steps/"+testStep+"/compensate" || s.key != "order-1/"+testStep+"/undo" ||
		s.ctype != "application/json" || s.accept != "application/json" {
		t.Errorf("request %s %s key %q type %q accept %q", s.method, s.path, s.key, s.ctype, s.accept)
	}
	checkBody(t, s.body, map[string]string{"orderId": `"order-1"`, "step": `"` + testStep + `"`, "effectKey": `"order-1/` + testStep + `"`,
		"input": `{"items":[]}`, "previous": `{"validate":{"ok":true}}`})

	// Undo takes the undo route even when the caller left Action
	// unset, and Do the step's route even for a Compensate action.
	req.Action = ""
	if _, err := svc.Undo(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.path != "/v1/steps/"+testStep+"/compensate" {
		t.Errorf("Undo without an action posted to %s", s.path)
	}
	if _, err := svc.Do(context.Background(), undoRequest()); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.path != "/v1/steps/"+testStep || s.body["effectKey"] != nil {
		t.Errorf("Do of a compensation posted to %s with body %v", s.path, s.body)
	}
}

// TestHTTPServiceEndpoints: a step and its compensation are different
// endpoints, so each gets a circuit breaker of its own.
func TestHTTPServiceEndpoints(t *testing.T) {
	t.Parallel()
	svc := agent.NewHTTPService("http://remote.example/", agent.NewHTTPClient(time.Second))
	tests := []struct {
		action message.Action
		want   string
	}{
		{"", "http://remote.example/v1/steps/" + testStep},
		{message.Perform, "http://remote.example/v1/steps/" + testStep},
		{message.Compensate, "http://remote.example/v1/steps/" + testStep + "/compensate"},
	}
	for _, tt := range tests {
		r := stepRequest()
		r.Action = tt.action
		if got := svc.Endpoint(r); got != tt.want {
			t.Errorf("Endpoint(action %q) = %s, want %s", tt.action, got, tt.want)
		}
	}
}

// TestHTTPServiceUndoWithAnUnusableAnswerIsDone: a 2xx to an undo means it
// happened; an answer the agent cannot read does not make it a failure that
// an operator's retry would only repeat. (One too large to keep is dropped by
// the handler: TestUndoOutputOverTheLimitIsDropped.)
func TestHTTPServiceUndoWithAnUnusableAnswerIsDone(t *testing.T) {
	t.Parallel()
	for _, fault := range []remotesim.Fault{remotesim.Garbage} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			sim, svc := simService(t)
			ctx := context.Background()
			if _, err := svc.Do(ctx, stepRequest()); err != nil {
				t.Fatal(err)
			}
			sim.Script(undoRequest().IdempotencyKey, fault)
			out, err := svc.Undo(ctx, undoRequest())
			if err != nil || out != nil {
				t.Fatalf("Undo = %d bytes, %v; want done without output", len(out), err)
			}
			if n := sim.CompensationCount(undoRequest().EffectKey); n != 1 {
				t.Fatalf("undone %d times", n)
			}
		})
	}
}

// keyRecorder passes a replica's requests to next after recording their
// paths and Idempotency-Keys.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.keys = append(k.keys, r.URL.Path+" "+r.Header.Get(remote.IdempotencyKeyHeader))
		k.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (k *keyRecorder) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.keys)
}

// Two replicas in front of one simulator: when the one tried first is down
// (503, or refusing connections), the retry in the same invocation goes to
// the other under the same Idempotency-Key, the step succeeds once, and the
// log names the replica that failed by its host. A step and an undo route
// alike.
func TestHTTPServiceReplicaDownTheTryGoesToTheOther(t *testing.T) {
	t.Parallel()
	for _, down := range []string{"503", "connection refused"} {
		for _, action := range []message.Action{message.Perform, message.Compensate} {
			t.Run(down+"/"+string(action), func(t *testing.T) {
				t.Parallel()
				sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
				t.Cleanup(sim.Close)
				var downKeys, upKeys keyRecorder
				downSrv := httptest.NewServer(downKeys.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					http.Error(w, "down", http.StatusServiceUnavailable)
				})))
				t.Cleanup(downSrv.Close)
				if down == "connection refused" {
					downSrv.Close()
				}
				upSrv := httptest.NewServer(upKeys.wrap(sim))
				t.Cleanup(upSrv.Close)

				cfg := testConfig()
				cfg.RemoteBaseURL, cfg.RemoteBaseURLs = "", []string{downSrv.URL, upSrv.URL}
				cfg.BreakerFailures = 1
				// Ties go to the first listed: the replica that is down.
				hs := newHarness(t, cfg, agent.NewReplicatedHTTPService(cfg.Endpoints(), agent.NewHTTPClient(time.Second)),
					agent.WithRouteDraw(func(int) int { return 0 }))
				m := agentRequest("order-1", t0)
				path := remote.StepPath(testStep)
				if action == message.Compensate {
					m.Action, m.EffectKey, m.IdempotencyKey = message.Compensate, m.IdempotencyKey, m.IdempotencyKey+"/undo"
					path = remote.CompensatePath(testStep)
				}
				if resp := hs.handle(t, record("m1", message.Encode(m))); len(resp.BatchItemFailures) != 0 {
					t.Fatalf("failures %v", failedIDs(resp))
				}
				replies := hs.out.replies()
				if len(replies) != 1 || replies[0].Outcome != message.Succeeded {
					t.Fatalf("replies %+v, want one Succeeded", replies)
				}
				want := []string{path + " " + m.IdempotencyKey}
				if got := upKeys.seen(); !slices.Equal(got, want) {
					t.Errorf("the healthy replica saw %v, want %v", got, want)
				}
				if down == "503" {
					if got := downKeys.seen(); !slices.Equal(got, want) {
						t.Errorf("the replica that is down saw %v, want %v", got, want)
					}
				}
				if n := hs.sleep.count(); n != 1 {
					t.Errorf("%d waits between tries, want 1", n)
				}
				if action == message.Perform && sim.EffectCount(m.IdempotencyKey) != 1 {
					t.Errorf("effect applied %d times, want once", sim.EffectCount(m.IdempotencyKey))
				}
				downHost := strings.TrimPrefix(downSrv.URL, "http://")
				var retried, opened bool
				for _, l := range hs.logs.Records(t) {
					switch l["msg"] {
					case "try failed, retrying":
						retried = l["endpoint"] == downHost
					case "breaker opened":
						opened = l["endpoint"] == downHost && l["compensate"] == (action == message.Compensate)
					}
					if s := fmt.Sprint(l); strings.Contains(s, "/v1/steps") && l["msg"] != "try failed, retrying" {
						t.Errorf("a log line names a path: %s", s)
					}
				}
				if !retried || !opened {
					t.Errorf("logs name the replica that is down (%s) in the retry: %v, in the breaker's opening: %v\n%s", downHost, retried, opened, hs.logs)
				}
			})
		}
	}
}
