package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	testStep     = "reserve-inventory"
	testQueueURL = "https://sqs.example.com/123/responses"
	budget       = 30 * time.Second
)

func testConfig() agent.Config {
	return agent.Config{
		Step:             testStep,
		ResponseQueueURL: testQueueURL,
		RemoteBaseURL:    "https://remote.example.com",
		RemoteTimeout:    5 * time.Second,
		RetryBase:        100 * time.Millisecond,
		RetryMax:         2 * time.Second,
		BreakerFailures:  1000,
		BreakerCooldown:  5 * time.Second,
		Concurrency:      4,
		SafetyMargin:     500 * time.Millisecond,
		MaxReceiveCount:  5,
		RequestQueueURL:  "https://sqs.example.com/123/agent-" + testStep,
	}
}

// sendFunc is a function-type fake of agent.ReplySender.
type sendFunc func(ctx context.Context, queueURL, body string, delay time.Duration) error

func (f sendFunc) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	return f(ctx, queueURL, body, delay)
}

var _ agent.ReplySender = sendFunc(nil)

// outbox records the replies sent, failing those whose order is in fail.
type outbox struct {
	t    *testing.T
	fail map[string]bool
	mu   sync.Mutex
	sent []message.AgentReply
}

func (o *outbox) sender() sendFunc {
	return func(_ context.Context, queueURL, body string, delay time.Duration) error {
		if queueURL != testQueueURL || delay != 0 {
			o.t.Errorf("Send(%q, delay %v), want %q without delay", queueURL, delay, testQueueURL)
		}
		r, err := message.DecodeAgentReply(body)
		if err != nil {
			o.t.Errorf("sent an invalid reply %s: %v", body, err)
		}
		if o.fail[r.OrderID] {
			return errors.New("sqs unavailable")
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		o.sent = append(o.sent, r)
		return nil
	}
}

func (o *outbox) replies() []message.AgentReply {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]message.AgentReply(nil), o.sent...)
}

// fakeSleep advances the fake clock instead of waiting, and records waits.
type fakeSleep struct {
	clk   *clock.Fake
	mu    sync.Mutex
	waits []time.Duration
}

func (s *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	s.clk.Advance(d)
	return ctx.Err()
}

func agentRequest(orderID string, now time.Time, mutate ...func(*message.AgentRequest)) message.AgentRequest {
	m := message.AgentRequest{
		V:              message.Version,
		Kind:           message.KindAgentRequest,
		OrderID:        orderID,
		Step:           testStep,
		StepIndex:      0,
		Attempt:        2,
		CompleteBy:     now.Add(budget),
		IdempotencyKey: orderID + "/" + testStep,
		Input:          json.RawMessage(`{"items":[{"sku":"A","quantity":1}]}`),
		Previous:       map[string]json.RawMessage{"validate": json.RawMessage(`{"ok":true}`)},
	}
	for _, f := range mutate {
		f(&m)
	}
	return m
}

func record(id string, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

type harness struct {
	clk   *clock.Fake
	sleep *fakeSleep
	out   *outbox
	logs  *logtest.Buffer
	h     *agent.Handler
}

func newHarness(t *testing.T, cfg agent.Config, svc agent.Service, opts ...agent.Option) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	hs := &harness{clk: clk, sleep: &fakeSleep{clk: clk}, out: &outbox{t: t, fail: map[string]bool{}}, logs: &logtest.Buffer{}}
	log := slog.New(slog.NewJSONHandler(hs.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]agent.Option{agent.WithSleep(hs.sleep.sleep), agent.WithJitter(func() float64 { return 0.5 })}, opts...)
	h, err := agent.New(cfg, svc, hs.out.sender(), actor.Deps{Clock: clk, Log: log}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs.h = h
	return hs
}

// calls counts a service's calls per order.
type calls struct {
	mu sync.Mutex
	n  map[string]int
	rs []agent.Request
}

func (c *calls) add(r agent.Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.OrderID]++
	c.rs = append(c.rs, r)
	return c.n[r.OrderID]
}

func (c *calls) count(orderID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[orderID]
}

func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()
	big := json.RawMessage(`"` + strings.Repeat("x", message.MaxBodyBytes) + `"`)
	type want struct {
		outcome   message.Outcome
		code      string
		output    string
		uncertain bool
	}
	tests := []struct {
		name string
		// service builds the Do of the step; n is the call number for the order.
		service      func(clk *clock.Fake) func(ctx context.Context, r agent.Request, n int) (json.RawMessage, error)
		mutate       func(*message.AgentRequest)
		body         string // replaces the encoded request when set
		sendFails    bool
		wantReply    *want
		wantFailed   bool
		wantCalls    int // -1: more than one
		wantLog      string
		wantMinWaits int
	}{
		{
			name: "success sends a Succeeded reply",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return json.RawMessage(`{ "reservation": "R1" }`), nil
				}
			},
			wantReply: &want{outcome: message.Succeeded, output: `{"reservation":"R1"}`},
			wantCalls: 1,
			wantLog:   "reply sent",
		},
		{
			name: "transient failures then success",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(_ context.Context, _ agent.Request, n int) (json.RawMessage, error) {
					if n < 3 {
						return nil, errors.New("connection reset")
					}
					return json.RawMessage(`{"ok":true}`), nil
				}
			},
			wantReply:    &want{outcome: message.Succeeded, output: `{"ok":true}`},
			wantCalls:    3,
			wantMinWaits: 2,
		},
		{
			name: "permanent failure sends a Failed reply",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return nil, fmt.Errorf("reserve: %w", agent.Reject("out_of_stock", "SKU A is sold out"))
				}
			},
			wantReply: &want{outcome: message.Failed, code: "out_of_stock"},
			wantCalls: 1,
			wantLog:   "step failed permanently",
		},
		{
			// A try that timed out may have been applied; the 409 of the
			// next (the key is still in progress) proves nothing.
			name: "permanent failure after an ambiguous try is uncertain",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(_ context.Context, _ agent.Request, n int) (json.RawMessage, error) {
					if n == 1 {
						return nil, context.DeadlineExceeded
					}
					return nil, agent.Permanent(&agent.RemoteError{Status: 409, Code: "in_progress", Message: "a request with this key is in progress"})
				}
			},
			wantReply: &want{outcome: message.Failed, code: "in_progress", uncertain: true},
			wantCalls: 2,
		},
		{
			// Turned away before anything was done: still certain.
			name: "permanent failure after a 429 is certain",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(_ context.Context, _ agent.Request, n int) (json.RawMessage, error) {
					if n == 1 {
						return nil, &agent.RemoteError{Status: 429, Code: "http_429", Message: "slow down"}
					}
					return nil, agent.Reject("out_of_stock", "SKU A is sold out")
				}
			},
			wantReply: &want{outcome: message.Failed, code: "out_of_stock"},
			wantCalls: 2,
		},
		{
			name: "output over the step's limit fails uncertainly",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return json.RawMessage(`"` + strings.Repeat("x", workflow.DefaultMaxOutputBytes) + `"`), nil
				}
			},
			wantReply: &want{outcome: message.Failed, code: agent.CodeOutputTooLarge, uncertain: true},
			wantCalls: 1,
		},
		{
			name: "transient until the deadline sends nothing and deletes",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return nil, errors.New("503")
				}
			},
			wantCalls:    -1,
			wantMinWaits: 5,
			wantLog:      "step failed transiently until the deadline, sending nothing",
		},
		{
			name: "arrives after the deadline: dropped without a call",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return json.RawMessage(`{}`), nil
				}
			},
			mutate:    func(m *message.AgentRequest) { m.CompleteBy = t0 },
			wantCalls: 0,
			wantLog:   "deadline passed, sending nothing",
		},
		{
			name: "success after the deadline sends nothing",
			service: func(clk *clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					clk.Advance(budget + time.Second)
					return json.RawMessage(`{}`), nil
				}
			},
			wantCalls: 1,
			wantLog:   "deadline passed, sending nothing",
		},
		{
			name: "permanent failure after the deadline sends nothing",
			service: func(clk *clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					clk.Advance(budget)
					return nil, agent.Reject("rejected", "no")
				}
			},
			wantCalls: 1,
		},
		{
			name: "reply send failure redelivers",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return json.RawMessage(`{}`), nil
				}
			},
			sendFails:  true,
			wantFailed: true,
			wantCalls:  1,
			wantLog:    "sending the reply failed",
		},
		{
			name: "poison body redelivers towards the DLQ",
			body: `{"v":1,"kind":"agent.request"`,
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return nil
			},
			wantFailed: true,
			wantLog:    "poison agent request",
		},
		{
			name: "request for another step is poison",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return nil
			},
			mutate:     func(m *message.AgentRequest) { m.Step = "charge-payment" },
			wantFailed: true,
			wantLog:    "another step",
		},
		{
			name: "output that is not JSON fails permanently",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return json.RawMessage(`{nope`), nil
				}
			},
			wantReply: &want{outcome: message.Failed, code: agent.CodeInvalidOutput, uncertain: true},
			wantCalls: 1,
		},
		{
			name: "output too large for a message fails permanently",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return big, nil
				}
			},
			wantReply: &want{outcome: message.Failed, code: agent.CodeOutputTooLarge, uncertain: true},
			wantCalls: 1,
		},
		{
			name: "a panicking service redelivers",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					panic("bug")
				}
			},
			wantFailed: true,
			wantCalls:  1,
			wantLog:    "panic while handling a record",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c calls
			var do func(context.Context, agent.Request, int) (json.RawMessage, error)
			svc := agent.ServiceFunc(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
				n := c.add(r)
				if _, ok := ctx.Deadline(); !ok {
					t.Errorf("try without a deadline")
				}
				return do(ctx, r, n)
			})
			hs := newHarness(t, testConfig(), svc)
			do = tt.service(hs.clk)
			req := agentRequest("order-1", t0)
			if tt.mutate != nil {
				tt.mutate(&req)
			}
			body := message.Encode(req)
			if tt.body != "" {
				body = tt.body
			}
			if tt.sendFails {
				hs.out.fail["order-1"] = true
			}
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-123"})

			resp, err := hs.h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("m1", body)}})
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}

			if got := failedIDs(resp); tt.wantFailed != (len(got) == 1 && got[0] == "m1") || (!tt.wantFailed && len(got) > 0) {
				t.Errorf("batch item failures %v, want failed=%v", got, tt.wantFailed)
			}
			switch got := c.count("order-1"); {
			case tt.wantCalls == -1 && got < 2:
				t.Errorf("service called %d times, want retries", got)
			case tt.wantCalls >= 0 && got != tt.wantCalls:
				t.Errorf("service called %d times, want %d", got, tt.wantCalls)
			}
			sent := hs.out.replies()
			if tt.wantReply == nil {
				if len(sent) != 0 {
					t.Errorf("sent %+v, want nothing", sent)
				}
			} else {
				if len(sent) != 1 {
					t.Fatalf("sent %d replies, want 1", len(sent))
				}
				r := sent[0]
				if r.OrderID != req.OrderID || r.Step != req.Step || r.StepIndex != req.StepIndex || r.Attempt != req.Attempt {
					t.Errorf("reply %+v does not match request %+v", r, req)
				}
				if r.Outcome != tt.wantReply.outcome {
					t.Errorf("outcome %s, want %s", r.Outcome, tt.wantReply.outcome)
				}
				if tt.wantReply.output != "" && string(r.Output) != tt.wantReply.output {
					t.Errorf("output %s, want %s", r.Output, tt.wantReply.output)
				}
				if tt.wantReply.code != "" && (r.Fault == nil || r.Fault.Code != tt.wantReply.code) {
					t.Errorf("fault %+v, want code %s", r.Fault, tt.wantReply.code)
				}
				if r.Fault != nil && r.Fault.Uncertain != tt.wantReply.uncertain {
					t.Errorf("fault %+v, want uncertain %v", r.Fault, tt.wantReply.uncertain)
				}
				if tt.wantReply.outcome == message.Succeeded && tt.wantReply.output == "" && r.Action.Undo() && len(r.Output) != 0 {
					t.Errorf("undo output of %d bytes kept", len(r.Output))
				}
			}
			for _, r := range c.rs {
				if r.IdempotencyKey != req.IdempotencyKey || r.Attempt != req.Attempt || r.Step != req.Step ||
					string(r.Input) != string(req.Input) || string(r.Previous["validate"]) != `{"ok":true}` {
					t.Errorf("service got %+v, want the request's fields", r)
				}
			}
			hs.sleep.mu.Lock()
			waits := len(hs.sleep.waits)
			hs.sleep.mu.Unlock()
			if waits < tt.wantMinWaits {
				t.Errorf("%d waits between tries, want at least %d", waits, tt.wantMinWaits)
			}
			logs := hs.logs.String()
			if tt.wantLog != "" && !strings.Contains(logs, tt.wantLog) {
				t.Errorf("logs lack %q:\n%s", tt.wantLog, logs)
			}
			if !strings.Contains(logs, `"requestId":"req-123"`) {
				t.Errorf("logs lack the Lambda request ID:\n%s", logs)
			}
		})
	}
}

func TestHandlerLogsOrderStepAttempt(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(), agent.ServiceFunc(func(context.Context, agent.Request) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}))
	body := message.Encode(agentRequest("order-9", t0))
	if _, err := hs.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m9", body)}}); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(hs.logs.String()), "\n") {
		if strings.Contains(l, "reply sent") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("log line is not JSON: %s", l)
			}
		}
	}
	if line["orderId"] != "order-9" || line["step"] != testStep || line["attempt"] != float64(2) || line["messageId"] != "m9" {
		t.Errorf("log line %v lacks orderId, step, attempt or messageId", line)
	}
}

func TestHandlerBatchIsolation(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(), agent.ServiceFunc(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if r.OrderID == "order-perm" {
			return nil, agent.Reject("rejected", "no")
		}
		return json.RawMessage(`{"ok":true}`), nil
	}))
	hs.out.fail["order-nosend"] = true
	ev := events.SQSEvent{Records: []events.SQSMessage{
		record("ok1", message.Encode(agentRequest("order-1", t0))),
		record("poison", "not json"),
		record("ok2", message.Encode(agentRequest("order-2", t0))),
		record("wrongstep", message.Encode(agentRequest("order-3", t0, func(m *message.AgentRequest) { m.Step = "charge-payment" }))),
		record("late", message.Encode(agentRequest("order-4", t0, func(m *message.AgentRequest) { m.CompleteBy = t0.Add(-time.Second) }))),
		record("perm", message.Encode(agentRequest("order-perm", t0))),
		record("nosend", message.Encode(agentRequest("order-nosend", t0))),
	}}
	resp, err := hs.h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, id := range failedIDs(resp) {
		got[id] = true
	}
	if len(got) != 3 || !got["poison"] || !got["wrongstep"] || !got["nosend"] {
		t.Errorf("failures %v, want poison, wrongstep and nosend", failedIDs(resp))
	}
	outcomes := map[string]message.Outcome{}
	for _, r := range hs.out.replies() {
		outcomes[r.OrderID] = r.Outcome
	}
	want := map[string]message.Outcome{"order-1": message.Succeeded, "order-2": message.Succeeded, "order-perm": message.Failed}
	if len(outcomes) != len(want) {
		t.Errorf("replies %v, want %v", outcomes, want)
	}
	for k, v := range want {
		if outcomes[k] != v {
			t.Errorf("reply for %s = %q, want %q", k, outcomes[k], v)
		}
	}
}

func TestHandlerBoundsConcurrency(t *testing.T) {
	t.Parallel()
	const records, limit = 6, 2
	var (
		mu       sync.Mutex
		inflight int
		peak     int
	)
	entered := make(chan struct{}, records)
	release := make(chan struct{})
	cfg := testConfig()
	cfg.Concurrency = limit
	hs := newHarness(t, cfg, agent.ServiceFunc(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		return json.RawMessage(`{}`), nil
	}))
	var ev events.SQSEvent
	for i := range records {
		id := fmt.Sprintf("order-%d", i)
		ev.Records = append(ev.Records, record(id, message.Encode(agentRequest(id, t0))))
	}
	done := make(chan events.SQSEventResponse)
	go func() {
		resp, _ := hs.h.Handle(context.Background(), ev)
		done <- resp
	}()
	// Two records in flight at once proves they run concurrently.
	<-entered
	<-entered
	for range records {
		release <- struct{}{}
	}
	resp := <-done
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("failures %v", failedIDs(resp))
	}
	if peak > limit {
		t.Errorf("%d records in flight, limit %d", peak, limit)
	}
	if n := len(hs.out.replies()); n != records {
		t.Errorf("%d replies, want %d", n, records)
	}
}

func TestHandlerWaitsForOpenBreaker(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.BreakerFailures = 2
	cfg.BreakerCooldown = 5 * time.Second
	var c calls
	svc := agent.ServiceFunc(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if c.add(r) <= 3 {
			return nil, errors.New("503")
		}
		return json.RawMessage(`{}`), nil
	})
	clk := clock.NewFake(t0)
	breakers := agent.NewBreakers(cfg.BreakerFailures, cfg.BreakerCooldown, clk)
	sl := &fakeSleep{clk: clk}
	out := &outbox{t: t, fail: map[string]bool{}}
	h, err := agent.New(cfg, svc, out.sender(), actor.Deps{Clock: clk},
		agent.WithSleep(sl.sleep), agent.WithJitter(func() float64 { return 0 }), agent.WithBreakers(breakers))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", message.Encode(agentRequest("order-1", t0))),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", failedIDs(resp), err)
	}
	// Calls 1 and 2 open the breaker; the loop waits out the cooldown, the
	// probe (call 3) fails and reopens it, the next probe (call 4) succeeds.
	if got := c.count("order-1"); got != 4 {
		t.Errorf("service called %d times, want 4", got)
	}
	cooldowns := 0
	for _, w := range sl.waits {
		if w == cfg.BreakerCooldown {
			cooldowns++
		}
	}
	if cooldowns != 2 {
		t.Errorf("waits %v, want two full cooldowns", sl.waits)
	}
	if r := out.replies(); len(r) != 1 || r[0].Outcome != message.Succeeded {
		t.Errorf("replies %+v, want one Succeeded", r)
	}
	if s := breakers.For(testStep).State(); s != agent.Closed {
		t.Errorf("breaker %v, want closed", s)
	}
}

func TestHandlerLambdaOutOfTime(t *testing.T) {
	t.Parallel()
	var c calls
	hs := newHarness(t, testConfig(), agent.ServiceFunc(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		c.add(r)
		return json.RawMessage(`{}`), nil
	}))
	// The Lambda's own deadline has passed, although CompleteBy has not.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	resp, err := hs.h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		record("m1", message.Encode(agentRequest("order-1", t0))),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", failedIDs(resp), err)
	}
	if c.count("order-1") != 0 || len(hs.out.replies()) != 0 {
		t.Errorf("called %d times and sent %d replies without time left", c.count("order-1"), len(hs.out.replies()))
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	svc := agent.ServiceFunc(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })
	send := sendFunc(func(context.Context, string, string, time.Duration) error { return nil })
	bad := testConfig()
	bad.Concurrency, bad.ResponseQueueURL = 0, ""
	tests := []struct {
		name    string
		cfg     agent.Config
		svc     agent.Service
		replies agent.ReplySender
		want    []string // every problem, reported at once
	}{
		{"bad config", bad, svc, send, []string{"Concurrency=0 must be within 1..100", "ResponseQueueURL is required"}},
		{"no service", testConfig(), nil, send, []string{"needs a Service"}},
		{"no reply sender", testConfig(), svc, nil, []string{"needs a ReplySender"}},
		{"everything wrong", bad, nil, nil, []string{"Concurrency=0", "ResponseQueueURL is required", "needs a Service", "needs a ReplySender"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := agent.New(tt.cfg, tt.svc, tt.replies, actor.Deps{})
			if err == nil || h != nil {
				t.Fatalf("New = %v, %v; want an error", h, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// The zero Deps work: the system clock and a logger that discards.
func TestNewWithZeroDeps(t *testing.T) {
	t.Parallel()
	out := &outbox{t: t, fail: map[string]bool{}}
	h, err := agent.New(testConfig(), agent.ServiceFunc(func(context.Context, agent.Request) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}), out.sender(), actor.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	// CompleteBy is read on the system clock: a request due a minute from
	// now is answered, one due a minute ago is not.
	now := time.Now()
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", message.Encode(agentRequest("order-1", now.Add(time.Minute-budget)))),
		record("m2", message.Encode(agentRequest("order-2", now.Add(-time.Minute-budget)))),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", failedIDs(resp), err)
	}
	if r := out.replies(); len(r) != 1 || r[0].OrderID != "order-1" {
		t.Errorf("replies %+v, want one for order-1", r)
	}
}

// Every log line names the step once: New adds agentStep, and a logger that
// already carries it would write it twice.
func TestLogLinesNameTheStepOnce(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(), agent.ServiceFunc(func(context.Context, agent.Request) (json.RawMessage, error) {
		return nil, errors.New("503")
	}))
	resp, err := hs.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", message.Encode(agentRequest("order-1", t0))),
		record("m2", "not json"),
	}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("Handle = %v, %v; want m2 failed", failedIDs(resp), err)
	}
	lines := strings.Split(strings.TrimSpace(hs.logs.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("only %d log lines:\n%s", len(lines), hs.logs.String())
	}
	for _, l := range lines {
		if n := strings.Count(l, `"agentStep":`); n != 1 {
			t.Errorf("agentStep %d times in %s", n, l)
		}
	}
}

// FuzzHandleBody feeds arbitrary bodies to the handler: it must never panic,
// never reply to a body that does not decode, and list such a body as a
// failure.
func FuzzHandleBody(f *testing.F) {
	f.Add(message.Encode(agentRequest("order-1", t0)))
	f.Add(`{"v":1,"kind":"agent.request"}`)
	f.Add(`not json`)
	f.Add(`{"v":1,"kind":"agent.reply","orderId":"o","step":"reserve-inventory","stepIndex":0,"attempt":1,"outcome":"succeeded"}`)
	f.Fuzz(func(t *testing.T, body string) {
		out := &outbox{t: t, fail: map[string]bool{}}
		clk := clock.NewFake(t0)
		sl := &fakeSleep{clk: clk}
		h, err := agent.New(testConfig(), agent.ServiceFunc(func(context.Context, agent.Request) (json.RawMessage, error) {
			return json.RawMessage(`{}`), nil
		}), out.sender(), actor.Deps{Clock: clk}, agent.WithSleep(sl.sleep))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m", body)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, derr := message.DecodeAgentRequest(body); derr != nil {
			if len(resp.BatchItemFailures) != 1 || len(out.replies()) != 0 {
				t.Errorf("undecodable body: failures %v, replies %d", failedIDs(resp), len(out.replies()))
			}
		}
	})
}

// undoer is a Service whose undos return out.
type undoer struct{ out json.RawMessage }

func (u undoer) Do(context.Context, agent.Request) (json.RawMessage, error) {
	return nil, errors.New("not a step")
}
func (u undoer) Compensate(context.Context, agent.Request) (json.RawMessage, error) {
	return u.out, nil
}

// An undo that happened is reported done whatever its output; an output over
// the step's limit is dropped rather than failing the undo.
func TestUndoOutputOverTheLimitIsDropped(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(), undoer{out: json.RawMessage(`"` + strings.Repeat("x", workflow.DefaultMaxOutputBytes) + `"`)})
	req := agentRequest("order-1", t0, func(m *message.AgentRequest) {
		m.Action, m.EffectKey, m.IdempotencyKey = message.Compensate, m.IdempotencyKey, m.IdempotencyKey+"/undo"
	})
	resp, _ := hs.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", message.Encode(req))}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	sent := hs.out.replies()
	if len(sent) != 1 || sent[0].Outcome != message.Succeeded || len(sent[0].Output) != 0 || !sent[0].Action.Undo() {
		t.Fatalf("replies %+v, want one succeeded undo without output", sent)
	}
	if !strings.Contains(hs.logs.String(), "undo output dropped") {
		t.Fatalf("logs lack the dropped output:\n%s", hs.logs.String())
	}
}

// redeliverFunc is a function-type fake of agent.Redeliverer.
type redeliverFunc func(ctx context.Context, rec events.SQSMessage, wait time.Duration) error

func (f redeliverFunc) After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error {
	return f(ctx, rec, wait)
}

// A request whose reply could not be sent comes back within seconds, so it
// can still reply before CompleteBy, not after the queue's visibility
// timeout.
func TestReplySendFailureIsRedeliveredSoon(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var waits []time.Duration
	svc := agent.ServiceFunc(func(context.Context, agent.Request) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
	hs := newHarness(t, testConfig(), svc, agent.WithRedelivery(redeliverFunc(func(_ context.Context, rec events.SQSMessage, wait time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if rec.MessageId != "m1" {
			t.Errorf("redelivered %s", rec.MessageId)
		}
		waits = append(waits, wait)
		return nil
	})))
	hs.out.fail["order-1"] = true
	rec := record("m1", message.Encode(agentRequest("order-1", t0)))
	rec.Attributes["ApproximateReceiveCount"] = "2"
	resp, _ := hs.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 1 || waits[0] != 2*time.Second {
		t.Fatalf("redelivery waits %v, want [2s]", waits)
	}
}
