package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
)

// undoRequest is the compensation of stepRequest's step, keyed as the
// Scheduler keys it (workflow.CompensationKey).
func undoRequest() agent.Request {
	r := stepRequest()
	r.Action = message.Compensate
	r.EffectKey = r.IdempotencyKey
	r.IdempotencyKey = r.EffectKey + "/undo"
	return r
}

// simService serves the real simulator and returns an HTTPService calling it.
func simService(t *testing.T) (*remotesim.Sim, *agent.HTTPService) {
	t.Helper()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close) // runs first: releases hanging calls srv.Close waits for
	return sim, agent.NewHTTPService(srv.URL, agent.NewHTTPClient(5*time.Second))
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
	if _, err := svc.Compensate(ctx, undoRequest()); err == nil || agent.IsPermanent(err) {
		t.Fatalf("Compensate through ApplyThenFail = %v, want a transient error", err)
	}
	first, err := svc.Compensate(ctx, undoRequest())
	if err != nil {
		t.Fatalf("Compensate: %v", err)
	}
	again, err := svc.Compensate(ctx, undoRequest())
	if err != nil || string(again) != string(first) {
		t.Errorf("Compensate again = %s, %v; want the stored %s", again, err, first)
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
	out, err := svc.Compensate(ctx, undoRequest())
	if err != nil {
		t.Fatalf("Compensate: %v", err)
	}
	if u := decodeUndo(t, out); u.Undone {
		t.Errorf("undo of nothing %+v", u)
	}
	_, err = svc.Do(ctx, stepRequest())
	if !agent.IsPermanent(err) {
		t.Fatalf("Do after the undo = %v, want a permanent error", err)
	}
	var re *agent.RemoteError
	if !errors.As(err, &re) || re.Status != http.StatusConflict {
		t.Errorf("Do after the undo = %v, want a 409 RemoteError", err)
	}
	if f := agent.FaultOf(err); f.Code != "compensated" {
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
			_, err := svc.Compensate(context.Background(), tt.req())
			if err == nil || agent.IsPermanent(err) != tt.permanent {
				t.Fatalf("Compensate = %v, want permanent %v", err, tt.permanent)
			}
			var re *agent.RemoteError
			if tt.wantCode != "" && (!errors.As(err, &re) || re.Code != tt.wantCode) {
				t.Errorf("Compensate = %v, want remote code %q", err, tt.wantCode)
			}
			if sim.Calls() != tt.wantCalls || len(sim.Compensations()) != 0 {
				t.Errorf("calls %d compensations %v, want %d calls and none", sim.Calls(), sim.Compensations(), tt.wantCalls)
			}
		})
	}
}

func TestHTTPServiceSendsTheCompensation(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, key, ctype, accept string
		body                             map[string]json.RawMessage
	}
	got := make(chan seen, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, key: r.Header.Get("Idempotency-Key"),
			ctype: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept")}
		_ = json.NewDecoder(r.Body).Decode(&s.body)
		got <- s
		_, _ = io.WriteString(w, `{"undone":true}`)
	}))
	defer srv.Close()
	svc := agent.NewHTTPService(srv.URL+"/", agent.NewHTTPClient(5*time.Second))

	req := undoRequest()
	out, err := svc.Compensate(context.Background(), req)
	if err != nil || string(out) != `{"undone":true}` {
		t.Fatalf("Compensate = %s, %v", out, err)
	}
	s := <-got
	if s.method != http.MethodPost || s.path != "/v1/steps/"+testStep+"/compensate" || s.key != "order-1/"+testStep+"/undo" ||
		s.ctype != "application/json" || s.accept != "application/json" {
		t.Errorf("request %s %s key %q type %q accept %q", s.method, s.path, s.key, s.ctype, s.accept)
	}
	want := map[string]string{"orderId": `"order-1"`, "step": `"` + testStep + `"`, "effectKey": `"order-1/` + testStep + `"`,
		"input": `{"items":[]}`, "previous": `{"validate":{"ok":true}}`}
	if len(s.body) != len(want) {
		t.Errorf("body fields %v, want %v", s.body, want)
	}
	for k, v := range want {
		if string(s.body[k]) != v {
			t.Errorf("body %s = %s, want %s", k, s.body[k], v)
		}
	}

	// Compensate takes the undo route even when the caller left Action
	// unset, and Do the step's route even for a Compensate action.
	req.Action = ""
	if _, err := svc.Compensate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.path != "/v1/steps/"+testStep+"/compensate" {
		t.Errorf("Compensate without an action posted to %s", s.path)
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
			out, err := svc.Compensate(ctx, undoRequest())
			if err != nil || out != nil {
				t.Fatalf("Compensate = %d bytes, %v; want done without output", len(out), err)
			}
			if n := sim.CompensationCount(undoRequest().EffectKey); n != 1 {
				t.Fatalf("undone %d times", n)
			}
		})
	}
}
