package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

const (
	testStep     = "reserve-inventory"
	testQueueURL = "https://sqs.example.com/123/responses"
	budget       = 30 * time.Second
	// testRequestID is the Lambda request ID harness.handle runs under.
	testRequestID = "req-123"
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
// Every reply must be a valid one, sent to queueURL without delay.
type outbox struct {
	t        *testing.T
	queueURL string
	fail     map[string]bool
	mu       sync.Mutex
	sent     []message.AgentReply
}

func newOutbox(t *testing.T, queueURL string) *outbox {
	return &outbox{t: t, queueURL: queueURL, fail: map[string]bool{}}
}

func (o *outbox) sender() sendFunc {
	return func(_ context.Context, queueURL, body string, delay time.Duration) error {
		if queueURL != o.queueURL || delay != 0 {
			o.t.Errorf("Send(%q, delay %v), want %q without delay", queueURL, delay, o.queueURL)
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

func (s *fakeSleep) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waits)
}

// emptyOK is a Service's Do that succeeds at once with an empty object.
func emptyOK(context.Context, agent.Request) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
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

// newHarness builds a handler at t0 whose waits advance the fake clock and
// whose replies must go to cfg's response queue.
func newHarness(t *testing.T, cfg agent.Config, svc agent.Service, opts ...agent.Option) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	hs := &harness{clk: clk, sleep: &fakeSleep{clk: clk}, out: newOutbox(t, cfg.ResponseQueueURL), logs: &logtest.Buffer{}}
	log := slog.New(slog.NewJSONHandler(hs.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]agent.Option{agent.WithSleep(hs.sleep.sleep), agent.WithJitter(func() float64 { return 0.5 })}, opts...)
	h, err := agent.New(cfg, svc, hs.out.sender(), actor.Deps{Clock: clk, Log: log}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs.h = h
	return hs
}

// handle runs a batch under a Lambda context; Handle must not return an
// error, which would redeliver the whole batch.
func (hs *harness) handle(t *testing.T, recs ...events.SQSMessage) events.SQSEventResponse {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: testRequestID})
	resp, err := hs.h.Handle(ctx, events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatalf("Handle returned an error (the whole batch would be redelivered): %v", err)
	}
	return resp
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
					return nil, fmt.Errorf("reserve: %w", step.Reject("out_of_stock", "SKU A is sold out"))
				}
			},
			wantReply: &want{outcome: message.Failed, code: "out_of_stock"},
			wantCalls: 1,
			wantLog:   "step failed permanently",
		},
		{
			// A try that ends as if the Lambda had died (a code step's
			// fault point) is neither retried nor answered: its message
			// comes back.
			name: "a try that ends without an answer is redelivered, silently",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(context.Context, agent.Request, int) (json.RawMessage, error) {
					return nil, fmt.Errorf("%w: crashed after the effect", agent.ErrRedeliver)
				}
			},
			wantFailed: true,
			wantCalls:  1,
			wantLog:    "the try ended without an answer",
		},
		{
			// Another try holds the key: an answer, tried again until it is
			// done.
			name: "in progress then done",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(_ context.Context, _ agent.Request, n int) (json.RawMessage, error) {
					if n < 3 {
						return nil, step.Uncertain(fmt.Errorf("%w: held", agent.ErrInProgress))
					}
					return json.RawMessage(`{"ok":true}`), nil
				}
			},
			wantReply:    &want{outcome: message.Succeeded, output: `{"ok":true}`},
			wantCalls:    3,
			wantMinWaits: 2,
		},
		{
			// A try that timed out may have been applied; the rejection of
			// the next (a service that does not replay under its key)
			// proves nothing.
			name: "permanent failure after an ambiguous try is uncertain",
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return func(_ context.Context, _ agent.Request, n int) (json.RawMessage, error) {
					if n == 1 {
						return nil, context.DeadlineExceeded
					}
					return nil, step.Permanent(&agent.RemoteError{Status: 422, Code: "rejected", Message: "out of stock"})
				}
			},
			wantReply: &want{outcome: message.Failed, code: "rejected", uncertain: true},
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
					return nil, step.Reject("out_of_stock", "SKU A is sold out")
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
					return nil, step.Reject("rejected", "no")
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
			wantLog:    `"level":"WARN","msg":"` + actor.BatchItemFailed + `"`,
		},
		{
			name: "poison body redelivers towards the DLQ",
			body: `{"v":1,"kind":"agent.request"`,
			service: func(*clock.Fake) func(context.Context, agent.Request, int) (json.RawMessage, error) {
				return nil
			},
			wantFailed: true,
			wantLog:    `"level":"ERROR","msg":"` + actor.BatchItemFailed + `","agentStep":"reserve-inventory","requestId":"` + testRequestID + `","messageId":"m1","reason":"poison agent request"`,
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
			svc := step.Func(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
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

			resp := hs.handle(t, record("m1", body))
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
			if waits := hs.sleep.count(); waits < tt.wantMinWaits {
				t.Errorf("%d waits between tries, want at least %d", waits, tt.wantMinWaits)
			}
			logs := hs.logs.String()
			if tt.wantLog != "" && !strings.Contains(logs, tt.wantLog) {
				t.Errorf("logs lack %q:\n%s", tt.wantLog, logs)
			}
			// One line per record reported as a batch item failure, which
			// the stack's BatchItemFailures metric counts.
			want := 0
			if tt.wantFailed {
				want = 1
			}
			if n := strings.Count(logs, `"msg":"`+actor.BatchItemFailed+`"`); n != want {
				t.Errorf("%d %q lines, want %d:\n%s", n, actor.BatchItemFailed, want, logs)
			}
			if !strings.Contains(logs, `"requestId":"`+testRequestID+`"`) {
				t.Errorf("logs lack the Lambda request ID:\n%s", logs)
			}
		})
	}
}

func TestHandlerLogsOrderStepAttempt(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(), step.Func(emptyOK))
	hs.handle(t, record("m9", message.Encode(agentRequest("order-9", t0))))
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
	hs := newHarness(t, testConfig(), step.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if r.OrderID == "order-perm" {
			return nil, step.Reject("rejected", "no")
		}
		return json.RawMessage(`{"ok":true}`), nil
	}))
	hs.out.fail["order-nosend"] = true
	resp := hs.handle(t,
		record("ok1", message.Encode(agentRequest("order-1", t0))),
		record("poison", "not json"),
		record("ok2", message.Encode(agentRequest("order-2", t0))),
		record("wrongstep", message.Encode(agentRequest("order-3", t0, func(m *message.AgentRequest) { m.Step = "charge-payment" }))),
		record("late", message.Encode(agentRequest("order-4", t0, func(m *message.AgentRequest) { m.CompleteBy = t0.Add(-time.Second) }))),
		record("perm", message.Encode(agentRequest("order-perm", t0))),
		record("nosend", message.Encode(agentRequest("order-nosend", t0))),
	)
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
	hs := newHarness(t, cfg, step.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
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

// workerKey marks the context a test's Workers gives each record.
type workerKey struct{}

// TestHandlerRunsRecordsThroughItsWorkers: with WithWorkers, Handle runs
// every record of a batch through the Workers given, once, bounded by
// Concurrency, in the context the Workers hands each one, and reports the
// records to redeliver whatever order they ran in.
func TestHandlerRunsRecordsThroughItsWorkers(t *testing.T) {
	t.Parallel()
	var (
		runs       int
		gotN, gotL int
	)
	// Last record first, each in a context of its own.
	reversed := func(ctx context.Context, n, limit int, work func(ctx context.Context, i int)) {
		runs++
		gotN, gotL = n, limit
		for i := n - 1; i >= 0; i-- {
			work(context.WithValue(ctx, workerKey{}, i), i)
		}
	}
	var c calls
	hs := newHarness(t, testConfig(), step.Func(func(ctx context.Context, r agent.Request) (json.RawMessage, error) {
		if _, ok := ctx.Value(workerKey{}).(int); !ok {
			t.Errorf("order %s ran outside the context its worker was given", r.OrderID)
		}
		c.add(r)
		return json.RawMessage(`{}`), nil
	}), agent.WithWorkers(reversed))
	resp := hs.handle(t,
		record("m0", message.Encode(agentRequest("order-0", t0))),
		record("m1", "{not a request"),
		record("m2", message.Encode(agentRequest("order-2", t0))),
	)
	if runs != 1 || gotN != 3 || gotL != testConfig().Concurrency {
		t.Errorf("workers ran %d times with n=%d limit=%d, want once with n=3 limit=%d", runs, gotN, gotL, testConfig().Concurrency)
	}
	if got := failedIDs(resp); len(got) != 1 || got[0] != "m1" {
		t.Errorf("failures %v, want [m1]", got)
	}
	var orders []string
	for _, r := range c.rs {
		orders = append(orders, r.OrderID)
	}
	if strings.Join(orders, ",") != "order-2,order-0" {
		t.Errorf("the service ran %v, want order-2 then order-0 (the workers' order)", orders)
	}
	if n := len(hs.out.replies()); n != 2 {
		t.Errorf("%d replies, want 2", n)
	}
}

func TestHandlerWaitsForOpenBreaker(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.BreakerFailures = 2
	cfg.BreakerCooldown = 5 * time.Second
	var c calls
	svc := step.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if c.add(r) <= 3 {
			return nil, errors.New("503")
		}
		return json.RawMessage(`{}`), nil
	})
	clk := clock.NewFake(t0)
	breakers := agent.NewBreakers(cfg.BreakerFailures, cfg.BreakerCooldown, clk)
	sl := &fakeSleep{clk: clk}
	out := newOutbox(t, cfg.ResponseQueueURL)
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
	hs := newHarness(t, testConfig(), step.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
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
	svc := step.Func(func(context.Context, agent.Request) (json.RawMessage, error) { return nil, nil })
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
			if h != nil {
				t.Errorf("New = %v, %v; want no handler", h, err)
			}
			configtest.Problems(t, "New", err, tt.want...)
		})
	}
}

// The zero Deps work: the system clock and a logger that discards.
func TestNewWithZeroDeps(t *testing.T) {
	t.Parallel()
	out := newOutbox(t, testQueueURL)
	h, err := agent.New(testConfig(), step.Func(emptyOK), out.sender(), actor.Deps{})
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
	hs := newHarness(t, testConfig(), step.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
		return nil, errors.New("503")
	}))
	resp := hs.handle(t, record("m1", message.Encode(agentRequest("order-1", t0))), record("m2", "not json"))
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v; want m2 failed", failedIDs(resp))
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
		hs := newHarness(t, testConfig(), step.Func(emptyOK))
		resp := hs.handle(t, record("m", body))
		if _, derr := message.DecodeAgentRequest(body); derr != nil {
			if len(resp.BatchItemFailures) != 1 || len(hs.out.replies()) != 0 {
				t.Errorf("undecodable body: failures %v, replies %d", failedIDs(resp), len(hs.out.replies()))
			}
		}
	})
}

// undoer is a Service whose undos return out.
type undoer struct{ out json.RawMessage }

func (u undoer) Do(context.Context, agent.Request) (json.RawMessage, error) {
	return nil, errors.New("not a step")
}
func (u undoer) Undo(context.Context, agent.Request) (json.RawMessage, error) {
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
	if resp := hs.handle(t, record("m1", message.Encode(req))); len(resp.BatchItemFailures) != 0 {
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
	hs := newHarness(t, testConfig(), step.Func(emptyOK), agent.WithRedelivery(redeliverFunc(func(_ context.Context, rec events.SQSMessage, wait time.Duration) error {
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
	if resp := hs.handle(t, rec); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 1 || waits[0] != 2*time.Second {
		t.Fatalf("redelivery waits %v, want [2s]", waits)
	}
}

// The sample events under events/ are what developers invoke the function
// with locally; running them here keeps them from drifting from the handler.

// sampleOutput is what the fake remote service answers to the sample.
const sampleOutput = `{"chargeId":"ch-3f9a2c71","amountCents":4248,"currency":"EUR"}`

// sampleAgentRequest loads events/agent-request.json, checks it is one record
// as an Agent's queue delivers it, and decodes the message it carries.
func sampleAgentRequest(t *testing.T) (events.SQSEvent, message.AgentRequest, time.Time) {
	t.Helper()
	ev := eventsample.Load[events.SQSEvent](t, "agent-request.json")
	if len(ev.Records) != 1 {
		t.Fatalf("agent-request.json has %d records, want 1", len(ev.Records))
	}
	rec := ev.Records[0]
	m, err := message.DecodeAgentRequest(rec.Body)
	if err != nil {
		t.Fatalf("agent-request.json: the body is not an agent request: %v", err)
	}
	steps := workflow.Reference().StepNames()
	if m.StepIndex < 0 || m.StepIndex >= len(steps) || steps[m.StepIndex] != m.Step {
		t.Fatalf("agent-request.json: step %q at index %d is not a step of the workflow %v", m.Step, m.StepIndex, steps)
	}
	if want := m.OrderID + "/" + m.Step; m.IdempotencyKey != want {
		t.Errorf("agent-request.json: idempotencyKey %q, want %q", m.IdempotencyKey, want)
	}
	if !strings.HasSuffix(rec.EventSourceARN, ":sas-agent-"+m.Step) {
		t.Errorf("agent-request.json: eventSourceARN %s is not the queue of step %s", rec.EventSourceARN, m.Step)
	}
	ms, err := strconv.ParseInt(rec.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
	if err != nil {
		t.Fatalf("agent-request.json: ApproximateFirstReceiveTimestamp: %v", err)
	}
	received := time.UnixMilli(ms).UTC()
	if !received.Before(m.CompleteBy) {
		t.Fatalf("agent-request.json: received at %v, not before its completeBy %v", received, m.CompleteBy)
	}
	return ev, m, received
}

// sampleResponseQueueURL is the URL of the queue the Scheduler's reply sample
// (events/scheduler-agent-reply.json) comes from: the Agent replies there.
func sampleResponseQueueURL(t *testing.T) string {
	t.Helper()
	replies := eventsample.Load[events.SQSEvent](t, "scheduler-agent-reply.json")
	if len(replies.Records) == 0 {
		t.Fatal("scheduler-agent-reply.json has no records")
	}
	// arn:aws:sqs:<region>:<account>:<name>
	parts := strings.Split(replies.Records[0].EventSourceARN, ":")
	if len(parts) != 6 || parts[2] != "sqs" {
		t.Fatalf("scheduler-agent-reply.json: eventSourceARN %q is not a queue", replies.Records[0].EventSourceARN)
	}
	return "https://sqs." + parts[3] + ".amazonaws.com/" + parts[4] + "/" + parts[5]
}

// sampleHarness is the Agent the stack deploys for step, configured from
// the environment it gives it, replying to the sample's response queue, at
// now. Its service answers sampleOutput and records the calls in c.
func sampleHarness(t *testing.T, stepName string, now time.Time, c *calls) *harness {
	t.Helper()
	hs := newHarness(t, sampleConfig(t, stepName), step.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		c.add(r)
		return json.RawMessage(sampleOutput), nil
	}))
	hs.clk.Set(now)
	return hs
}

// sampleConfig is the configuration of the Agent of step, as the stack
// deploys it, that the samples are delivered to.
func sampleConfig(t *testing.T, step string) agent.Config {
	t.Helper()
	env := map[string]string{
		"AGENT_STEP":         step,
		"RESPONSE_QUEUE_URL": sampleResponseQueueURL(t),
		"REMOTE_BASE_URL":    "https://remote.example.com",
		"REQUEST_QUEUE_URL":  "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-" + step,
	}
	cfg, err := agent.LoadReferenceConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	return cfg
}

func TestSampleAgentRequestEvent(t *testing.T) {
	t.Parallel()
	ev, want, received := sampleAgentRequest(t)
	// The stack deploys one Agent per step with AGENT_STEP set to the step's
	// name; the sample comes from the queue of its step's Agent.
	var c calls
	hs := sampleHarness(t, want.Step, received, &c)

	if resp := hs.handle(t, ev.Records...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures = %+v, want none", resp.BatchItemFailures)
	}
	if n := hs.sleep.count(); n != 0 {
		t.Errorf("the handler waited %d times, but the service never failed", n)
	}

	if len(c.rs) != 1 {
		t.Fatalf("the service was called %d times, want once", len(c.rs))
	}
	got := c.rs[0]
	if got.OrderID != want.OrderID || got.Step != want.Step || got.StepIndex != want.StepIndex ||
		got.Attempt != want.Attempt || got.IdempotencyKey != want.IdempotencyKey {
		t.Errorf("service request = order %s step %s (index %d) attempt %d key %s; the sample carries order %s step %s (index %d) attempt %d key %s",
			got.OrderID, got.Step, got.StepIndex, got.Attempt, got.IdempotencyKey,
			want.OrderID, want.Step, want.StepIndex, want.Attempt, want.IdempotencyKey)
	}
	if !jsonEqual(t, got.Input, want.Input) {
		t.Errorf("service input = %s, want the sample's %s", got.Input, want.Input)
	}
	if len(want.Previous) == 0 {
		t.Errorf("the sample carries no outputs of earlier steps")
	}
	for step, out := range want.Previous {
		if !jsonEqual(t, got.Previous[step], out) {
			t.Errorf("service previous[%s] = %s, want the sample's %s", step, got.Previous[step], out)
		}
	}
	if len(got.Previous) != len(want.Previous) {
		t.Errorf("service previous = %s, the sample's %s", got.Previous, want.Previous)
	}

	// The outbox holds the replies sent to the sample's response queue
	// without delay that decode as agent replies.
	sent := hs.out.replies()
	if len(sent) != 1 {
		t.Fatalf("sent %d replies, want 1", len(sent))
	}
	reply := sent[0]
	if reply.OrderID != want.OrderID || reply.Step != want.Step || reply.StepIndex != want.StepIndex || reply.Attempt != want.Attempt {
		t.Errorf("reply = order %s step %s (index %d) attempt %d, want order %s step %s (index %d) attempt %d",
			reply.OrderID, reply.Step, reply.StepIndex, reply.Attempt, want.OrderID, want.Step, want.StepIndex, want.Attempt)
	}
	if reply.Outcome != message.Succeeded || reply.Fault != nil || !jsonEqual(t, reply.Output, json.RawMessage(sampleOutput)) {
		t.Errorf("reply outcome %s, fault %+v, output %s; want Succeeded with the service's output", reply.Outcome, reply.Fault, reply.Output)
	}

	var logged bool
	for _, l := range hs.logs.Records(t) {
		if l["msg"] == "reply sent" && l["orderId"] == want.OrderID && l["agentStep"] == want.Step {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no \"reply sent\" log line for order %s, step %s:\n%s", want.OrderID, want.Step, hs.logs.String())
	}
}

// An Agent deployed for another step must not perform the sample's step: the
// request is poison (a wiring mistake) and goes back to the queue, towards its
// dead-letter queue.
func TestSampleAgentRequestIsPoisonToOtherSteps(t *testing.T) {
	t.Parallel()
	ev, want, received := sampleAgentRequest(t)
	for _, step := range workflow.Reference().StepNames() {
		if step == want.Step {
			continue
		}
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			var c calls
			hs := sampleHarness(t, step, received, &c)
			resp := hs.handle(t, ev.Records...)
			if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].MessageId {
				t.Errorf("batch item failures = %+v, want the sample's record %s", resp.BatchItemFailures, ev.Records[0].MessageId)
			}
			if len(c.rs) != 0 || len(hs.out.replies()) != 0 {
				t.Errorf("%d service calls and %d replies, want none", len(c.rs), len(hs.out.replies()))
			}
		})
	}
}

// Delivered at or after its completeBy, the sample is dropped without a call
// and without a reply: the Supervisor owns the step by then.
func TestSampleAgentRequestTooLate(t *testing.T) {
	t.Parallel()
	ev, want, _ := sampleAgentRequest(t)
	var c calls
	hs := sampleHarness(t, want.Step, want.CompleteBy, &c)
	if resp := hs.handle(t, ev.Records...); len(resp.BatchItemFailures) != 0 {
		t.Errorf("batch item failures = %+v, want none (a late request is deleted)", resp.BatchItemFailures)
	}
	if len(c.rs) != 0 || len(hs.out.replies()) != 0 {
		t.Errorf("%d service calls and %d replies, want none", len(c.rs), len(hs.out.replies()))
	}
}

// jsonEqual compares two JSON documents, ignoring insignificant whitespace.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		t.Errorf("not JSON: %s: %v", a, err)
		return false
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Errorf("not JSON: %s: %v", b, err)
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// TestSampleAgentRequestGoesOnInItsTrace: the sample's AWSTraceHeader is
// the trace the remote call is made in (HTTPService sends it as
// X-Amzn-Trace-Id), and every line about the order carries its traceId.
func TestSampleAgentRequestGoesOnInItsTrace(t *testing.T) {
	t.Parallel()
	ev, want, received := sampleAgentRequest(t)
	sample, err := trace.Parse(ev.Records[0].Attributes[trace.SQSAttribute])
	if err != nil {
		t.Fatalf("the sample's AWSTraceHeader: %v", err)
	}
	var mu sync.Mutex
	var seen []trace.Header
	hs := newHarness(t, sampleConfig(t, want.Step), step.Func(func(ctx context.Context, _ agent.Request) (json.RawMessage, error) {
		h, _ := trace.FromContext(ctx)
		mu.Lock()
		seen = append(seen, h)
		mu.Unlock()
		return json.RawMessage(sampleOutput), nil
	}))
	hs.clk.Set(received)
	if resp := hs.handle(t, ev.Records...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures = %+v, want none", resp.BatchItemFailures)
	}
	if len(seen) != 1 || seen[0] != sample {
		t.Errorf("the service was called in traces %+v, want the sample's %+v", seen, sample)
	}
	lines := 0
	for _, l := range hs.logs.Records(t) {
		if l["orderId"] == want.OrderID {
			lines++
			if l[trace.LogKey] != sample.Root {
				t.Errorf("line %q: traceId %v, want %s", l["msg"], l[trace.LogKey], sample.Root)
			}
		}
	}
	if lines == 0 {
		t.Errorf("no line names order %s:\n%s", want.OrderID, hs.logs.String())
	}
}

// TestAKeyInProgressAndADeadTrySpareTheBreaker: a Service's ErrInProgress
// is an answer of a working service, and a try that ended as if its
// Lambda died says nothing of it; neither opens the step's breaker.
func TestAKeyInProgressAndADeadTrySpareTheBreaker(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.BreakerFailures = 1
	clk := clock.NewFake(t0)
	breakers := agent.NewBreakers(cfg.BreakerFailures, cfg.BreakerCooldown, clk)
	var c calls
	svc := step.Func(func(_ context.Context, r agent.Request) (json.RawMessage, error) {
		if c.add(r) == 1 {
			return nil, fmt.Errorf("%w: held by another try", agent.ErrInProgress)
		}
		return nil, agent.ErrRedeliver
	})
	hs := newHarness(t, cfg, svc, agent.WithBreakers(breakers))
	resp := hs.handle(t, record("m1", message.Encode(agentRequest("order-1", hs.clk.Now()))))
	if got := failedIDs(resp); len(got) != 1 || c.count("order-1") != 2 {
		t.Fatalf("failures %v after %d calls, want m1 back after 2", got, c.count("order-1"))
	}
	if st := breakers.For(testStep).State(); st != agent.Closed {
		t.Fatalf("the breaker is %v, want closed", st)
	}
}
