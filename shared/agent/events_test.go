package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

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
	steps := workflow.Default().StepNames()
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

// sampleAgentConfig is the configuration of the Agent deployed for step, read
// from the environment the stack gives it.
func sampleAgentConfig(t *testing.T, step, responseQueueURL string) agent.Config {
	t.Helper()
	env := map[string]string{
		"AGENT_STEP":         step,
		"RESPONSE_QUEUE_URL": responseQueueURL,
		"REMOTE_BASE_URL":    "https://remote.example.com",
		"REQUEST_QUEUE_URL":  "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-" + step,
	}
	cfg, err := agent.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	return cfg
}

// sentReply is one message the handler sent.
type sentReply struct {
	queueURL string
	delay    time.Duration
	body     string
}

// sampleRun is a handler with a recording fake service and reply sender.
type sampleRun struct {
	mu    sync.Mutex
	calls []agent.Request
	sent  []sentReply
	logs  logtest.Buffer
	h     *agent.Handler
}

func newSampleRun(t *testing.T, cfg agent.Config, now time.Time) *sampleRun {
	t.Helper()
	r := &sampleRun{}
	svc := agent.ServiceFunc(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, req)
		return json.RawMessage(sampleOutput), nil
	})
	send := sendFunc(func(_ context.Context, queueURL, body string, delay time.Duration) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sent = append(r.sent, sentReply{queueURL: queueURL, delay: delay, body: body})
		return nil
	})
	noSleep := func(context.Context, time.Duration) error {
		t.Error("the handler waited, but the service never failed")
		return nil
	}
	log := slog.New(slog.NewJSONHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := agent.New(cfg, svc, send, actor.Deps{Clock: clock.NewFake(now), Log: log}, agent.WithSleep(noSleep))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.h = h
	return r
}

func (r *sampleRun) handle(t *testing.T, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "0f6e1c8a-2b4d-4e7f-9a1c-3d5b7e9f1a2c"})
	resp, err := r.h.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("Handle returned an error (the whole batch would be redelivered): %v", err)
	}
	return resp
}

func TestSampleAgentRequestEvent(t *testing.T) {
	t.Parallel()
	ev, want, received := sampleAgentRequest(t)
	queueURL := sampleResponseQueueURL(t)
	// The stack deploys one Agent per step with AGENT_STEP set to the step's
	// name; the sample comes from the queue of its step's Agent.
	cfg := sampleAgentConfig(t, want.Step, queueURL)
	r := newSampleRun(t, cfg, received)

	if resp := r.handle(t, ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures = %+v, want none", resp.BatchItemFailures)
	}

	if len(r.calls) != 1 {
		t.Fatalf("the service was called %d times, want once", len(r.calls))
	}
	got := r.calls[0]
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
		t.Errorf("service previous has steps %v, the sample %v", mapKeys(got.Previous), mapKeys(want.Previous))
	}

	if len(r.sent) != 1 {
		t.Fatalf("sent %d replies, want 1", len(r.sent))
	}
	s := r.sent[0]
	if s.queueURL != queueURL || s.delay != 0 {
		t.Errorf("reply sent to %s with delay %v, want %s without delay", s.queueURL, s.delay, queueURL)
	}
	reply, err := message.DecodeAgentReply(s.body)
	if err != nil {
		t.Fatalf("the reply is not a valid agent reply: %v\n%s", err, s.body)
	}
	if reply.OrderID != want.OrderID || reply.Step != want.Step || reply.StepIndex != want.StepIndex || reply.Attempt != want.Attempt {
		t.Errorf("reply = order %s step %s (index %d) attempt %d, want order %s step %s (index %d) attempt %d",
			reply.OrderID, reply.Step, reply.StepIndex, reply.Attempt, want.OrderID, want.Step, want.StepIndex, want.Attempt)
	}
	if reply.Outcome != message.Succeeded || reply.Fault != nil || !jsonEqual(t, reply.Output, json.RawMessage(sampleOutput)) {
		t.Errorf("reply outcome %s, fault %+v, output %s; want Succeeded with the service's output", reply.Outcome, reply.Fault, reply.Output)
	}

	var logged bool
	for _, l := range r.logs.Records(t) {
		if l["msg"] == "reply sent" && l["orderId"] == want.OrderID && l["agentStep"] == want.Step {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no \"reply sent\" log line for order %s, step %s:\n%s", want.OrderID, want.Step, r.logs.String())
	}
}

// An Agent deployed for another step must not perform the sample's step: the
// request is poison (a wiring mistake) and goes back to the queue, towards its
// dead-letter queue.
func TestSampleAgentRequestIsPoisonToOtherSteps(t *testing.T) {
	t.Parallel()
	ev, want, received := sampleAgentRequest(t)
	queueURL := sampleResponseQueueURL(t)
	for _, step := range workflow.Default().StepNames() {
		if step == want.Step {
			continue
		}
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			r := newSampleRun(t, sampleAgentConfig(t, step, queueURL), received)
			resp := r.handle(t, ev)
			if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].MessageId {
				t.Errorf("batch item failures = %+v, want the sample's record %s", resp.BatchItemFailures, ev.Records[0].MessageId)
			}
			if len(r.calls) != 0 || len(r.sent) != 0 {
				t.Errorf("%d service calls and %d replies, want none", len(r.calls), len(r.sent))
			}
		})
	}
}

// Delivered at or after its completeBy, the sample is dropped without a call
// and without a reply: the Supervisor owns the step by then.
func TestSampleAgentRequestTooLate(t *testing.T) {
	t.Parallel()
	ev, want, _ := sampleAgentRequest(t)
	r := newSampleRun(t, sampleAgentConfig(t, want.Step, sampleResponseQueueURL(t)), want.CompleteBy)
	if resp := r.handle(t, ev); len(resp.BatchItemFailures) != 0 {
		t.Errorf("batch item failures = %+v, want none (a late request is deleted)", resp.BatchItemFailures)
	}
	if len(r.calls) != 0 || len(r.sent) != 0 {
		t.Errorf("%d service calls and %d replies, want none", len(r.calls), len(r.sent))
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

func mapKeys(m map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(m))
}
