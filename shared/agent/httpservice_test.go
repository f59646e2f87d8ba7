package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/message"
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

func TestHTTPServiceSendsTheStep(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, key, ctype string
		body                     map[string]json.RawMessage
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		s.method, s.path, s.key, s.ctype = r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&s.body)
		got <- s
		_, _ = io.WriteString(w, `{"confirmation":"c1"}`)
	}))
	defer srv.Close()

	svc := agent.NewHTTPService(srv.URL+"/", agent.NewHTTPClient(5*time.Second))
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
	want := map[string]string{"orderId": `"order-1"`, "step": `"` + testStep + `"`, "input": `{"items":[]}`, "previous": `{"validate":{"ok":true}}`}
	if len(s.body) != len(want) {
		t.Errorf("body fields %v, want %v", s.body, want)
	}
	for k, v := range want {
		if string(s.body[k]) != v {
			t.Errorf("body %s = %s, want %s", k, s.body[k], v)
		}
	}
	if e := svc.Endpoint(stepRequest()); e != srv.URL+"/v1/steps/"+testStep {
		t.Errorf("Endpoint = %s", e)
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
			if agent.IsPermanent(err) != tt.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, agent.IsPermanent(err), tt.permanent)
			}
			if agent.IsUncertain(err) != tt.uncertain || agent.FaultOf(err).Uncertain != tt.uncertain {
				t.Errorf("IsUncertain(%v) = %v, want %v", err, agent.IsUncertain(err), tt.uncertain)
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
		if err == nil || agent.IsPermanent(err) || !errors.Is(err, context.Canceled) {
			t.Errorf("Do = %v, want a transient context error", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := agent.NewHTTPService(url, agent.NewHTTPClient(5*time.Second)).Do(context.Background(), stepRequest())
		if err == nil || agent.IsPermanent(err) {
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
		if err == nil || agent.IsPermanent(err) {
			t.Errorf("Do = %v, want a transient error", err)
		}
	})
}

func TestHTTPServiceBadInputIsPermanent(t *testing.T) {
	t.Parallel()
	r := stepRequest()
	r.Input = json.RawMessage(`{broken`)
	_, err := agent.NewHTTPService("http://127.0.0.1:1", agent.NewHTTPClient(time.Second)).Do(context.Background(), r)
	if !agent.IsPermanent(err) {
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

	type post struct {
		path, key string
		body      []byte
	}
	posts := make(chan post, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posts <- post{r.URL.Path, r.Header.Get("Idempotency-Key"), b}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	svc := agent.NewHTTPService(srv.URL, agent.NewHTTPClient(5*time.Second))

	tests := []struct {
		golden, path string
		req          agent.Request
		call         func(context.Context, agent.Request) (json.RawMessage, error)
	}{
		{"step-request.json", "/v1/steps/charge-payment", perform, svc.Do},
		{"compensate-request.json", "/v1/steps/charge-payment/compensate", undo, svc.Compensate},
	}
	for _, tc := range tests {
		if _, err := tc.call(context.Background(), tc.req); err != nil {
			t.Fatalf("%s: %v", tc.golden, err)
		}
		got := <-posts
		golden.Equal(t, filepath.Join("..", "remote", "testdata", tc.golden), got.body)
		if got.path != tc.path || got.key != tc.req.IdempotencyKey {
			t.Errorf("%s: posted to %s under key %q", tc.golden, got.path, got.key)
		}
	}
}
