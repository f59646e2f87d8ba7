package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
)

// reply is one scripted answer of a remote.
type reply struct {
	status     int
	retryAfter string
	body       string
}

func conflict(code string) reply {
	return reply{status: http.StatusConflict, body: fmt.Sprintf(`{"code":%q,"message":"m"}`, code)}
}

var ok = reply{status: http.StatusOK, body: `{"confirmation":"c1"}`}

// scripted serves answers in turn, the last one to every call after it; it
// returns its URL and a count of the calls.
func scripted(t *testing.T, answers ...reply) (string, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		a := answers[min(n, len(answers)-1)]
		n++
		mu.Unlock()
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestAgentRetriesAKeyInProgress: a 409 in_progress says another call with
// the key is still at work, so the agent asks again (after the remote's
// Retry-After, if any) until it gets the stored result, while CompleteBy
// allows; it counts as a try that may have been applied; and it does not
// count against the remote's breaker. A 409 compensated, or any other
// 409, is permanent.
func TestAgentRetriesAKeyInProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answers []reply
		// wantOutcome is empty for no reply at all.
		wantOutcome   message.Outcome
		wantCode      string
		wantUncertain bool
		wantCalls     int // -1: more than 10
		wantWait      time.Duration
	}{
		{name: "in progress, then the stored result", answers: []reply{conflict(remote.CodeInProgress), conflict(remote.CodeInProgress), ok},
			wantOutcome: message.Succeeded, wantCalls: 3},
		{name: "in progress with a Retry-After waits it out",
			answers:     []reply{{status: http.StatusConflict, retryAfter: "7", body: `{"code":"in_progress","message":"busy"}`}, ok},
			wantOutcome: message.Succeeded, wantCalls: 2, wantWait: 7 * time.Second},
		{name: "in progress as an RFC 9457 type", answers: []reply{{status: http.StatusConflict,
			body: `{"type":"in_progress","title":"Conflict","status":409}`}, ok},
			wantOutcome: message.Succeeded, wantCalls: 2},
		// The other call may apply it: no reply, and the Supervisor's
		// recovery retries under the same key.
		{name: "in progress until the deadline sends nothing", answers: []reply{conflict(remote.CodeInProgress)}, wantCalls: -1},
		{name: "in progress, then a rejection, is uncertain",
			answers:     []reply{conflict(remote.CodeInProgress), {status: http.StatusUnprocessableEntity, body: `{"code":"rejected","message":"no"}`}},
			wantOutcome: message.Failed, wantCode: "rejected", wantUncertain: true, wantCalls: 2},
		{name: "compensated is permanent", answers: []reply{conflict(remote.CodeCompensated)},
			wantOutcome: message.Failed, wantCode: remote.CodeCompensated, wantCalls: 1},
		{name: "another 409 is permanent", answers: []reply{conflict("idempotency_conflict")},
			wantOutcome: message.Failed, wantCode: "idempotency_conflict", wantCalls: 1},
		{name: "a 409 without a code is permanent", answers: []reply{{status: http.StatusConflict, body: "busy"}},
			wantOutcome: message.Failed, wantCode: "http_409", wantCalls: 1},
		{name: "in_progress on another status follows the status", answers: []reply{{status: http.StatusUnprocessableEntity,
			body: `{"code":"in_progress","message":"m"}`}},
			wantOutcome: message.Failed, wantCode: remote.CodeInProgress, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, calls := scripted(t, tt.answers...)
			cfg := testConfig()
			cfg.RemoteBaseURL = url
			// Two failures would open it: in_progress answers must not.
			cfg.BreakerFailures = 2
			clk := clock.NewFake(t0)
			breakers := agent.NewBreakers(cfg.BreakerFailures, cfg.BreakerCooldown, clk)
			sl := &fakeSleep{clk: clk}
			out := newOutbox(t, cfg.ResponseQueueURL)
			h, err := agent.New(cfg, agent.NewHTTPService(url, agent.NewHTTPClient(5*time.Second)), out.sender(), actor.Deps{Clock: clk},
				agent.WithSleep(sl.sleep), agent.WithJitter(func() float64 { return 0.5 }), agent.WithBreakers(breakers))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
				record("m1", message.Encode(agentRequest("order-1", t0))),
			}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %v, %v", failedIDs(resp), err)
			}
			switch n := calls(); {
			case tt.wantCalls == -1 && n <= 10, tt.wantCalls >= 0 && n != tt.wantCalls:
				t.Errorf("%d calls, want %d", n, tt.wantCalls)
			}
			replies := out.replies()
			if tt.wantOutcome == "" {
				if len(replies) != 0 {
					t.Fatalf("replies %+v, want none", replies)
				}
			} else {
				if len(replies) != 1 {
					t.Fatalf("replies %+v, want one %s", replies, tt.wantOutcome)
				}
				r := replies[0]
				if r.Outcome != tt.wantOutcome || (r.Fault == nil) != (tt.wantCode == "") ||
					r.Fault != nil && (r.Fault.Code != tt.wantCode || r.Fault.Uncertain != tt.wantUncertain) {
					t.Errorf("reply %+v fault %+v, want %s %q uncertain %v", r, r.Fault, tt.wantOutcome, tt.wantCode, tt.wantUncertain)
				}
			}
			if tt.wantWait > 0 && (len(sl.waits) == 0 || sl.waits[0] < tt.wantWait) {
				t.Errorf("waits %v, want a first wait of at least %v", sl.waits, tt.wantWait)
			}
			if s := breakers.For(url + remote.StepPath(testStep)).State(); s != agent.Closed {
				t.Errorf("breaker %v after %d calls, want closed", s, calls())
			}
		})
	}
}

// TestADuplicateRequestWhileTheFirstCallRunsDoesNotStopTheOrder: SQS
// delivers a request twice, to two agents (two Lambda instances), and the
// copy reaches the remote while the first call holds the key. The copy's
// agent is answered 409 in_progress and asks again once the first is done;
// the first's agent, whose try timed out, is answered in_progress too until
// the effect lands. Both reply Succeeded with the one effect's output.
func TestADuplicateRequestWhileTheFirstCallRunsDoesNotStopTheOrder(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)),
		remotesim.WithFaults(remotesim.Faults{InProgressFor: remotesim.Duration(time.Millisecond)}))
	key := "order-1/" + testStep
	sim.Script(key, remotesim.HangThenApply)
	cfg := testConfig()
	cfg.RemoteBaseURL = serveSim(t, sim)
	// The first try ends on its own timeout; the remote keeps the key. The
	// timeout leaves the copy time to reach the remote while the key is
	// held, under the race detector too.
	cfg.RemoteTimeout = 500 * time.Millisecond
	// Waits of a millisecond on the fake clock: a budget of 30 s allows
	// thousands of tries, far more than the first call's work outlasts.
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, time.Millisecond
	svc := func() agent.Service { return agent.NewHTTPService(cfg.RemoteBaseURL, agent.NewHTTPClient(time.Second)) }
	first := newHarness(t, cfg, svc())
	firstDone := make(chan struct{})
	// The copy's agent waits for the first to be done before asking again,
	// so its tries do not run out of the budget on the fake clock while the
	// remote works in real time.
	copySleep := &fakeSleep{clk: clock.NewFake(t0)}
	second := newHarness(t, cfg, svc(), agent.WithSleep(func(ctx context.Context, d time.Duration) error {
		select {
		case <-firstDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		return copySleep.sleep(ctx, d)
	}))

	body := message.Encode(agentRequest("order-1", t0))
	errs := make(chan error, 1)
	go func() {
		defer close(firstDone)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "first"})
		resp, err := first.h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("m1", body)}})
		if err == nil && len(resp.BatchItemFailures) != 0 {
			err = fmt.Errorf("failures %v", failedIDs(resp))
		}
		errs <- err
	}()
	// Only the remote knows when the first call holds the key.
	await.Until(t, 10*time.Second, "the first call holding the key", func() (bool, error) { return sim.InProgress(key), nil })
	if resp := second.handle(t, record("m1-copy", body)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the copy: failures %v", failedIDs(resp))
	}
	if err := <-errs; err != nil {
		t.Fatalf("the first: %v", err)
	}

	var outputs []string
	for _, a := range []struct {
		name string
		hs   *harness
	}{{"first", first}, {"copy", second}} {
		name, r := a.name, a.hs.out.replies()
		if len(r) != 1 || r[0].Outcome != message.Succeeded {
			var got []string
			for _, x := range r {
				got = append(got, fmt.Sprintf("%s %+v", x.Outcome, x.Fault))
			}
			t.Fatalf("the %s's replies %v, want one Succeeded", name, got)
		}
		var o remotesim.Output
		if err := json.Unmarshal(r[0].Output, &o); err != nil || o.OrderID != "order-1" {
			t.Fatalf("the %s's output %s: %v", name, r[0].Output, err)
		}
		outputs = append(outputs, string(r[0].Output))
	}
	if outputs[0] != outputs[1] {
		t.Errorf("outputs %s and %s, want the one stored result", outputs[0], outputs[1])
	}
	if n := sim.EffectCount(key); n != 1 {
		t.Errorf("applied %d times, want once", n)
	}
	if len(copySleep.waits) == 0 {
		t.Error("the copy never waited: it was not answered in_progress")
	}
}

// A 409 in_progress from one replica is an answer of a working replica:
// the replicas share the key's state, so another would answer the same. It
// neither opens that replica's breaker nor keeps the next try from it, and
// the step completes when the key's result is in.
func TestInProgressOnOneReplicaCountsForIt(t *testing.T) {
	t.Parallel()
	a, aCalls := scripted(t, conflict(remote.CodeInProgress), conflict(remote.CodeInProgress), ok)
	b, bCalls := scripted(t, ok)
	cfg := testConfig()
	cfg.RemoteBaseURL, cfg.RemoteBaseURLs = "", []string{a, b}
	cfg.BreakerFailures = 1
	clk := clock.NewFake(t0)
	breakers := agent.NewBreakers(cfg.BreakerFailures, cfg.BreakerCooldown, clk)
	sl := &fakeSleep{clk: clk}
	out := newOutbox(t, cfg.ResponseQueueURL)
	h, err := agent.New(cfg, agent.NewReplicatedHTTPService(cfg.Endpoints(), agent.NewHTTPClient(5*time.Second)), out.sender(), actor.Deps{Clock: clk},
		agent.WithSleep(sl.sleep), agent.WithJitter(func() float64 { return 0.5 }), agent.WithBreakers(breakers),
		agent.WithRouteDraw(func(int) int { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", message.Encode(agentRequest("order-1", t0))),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", failedIDs(resp), err)
	}
	replies := out.replies()
	if len(replies) != 1 || replies[0].Outcome != message.Succeeded {
		t.Fatalf("replies %+v, want one Succeeded", replies)
	}
	for _, u := range []string{a, b} {
		if s := breakers.For(u + remote.StepPath(testStep)).State(); s != agent.Closed {
			t.Errorf("%s's breaker %v after in_progress answers, want closed", u, s)
		}
	}
	// Ties go to the first listed, A: had its in_progress counted against
	// it, the second try would have gone to B.
	if aCalls() != 3 || bCalls() != 0 {
		t.Errorf("calls A %d, B %d: want every try on A, the third answered", aCalls(), bCalls())
	}
}
