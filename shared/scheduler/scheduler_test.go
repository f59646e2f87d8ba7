package scheduler

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/actortest"
	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// ---------------------------------------------------------------------------
// The Handler runs on the in-memory state store (through actortest, which
// logs every call of the store, the queues and the topic in one list); a
// test starts from the records it puts there and injects faults with the
// store's Fault hook and the sender's and publisher's Fail.

type redelivered struct {
	messageID string
	wait      time.Duration
}

type redeliverFunc func(ctx context.Context, rec events.SQSMessage, wait time.Duration) error

func (f redeliverFunc) After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error {
	return f(ctx, rec, wait)
}

var (
	_ Store       = (*actortest.Store)(nil)
	_ Sender      = (*actortest.Sender)(nil)
	_ Redeliverer = redeliverFunc(nil)
)

type fixture struct {
	actortest.Doubles
	cfg Config
	clk *clock.Fake
	h   *Handler

	mu        sync.Mutex
	redeliver []redelivered
}

var testNow = time.Date(2025, 2, 4, 10, 15, 30, 0, time.UTC)

var errStore, errQueue, errSNS = actortest.ErrStore, actortest.ErrQueue, actortest.ErrSNS

const orderA, orderB, orderC, orderD, orderE = actortest.OrderA, actortest.OrderB, actortest.OrderC, actortest.OrderD, actortest.OrderE

const (
	queuePrefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	// claimedAttempt is the Attempt a claim of a pendingAt record takes.
	claimedAttempt = 5
	// failureCount is the FailureCount TestReplyFailed's record carries.
	failureCount = 2
)

// testConfig has three steps with distinct budgets, so a test can tell which
// step's budget was used; none can be undone, so a step that stops its
// order puts it in Error.
func testConfig() Config {
	return Config{
		Config: followup.Config{
			OrdersTable: "orders",
			StateTable:  "state",
			Workflows: workflow.Single(workflow.Definition{Name: "order", Version: 1, Steps: []workflow.Step{
				{Name: "reserve-inventory", Budget: 30 * time.Second},
				{Name: "charge-payment", Budget: 45 * time.Second},
				{Name: "ship-goods", Budget: 2 * time.Minute},
			}}),
			Policy: workflow.Policy{
				MaxFailures: 4, ClaimTimeout: 90 * time.Second,
				BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 3 * time.Minute,
				Retention: workflow.DefaultRetention,
			},
			AlertTopicARN:     "arn:aws:sns:eu-west-1:123456789012:alerts",
			SchedulerQueueURL: queuePrefix + "scheduler",
		},
		AgentQueues: map[string]string{
			"reserve-inventory": queuePrefix + "agent-reserve-inventory",
			"charge-payment":    queuePrefix + "agent-charge-payment",
			"ship-goods":        queuePrefix + "agent-ship-goods",
		},
		MaxReceiveCount:  3,
		ResponseQueueURL: queuePrefix + "responses",
		ReplySenders:     map[string]string{"reserve-inventory": senderOf("reserve-inventory"), "charge-payment": senderOf("charge-payment"), "ship-goods": senderOf("ship-goods")},
	}
}

// senderOf is the unique ID of the test's Agent role of step.
func senderOf(step string) string { return "AROA" + strings.ToUpper(strings.ReplaceAll(step, "-", "")) }

func inputOf(orderID string) json.RawMessage {
	return json.RawMessage(`{"orderId":"` + orderID + `","customerId":"customer-42","currency":"EUR",` +
		`"items":[{"sku":"BOOK-0451","quantity":2,"unitPriceCents":1999}],"totalCents":3998}`)
}

func outputOf(step string) json.RawMessage {
	return json.RawMessage(`{"confirmation":"` + step + `-ok"}`)
}

// history is the step history of a record at step current: the steps before
// it succeeded with outputOf(name), the current one was claimed once.
func history(d workflow.Definition, current int) []workflow.StepRecord {
	steps := make([]workflow.StepRecord, len(d.Steps))
	for i, s := range d.Steps {
		steps[i] = workflow.StepRecord{Name: s.Name, State: workflow.StepPending}
		switch {
		case i < current:
			steps[i].State, steps[i].Attempts, steps[i].Output = workflow.StepSucceeded, 1, outputOf(s.Name)
		case i == current:
			steps[i].State, steps[i].Attempts = workflow.StepProcessing, 1
		}
	}
	return steps
}

// pendingAt is a record waiting for the claim of its step k (the steps
// before it succeeded), under Attempt claimedAttempt-1.
func pendingAt(cfg Config, orderID string, k int, now time.Time) workflow.State {
	st := recordAt(cfg, orderID, k, claimedAttempt-1, now)
	st.ProcessState, st.CompleteBy = workflow.Pending, now.Add(cfg.Policy.ClaimTimeout)
	st.Steps[k].State, st.Steps[k].Attempts = workflow.StepPending, 0
	return st
}

// processingAt is a record whose step k an Agent works on under attempt,
// its CompleteBy still ahead: the reply of that attempt commits.
func processingAt(cfg Config, orderID string, k, attempt int, now time.Time) workflow.State {
	st := recordAt(cfg, orderID, k, attempt, now)
	st.ProcessState, st.LockedBy = workflow.Processing, "scheduler/earlier/msg-0"
	st.CompleteBy = now.Add(cfg.Workflows.Definitions[0].Steps[k].Lease())
	return st
}

func recordAt(cfg Config, orderID string, k, attempt int, now time.Time) workflow.State {
	st := workflow.NewState(orderID, cfg.Workflows.Definitions[0], inputOf(orderID), now.Add(-time.Hour), now)
	st.StepIndex, st.Step, st.Attempt, st.EventSeq = k, cfg.Workflows.Definitions[0].Steps[k].Name, attempt, k+1
	st.Steps = history(cfg.Workflows.Definitions[0], k)
	return st
}

// newFixture builds a Handler over the doubles, its store holding records.
func newFixture(t *testing.T, cfg Config, now time.Time, records ...workflow.State) *fixture {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	f := &fixture{Doubles: actortest.New(), cfg: cfg, clk: clock.NewFake(now)}
	f.Store.Clock = f.clk // the store's reads expire records by the test's time
	for _, st := range records {
		f.Store.Put(st)
	}
	redeliver := redeliverFunc(func(_ context.Context, rec events.SQSMessage, wait time.Duration) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.redeliver = append(f.redeliver, redelivered{rec.MessageId, wait})
		return nil
	})
	// The logger is actor.Deps's default, which discards.
	h, err := New(cfg, f.Store, f.Send, f.Publish, actor.Deps{Clock: f.clk}, WithRedelivery(redeliver))
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

// handle runs the batch and returns the IDs reported for redelivery.
func (f *fixture) handle(t *testing.T, ctx context.Context, recs ...events.SQSMessage) []string {
	t.Helper()
	resp, err := f.h.Handle(ctx, events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatalf("Handle returned error %v; a batch must report items, never fail whole", err)
	}
	ids := []string{}
	for _, it := range resp.BatchItemFailures {
		ids = append(ids, it.ItemIdentifier)
	}
	return ids
}

// record is an SQS record of body; a reply comes from its step's Agent.
func record(id, body string) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId: id, ReceiptHandle: "AQEB" + id, Body: body,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:scheduler",
		AWSRegion:      "eu-west-1",
	}
	if m, err := message.DecodeAgentReply(body); err == nil {
		rec.Attributes[SenderIDAttr] = senderOf(m.Step) + ":sas-Agent-" + m.Step
	}
	return rec
}

func scheduleBody(orderID string, stepIndex int) string {
	return message.Encode(message.NewSchedule(orderID, "order-v1", stepIndex, "submitted"))
}

func succeededBody(orderID, step string, stepIndex, attempt int) string {
	return message.Encode(message.AgentReply{
		V: message.Version, Kind: message.KindAgentReply, OrderID: orderID,
		Step: step, StepIndex: stepIndex, Attempt: attempt,
		Outcome: message.Succeeded, Output: outputOf(step),
	})
}

func failedBody(orderID, step string, stepIndex, attempt int) string {
	return message.Encode(message.AgentReply{
		V: message.Version, Kind: message.KindAgentReply, OrderID: orderID,
		Step: step, StepIndex: stepIndex, Attempt: attempt,
		Outcome: message.Failed, Fault: &message.Fault{Code: "card-declined", Message: "the issuer declined the card"},
	})
}

// sameJSON reports whether a and b hold equal JSON values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// checkRequest decodes an AgentRequest body strictly and compares it with
// want; JSON fields compare by value, times by instant.
func checkRequest(t *testing.T, body string, want message.AgentRequest) {
	t.Helper()
	got, err := message.DecodeAgentRequest(body)
	if err != nil {
		t.Fatalf("dispatched body is not a valid agent request: %v\n%s", err, body)
	}
	if !sameJSON(t, got.Input, want.Input) {
		t.Errorf("request input = %s, want %s", got.Input, want.Input)
	}
	if len(got.Previous) != len(want.Previous) {
		t.Errorf("request previous = %v, want %v", got.Previous, want.Previous)
	}
	for name, out := range want.Previous {
		if g, ok := got.Previous[name]; !ok || !sameJSON(t, g, out) {
			t.Errorf("request previous[%s] = %s, want %s", name, g, out)
		}
	}
	if !got.CompleteBy.Equal(want.CompleteBy) {
		t.Errorf("request completeBy = %v, want %v", got.CompleteBy, want.CompleteBy)
	}
	got.Input, got.Previous, got.CompleteBy = nil, nil, time.Time{}
	want.Input, want.Previous, want.CompleteBy = nil, nil, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request =\n%+v\nwant\n%+v", got, want)
	}
}

// failAgentQueues fails every send to an agent's queue, as a revoked
// permission would, and lets the rest through.
func failAgentQueues(queueURL, _ string) error {
	if strings.HasPrefix(strings.TrimPrefix(queueURL, queuePrefix), "agent-") {
		return errQueue
	}
	return nil
}

func failEverySend(string, string) error { return errQueue }

// ---------------------------------------------------------------------------
// What each kind of record leads to.

func TestHandleOutcomes(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	apply := func(label string) string { return "Apply " + orderA + " " + label }
	send := func(queue string) string { return "Send " + queue + " " + orderA }
	claim, retried, completed, processed := apply("claimed"), apply("retried"), apply("step-completed"), apply("processed")
	failed, confirm := apply("failed"), apply("alert-sent")
	publish := "Publish not-undoable " + orderA
	reserve, charge, ship, handBack := send("agent-reserve-inventory"), send("agent-charge-payment"), send("agent-ship-goods"), send("scheduler")
	storeFails := func(method, label string) func(*fixture) {
		return func(f *fixture) { f.Store.Fault = actortest.Fault(errStore, method, label) }
	}
	tests := []struct {
		name  string
		seed  workflow.State
		body  string
		setup func(*fixture)
		// wantCalls is every call of the store, queues and topic, in order.
		wantCalls []string
		// redeliver: the record must be reported in BatchItemFailures.
		redeliver bool
		// want is the record after the batch, and wantWrites the writes
		// that took effect.
		want       actortest.Digest
		wantWrites int
	}{
		{
			name: "schedule claimed and dispatched",
			seed: pendingAt(cfg, orderA, 0, testNow), body: scheduleBody(orderA, 0),
			wantCalls: []string{claim, reserve},
			want:      actortest.Digest{State: workflow.Processing, Attempt: claimedAttempt, Locked: true}, wantWrites: 1,
		},
		{
			name: "schedule of a later step goes to that step's queue",
			seed: pendingAt(cfg, orderA, 2, testNow), body: scheduleBody(orderA, 2),
			wantCalls: []string{claim, ship},
			want:      actortest.Digest{State: workflow.Processing, Step: 2, Attempt: claimedAttempt, Locked: true}, wantWrites: 1,
		},
		{
			name: "claim lost (another Scheduler holds it): nothing sent, nothing redelivered",
			seed: processingAt(cfg, orderA, 0, 3, testNow), body: scheduleBody(orderA, 0),
			wantCalls: []string{claim},
			want:      actortest.Digest{State: workflow.Processing, Attempt: 3, Locked: true},
		},
		{
			name: "claim store error: redelivered",
			seed: pendingAt(cfg, orderA, 0, testNow), body: scheduleBody(orderA, 0), setup: storeFails("Apply", "claimed"),
			wantCalls: []string{claim}, redeliver: true,
			want: actortest.Digest{State: workflow.Pending, Attempt: claimedAttempt - 1},
		},
		{
			name: "dispatch fails: a failure counted, handed back after the backoff",
			seed: pendingAt(cfg, orderA, 1, testNow), body: scheduleBody(orderA, 1),
			setup:     func(f *fixture) { f.Send.Fail = failAgentQueues },
			wantCalls: []string{claim, charge, retried, handBack},
			want:      actortest.Digest{State: workflow.Pending, Step: 1, Attempt: claimedAttempt, Failures: 1}, wantWrites: 2,
		},
		{
			name: "dispatch and hand-back send fail: redelivered",
			seed: pendingAt(cfg, orderA, 1, testNow), body: scheduleBody(orderA, 1),
			setup:     func(f *fixture) { f.Send.Fail = failEverySend },
			wantCalls: []string{claim, charge, retried, handBack}, redeliver: true,
			want: actortest.Digest{State: workflow.Pending, Step: 1, Attempt: claimedAttempt, Failures: 1}, wantWrites: 2,
		},
		{
			name: "dispatch fails and the hand-back cannot be written: redelivered",
			seed: pendingAt(cfg, orderA, 1, testNow), body: scheduleBody(orderA, 1),
			setup: func(f *fixture) {
				f.Send.Fail = failAgentQueues
				f.Store.Fault = actortest.Fault(errStore, "Apply", "retried")
			},
			wantCalls: []string{claim, charge, retried}, redeliver: true,
			want: actortest.Digest{State: workflow.Processing, Step: 1, Attempt: claimedAttempt, Locked: true}, wantWrites: 1,
		},
		{
			name: "succeeded reply on a middle step: commit and dispatch the next",
			seed: processingAt(cfg, orderA, 1, 3, testNow), body: succeededBody(orderA, "charge-payment", 1, 3),
			wantCalls: []string{completed, ship},
			want:      actortest.Digest{State: workflow.Processing, Step: 2, Attempt: 4, Locked: true}, wantWrites: 1,
		},
		{
			name: "succeeded reply on the first step",
			seed: processingAt(cfg, orderA, 0, 1, testNow), body: succeededBody(orderA, "reserve-inventory", 0, 1),
			wantCalls: []string{completed, charge},
			want:      actortest.Digest{State: workflow.Processing, Step: 1, Attempt: 2, Locked: true}, wantWrites: 1,
		},
		{
			name: "succeeded reply on the last step: processed, nothing sent",
			seed: processingAt(cfg, orderA, 2, 7, testNow), body: succeededBody(orderA, "ship-goods", 2, 7),
			wantCalls: []string{processed},
			want:      actortest.Digest{State: workflow.Processed, Step: 2, Attempt: 7}, wantWrites: 1,
		},
		{
			name: "stale succeeded reply (a later attempt runs): dropped quietly",
			seed: processingAt(cfg, orderA, 0, 2, testNow), body: succeededBody(orderA, "reserve-inventory", 0, 1),
			wantCalls: []string{completed},
			want:      actortest.Digest{State: workflow.Processing, Attempt: 2, Locked: true},
		},
		{
			name: "stale succeeded reply on the last step: dropped quietly",
			seed: processingAt(cfg, orderA, 2, 2, testNow), body: succeededBody(orderA, "ship-goods", 2, 1),
			wantCalls: []string{processed},
			want:      actortest.Digest{State: workflow.Processing, Step: 2, Attempt: 2, Locked: true},
		},
		{
			name: "commit store error: redelivered",
			seed: processingAt(cfg, orderA, 0, 1, testNow), body: succeededBody(orderA, "reserve-inventory", 0, 1),
			setup:     storeFails("Apply", "step-completed"),
			wantCalls: []string{completed}, redeliver: true,
			want: actortest.Digest{State: workflow.Processing, Attempt: 1, Locked: true},
		},
		{
			// The reply is committed, so redelivering it cannot help; the
			// step is handed back with a failure counted.
			name: "next dispatch fails: handed back, not redelivered",
			seed: processingAt(cfg, orderA, 0, 1, testNow), body: succeededBody(orderA, "reserve-inventory", 0, 1),
			setup:     func(f *fixture) { f.Send.Fail = failEverySend },
			wantCalls: []string{completed, charge, retried, handBack},
			want:      actortest.Digest{State: workflow.Pending, Step: 1, Attempt: 2, Failures: 1}, wantWrites: 2,
		},
		{
			name: "failed reply: fail, alert, confirm",
			seed: processingAt(cfg, orderA, 1, 3, testNow), body: failedBody(orderA, "charge-payment", 1, 3),
			wantCalls: []string{failed, publish, confirm},
			want:      actortest.Digest{State: workflow.Error, Step: 1, Attempt: 3}, wantWrites: 2,
		},
		{
			name: "stale failed reply: dropped quietly",
			seed: processingAt(cfg, orderA, 1, 4, testNow), body: failedBody(orderA, "charge-payment", 1, 3),
			wantCalls: []string{failed},
			want:      actortest.Digest{State: workflow.Processing, Step: 1, Attempt: 4, Locked: true},
		},
		{
			name: "fail store error: redelivered",
			seed: processingAt(cfg, orderA, 1, 3, testNow), body: failedBody(orderA, "charge-payment", 1, 3),
			setup:     storeFails("Apply", "failed"),
			wantCalls: []string{failed}, redeliver: true,
			want: actortest.Digest{State: workflow.Processing, Step: 1, Attempt: 3, Locked: true},
		},
		{
			// The record keeps AlertPending; the Supervisor publishes it later.
			name: "alert not published: not confirmed, not redelivered",
			seed: processingAt(cfg, orderA, 1, 3, testNow), body: failedBody(orderA, "charge-payment", 1, 3),
			setup:     func(f *fixture) { f.Publish.Fail = func(alert.Alert) error { return errSNS } },
			wantCalls: []string{failed, publish},
			want:      actortest.Digest{State: workflow.Error, Step: 1, Attempt: 3, AlertOwed: true}, wantWrites: 1,
		},
		{
			name: "alert published, confirmation fails: not redelivered",
			seed: processingAt(cfg, orderA, 1, 3, testNow), body: failedBody(orderA, "charge-payment", 1, 3),
			setup:     storeFails("Apply", "alert-sent"),
			wantCalls: []string{failed, publish, confirm},
			want:      actortest.Digest{State: workflow.Error, Step: 1, Attempt: 3, AlertOwed: true}, wantWrites: 1,
		},
		{
			name: "alert confirmed by another actor first: not redelivered",
			seed: processingAt(cfg, orderA, 1, 3, testNow), body: failedBody(orderA, "charge-payment", 1, 3),
			setup:     func(f *fixture) { f.Store.Beaten("alert-sent", orderA) },
			wantCalls: []string{failed, publish, confirm},
			// The other actor's confirmation is the second write.
			want: actortest.Digest{State: workflow.Error, Step: 1, Attempt: 3}, wantWrites: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, tt.seed)
			if tt.setup != nil {
				tt.setup(f)
			}
			failed := f.handle(t, context.Background(), record("m1", tt.body))
			want := []string{}
			if tt.redeliver {
				want = []string{"m1"}
			}
			if !slices.Equal(failed, want) {
				t.Errorf("batch item failures = %v, want %v", failed, want)
			}
			f.Calls.Check(t, tt.wantCalls...)
			f.Store.Fault = nil // the store is back, to read the record
			if got := actortest.DigestOf(f.Store.Record(t, orderA)); got != tt.want {
				t.Errorf("record = %+v, want %+v", got, tt.want)
			}
			if got := f.Store.Writes(); got != tt.wantWrites {
				t.Errorf("%d writes took effect, want %d", got, tt.wantWrites)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Schedule message.

func TestScheduleClaimsAndDispatches(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tests := []struct {
		name      string
		stepIndex int
		requestID string // Lambda request ID, "" outside Lambda
		wantOwner string
		previous  map[string]json.RawMessage
	}{
		{
			name: "first step, outside Lambda", stepIndex: 0,
			wantOwner: "scheduler/local/msg-0", previous: map[string]json.RawMessage{},
		},
		{
			name: "second step carries the first step's output", stepIndex: 1, requestID: "8f5c1c1e-req",
			wantOwner: "scheduler/8f5c1c1e-req/msg-1",
			previous:  map[string]json.RawMessage{"reserve-inventory": outputOf("reserve-inventory")},
		},
		{
			name: "last step carries every earlier output", stepIndex: 2, requestID: "0b7d-req",
			wantOwner: "scheduler/0b7d-req/msg-2",
			previous: map[string]json.RawMessage{
				"reserve-inventory": outputOf("reserve-inventory"),
				"charge-payment":    outputOf("charge-payment"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, pendingAt(cfg, orderB, tt.stepIndex, testNow))
			ctx := context.Background()
			if tt.requestID != "" {
				ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: tt.requestID})
			}
			msgID := "msg-" + strconv.Itoa(tt.stepIndex)
			if failed := f.handle(t, ctx, record(msgID, scheduleBody(orderB, tt.stepIndex))); len(failed) != 0 {
				t.Fatalf("batch item failures = %v", failed)
			}
			step := cfg.Workflows.Definitions[0].Steps[tt.stepIndex]
			f.Calls.Check(t, "Apply "+orderB+" claimed", "Send "+strings.TrimPrefix(cfg.AgentQueues[step.Name], queuePrefix)+" "+orderB)
			// The claim: the step, for this invocation and message, until
			// the clock plus the step's budget, under a new Attempt.
			st := f.Store.Record(t, orderB)
			if st.ProcessState != workflow.Processing || st.StepIndex != tt.stepIndex || st.LockedBy != tt.wantOwner ||
				!st.CompleteBy.Equal(testNow.Add(step.Lease())) || st.Attempt != claimedAttempt {
				t.Errorf("claimed record %+v, want step %d Processing for %s until %v under attempt %d",
					st, tt.stepIndex, tt.wantOwner, testNow.Add(step.Lease()), claimedAttempt)
			}
			if h := st.Steps[tt.stepIndex]; h.State != workflow.StepProcessing || h.Attempts != 1 || h.StartedAt == nil || !h.StartedAt.Equal(testNow) {
				t.Errorf("step history %+v, want processing, one attempt, started now", h)
			}
			if !strings.Contains(st.LockedBy, msgID) {
				t.Errorf("owner %q does not name message %s", st.LockedBy, msgID)
			}
			sent := f.Send.Sent()
			if len(sent) != 1 {
				t.Fatalf("sent %d messages, want exactly 1: %+v", len(sent), sent)
			}
			s := sent[0]
			if s.QueueURL != cfg.AgentQueues[step.Name] || s.Delay != 0 {
				t.Errorf("sent to %s with delay %v, want %s without delay", s.QueueURL, s.Delay, cfg.AgentQueues[step.Name])
			}
			checkRequest(t, s.Body, message.AgentRequest{
				V: message.Version, Kind: message.KindAgentRequest, Workflow: "order-v1",
				OrderID: orderB, Step: step.Name, StepIndex: tt.stepIndex, Attempt: claimedAttempt,
				CompleteBy:     testNow.Add(step.Lease()),
				IdempotencyKey: orderB + "/" + step.Name,
				Input:          inputOf(orderB),
				Previous:       tt.previous,
			})
		})
	}
}

// The idempotency key is the same for every attempt of a step, and only the
// Attempt (the fencing token) changes: each claim below follows a timeout
// the Supervisor handed back.
func TestIdempotencyKeyStableAcrossAttempts(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	first := pendingAt(cfg, orderA, 1, testNow)
	first.Attempt = 0
	f := newFixture(t, cfg, testNow, first)
	supervisor := workflow.Machine{Def: cfg.Workflows.Definitions[0], Policy: cfg.Policy}
	for i := range 3 {
		if failed := f.handle(t, context.Background(), record("m"+strconv.Itoa(i), scheduleBody(orderA, 1))); len(failed) != 0 {
			t.Fatalf("batch item failures = %v", failed)
		}
		f.clk.Advance(time.Minute)
		c, due := supervisor.Expired(f.Store.Record(t, orderA), f.clk.Now())
		if !due || c.Transition != workflow.TransitionRetried {
			t.Fatalf("claim %d: the Supervisor decides %q (due %v), want a retry", i, c.Transition, due)
		}
		if _, err := f.Store.Store.Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	sent := f.Send.Sent()
	if len(sent) != 3 {
		t.Fatalf("sent %d messages, want 3", len(sent))
	}
	for i, s := range sent {
		req, err := message.DecodeAgentRequest(s.Body)
		if err != nil {
			t.Fatal(err)
		}
		if req.Attempt != i+1 {
			t.Errorf("request %d: attempt %d, want %d", i, req.Attempt, i+1)
		}
		if want := workflow.IdempotencyKey(orderA, "charge-payment"); req.IdempotencyKey != want {
			t.Errorf("request %d: idempotency key %q, want %q", i, req.IdempotencyKey, want)
		}
		if want := testNow.Add(time.Duration(i)*time.Minute + 45*time.Second); !req.CompleteBy.Equal(want) {
			t.Errorf("request %d: completeBy %v, want %v (the clock when claimed plus the budget)", i, req.CompleteBy, want)
		}
	}
}

// A failed dispatch counts as a failure of the step: the claimed record is
// handed back with the Machine's decision, and a schedule message waits out
// the backoff; at the threshold the order stops with an alert.
func TestDispatchFailureCountsAFailure(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	machine := workflow.Machine{Def: cfg.Workflows.Definitions[0], Policy: cfg.Policy}
	for _, tt := range []struct {
		name string
		seed workflow.State
		body string
	}{
		{name: "schedule", seed: pendingAt(cfg, orderA, 1, testNow), body: scheduleBody(orderA, 1)},
		{
			name: "next step after a reply",
			seed: processingAt(cfg, orderA, 0, 2, testNow), body: succeededBody(orderA, "reserve-inventory", 0, 2),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, tt.seed)
			f.Send.Fail = failAgentQueues
			if failed := f.handle(t, context.Background(), record("m1", tt.body)); len(failed) != 0 {
				t.Errorf("batch item failures = %v; the step was handed back", failed)
			}
			applies := f.Store.Applies()
			if len(applies) != 2 || applies[0].Err != nil || actortest.Label(applies[1].Change) != "retried" {
				t.Fatalf("applies = %+v, want the claim, then a retry", applies)
			}
			// The hand-back is the Machine's decision for the record the
			// claim wrote, naming the send's error.
			claimed, got := applies[0].State, applies[1].Change
			if got.Patch.LastError == nil || !strings.Contains(*got.Patch.LastError, errQueue.Error()) {
				t.Fatalf("hand-back %+v does not name %q", got.Patch, errQueue)
			}
			lastError := *got.Patch.LastError
			want := machine.DispatchFailed(claimed, testNow, lastError[strings.Index(lastError, "failed: ")+len("failed: "):])
			if !reflect.DeepEqual(got, want) {
				t.Errorf("hand-back\n%+v\nwant\n%+v", got, want)
			}
			st := f.Store.Record(t, orderA)
			if st.ProcessState != workflow.Pending || st.StepIndex != 1 || st.FailureCount != 1 || st.LockedBy != "" ||
				st.LastError != lastError || st.Steps[1].Failures != 1 {
				t.Errorf("record after the hand-back %+v", st)
			}
			sent := f.Send.Sent()
			last := sent[len(sent)-1]
			m, err := message.DecodeSchedule(last.Body)
			if err != nil || last.QueueURL != cfg.SchedulerQueueURL || m.OrderID != orderA || m.StepIndex != 1 ||
				m.Reason != "retry" || last.Delay != cfg.Policy.Backoff(1) || last.Delay != want.Handback.Delay {
				t.Errorf("hand-back %+v (%+v, %v), want a retry of step 1 delayed %v", last, m, err, cfg.Policy.Backoff(1))
			}
		})
	}

	t.Run("at the threshold the order stops with an alert", func(t *testing.T) {
		t.Parallel()
		seed := pendingAt(cfg, orderA, 1, testNow)
		seed.FailureCount = cfg.Policy.MaxFailures - 1
		f := newFixture(t, cfg, testNow, seed)
		f.Send.Fail = failAgentQueues
		f.handle(t, context.Background(), record("m1", scheduleBody(orderA, 1)))
		f.Calls.Check(t, "Apply "+orderA+" claimed", "Send agent-charge-payment "+orderA,
			"Apply "+orderA+" gave-up", "Publish dispatch-failed "+orderA, "Publish not-undoable "+orderA, "Apply "+orderA+" alert-sent")
		// The queue needs fixing (a notice), and the order a decision:
		// reserve-inventory has no undo, and charge-payment may have been
		// delivered.
		published := f.Publish.Published()
		if len(published) != 2 || published[0].Kind != alert.KindDispatchFailed || published[1].Kind != alert.KindNotUndoable ||
			!strings.Contains(published[0].LastError, errQueue.Error()) || !strings.Contains(published[1].LastError, errQueue.Error()) {
			t.Fatalf("alerts = %+v, want a dispatch-failed notice and a not-undoable alert, both naming the cause", published)
		}
		if got, want := actortest.DigestOf(f.Store.Record(t, orderA)), (actortest.Digest{State: workflow.Error, Step: 1, Attempt: claimedAttempt, Failures: cfg.Policy.MaxFailures}); got != want {
			t.Errorf("record = %+v, want %+v", got, want)
		}
	})

	t.Run("when nothing can be sent the message comes back after the backoff", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, cfg, testNow, pendingAt(cfg, orderA, 1, testNow))
		f.Send.Fail = failEverySend
		if failed := f.handle(t, context.Background(), record("m1", scheduleBody(orderA, 1))); !slices.Equal(failed, []string{"m1"}) {
			t.Fatalf("batch item failures = %v", failed)
		}
		if want := []redelivered{{"m1", cfg.Policy.Backoff(1)}}; !slices.Equal(f.redeliver, want) {
			t.Fatalf("redeliveries %v, want %v", f.redeliver, want)
		}
	})
}

// A record that failed for a reason that may pass comes back within
// seconds, sooner the earlier the receive; a poison record is left to the
// queue's redrive.
func TestFailedRecordsAreRedeliveredSoon(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	f := newFixture(t, cfg, testNow, processingAt(cfg, orderA, 0, 1, testNow), processingAt(cfg, orderB, 0, 1, testNow))
	f.Store.Fault = actortest.Fault(errStore, "Apply", "step-completed")
	second := record("m2", succeededBody(orderB, "reserve-inventory", 0, 1))
	second.Attributes["ApproximateReceiveCount"] = "3"
	failed := f.handle(t, context.Background(), record("m1", succeededBody(orderA, "reserve-inventory", 0, 1)), second,
		record("m3", `{"v":9}`))
	if !slices.Equal(failed, []string{"m1", "m2", "m3"}) {
		t.Fatalf("batch item failures = %v", failed)
	}
	want := []redelivered{{"m1", time.Second}, {"m2", 4 * time.Second}}
	if !slices.Equal(f.redeliver, want) {
		t.Fatalf("redeliveries %v, want %v (none for the poison record)", f.redeliver, want)
	}
}

// An output over its step's limit is refused where it enters the state: the
// step failed, uncertainly (the remote applied it), and is undone.
func TestReplyWithAnOutputOverItsLimitIsAnUncertainFailure(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Workflows.Definitions[0].Steps[1].MaxOutputBytes = 64
	f := newFixture(t, cfg, testNow, processingAt(cfg, orderA, 1, 3, testNow))
	body := message.Encode(message.AgentReply{
		V: message.Version, Kind: message.KindAgentReply, OrderID: orderA, Step: "charge-payment", StepIndex: 1, Attempt: 3,
		Outcome: message.Succeeded, Output: json.RawMessage(`{"receipt":"` + strings.Repeat("x", 100) + `"}`),
	})
	f.handle(t, context.Background(), record("m1", body))
	f.Calls.Check(t, "Apply "+orderA+" failed", "Publish not-undoable "+orderA, "Apply "+orderA+" alert-sent")
	st := f.Store.Record(t, orderA)
	if len(st.Steps[1].Output) != 0 || st.Steps[1].State != workflow.StepFailed {
		t.Fatalf("step history %+v: the output must not be committed", st.Steps[1])
	}
	if e := st.LastError; !strings.Contains(e, "over its limit of 64 bytes") || !strings.Contains(e, "uncertain") {
		t.Fatalf("failure %q", e)
	}
}

// TestTheCommitMeasuresTheOutputAsTheAgentSentIt: the Scheduler checks a
// reply's output against its step's limit at the bytes the agent measured
// and sent, markup and multi-byte UTF-8 included, keeps those bytes, and
// hands them on in the next step's request as they are.
func TestTheCommitMeasuresTheOutputAsTheAgentSentIt(t *testing.T) {
	t.Parallel()
	const limit = 6 << 10
	sized := func(text string, size int) string {
		const open, closing = `{"receipt":"`, `"}`
		n := size - len(open) - len(closing)
		fill := strings.Repeat(text, n/len(text))
		return open + fill + strings.Repeat("x", n-len(fill)) + closing
	}
	for _, tc := range []struct {
		name string
		out  string
	}{
		{"markup at the limit", sized(`<b>&amp;</b>`, limit)},
		{"markup one byte over", sized(`<b>&amp;</b>`, limit+1)},
		{"multi-byte UTF-8 at the limit", sized("😀é\u2028\u2029", limit)},
		{"multi-byte UTF-8 one byte over", sized("😀é\u2028\u2029", limit+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Workflows.Definitions[0].Steps[0].MaxOutputBytes = limit
			f := newFixture(t, cfg, testNow, processingAt(cfg, orderA, 0, 1, testNow))
			body := message.Encode(message.AgentReply{
				V: message.Version, Kind: message.KindAgentReply, OrderID: orderA, Step: "reserve-inventory", StepIndex: 0, Attempt: 1,
				Outcome: message.Succeeded, Output: json.RawMessage(tc.out),
			})
			f.handle(t, context.Background(), record("m1", body))
			st := f.Store.Record(t, orderA)
			if len(tc.out) > limit {
				want := fmt.Sprintf("has %d bytes, over its limit of %d bytes", len(tc.out), limit)
				if len(st.Steps[0].Output) != 0 || st.Steps[0].State != workflow.StepFailed || !strings.Contains(st.LastError, want) {
					t.Fatalf("step %+v, last error %q; want it failed with %q and no output kept", st.Steps[0], st.LastError, want)
				}
				return
			}
			if got := string(st.Steps[0].Output); st.Steps[0].State != workflow.StepSucceeded || got != tc.out {
				t.Fatalf("step %s with %d bytes of output (last error %q), want succeeded with the %d the agent sent",
					st.Steps[0].State, len(got), st.LastError, len(tc.out))
			}
			sent := f.Send.Sent()
			if len(sent) != 1 {
				t.Fatalf("sent %d messages, want the next step's request", len(sent))
			}
			if !strings.Contains(sent[0].Body, `"previous":{"reserve-inventory":`+tc.out+`}`) {
				t.Errorf("the next request does not carry the output as it came: %.200s…", sent[0].Body)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Agent replies.

func TestReplySucceeded(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	type nextClaim struct {
		step, owner string
		completeBy  time.Time
	}
	tests := []struct {
		name      string
		stepIndex int
		attempt   int
		requestID string
		wantNext  *nextClaim
		// wantPrevious is the Previous of the next step's request.
		wantPrevious map[string]json.RawMessage
	}{
		{
			name: "first step claims the second", stepIndex: 0, attempt: 1,
			wantNext:     &nextClaim{"charge-payment", "scheduler/local/r1", testNow.Add(45 * time.Second)},
			wantPrevious: map[string]json.RawMessage{"reserve-inventory": outputOf("reserve-inventory")},
		},
		{
			name: "second step claims the third", stepIndex: 1, attempt: 6, requestID: "c0ffee",
			wantNext: &nextClaim{"ship-goods", "scheduler/c0ffee/r1", testNow.Add(2 * time.Minute)},
			wantPrevious: map[string]json.RawMessage{
				"reserve-inventory": outputOf("reserve-inventory"),
				"charge-payment":    outputOf("charge-payment"),
			},
		},
		{name: "last step claims nothing", stepIndex: 2, attempt: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, processingAt(cfg, orderC, tt.stepIndex, tt.attempt, testNow))
			ctx := context.Background()
			if tt.requestID != "" {
				ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: tt.requestID})
			}
			step := cfg.Workflows.Definitions[0].Steps[tt.stepIndex].Name
			if failed := f.handle(t, ctx, record("r1", succeededBody(orderC, step, tt.stepIndex, tt.attempt))); len(failed) != 0 {
				t.Fatalf("batch item failures = %v", failed)
			}
			// The step's output is committed, and the next step claimed in
			// the same write, for the reply's own message.
			st := f.Store.Record(t, orderC)
			done := st.Steps[tt.stepIndex]
			if done.State != workflow.StepSucceeded || !sameJSON(t, done.Output, outputOf(step)) || done.FinishedAt == nil || !done.FinishedAt.Equal(testNow) {
				t.Errorf("committed step %+v, want succeeded now with output %s", done, outputOf(step))
			}
			sent := f.Send.Sent()
			if tt.wantNext == nil {
				f.Calls.Check(t, "Apply "+orderC+" processed")
				if st.ProcessState != workflow.Processed || st.LockedBy != "" || st.InFlight || st.Attempt != tt.attempt {
					t.Errorf("record %+v, want Processed, unlocked, out of the Supervisor's index", st)
				}
				if len(sent) != 0 {
					t.Errorf("sent %+v after the last step, want nothing", sent)
				}
				return
			}
			next := tt.wantNext
			f.Calls.Check(t, "Apply "+orderC+" step-completed", "Send "+strings.TrimPrefix(cfg.AgentQueues[next.step], queuePrefix)+" "+orderC)
			if st.ProcessState != workflow.Processing || st.StepIndex != tt.stepIndex+1 || st.Step != next.step ||
				st.LockedBy != next.owner || !st.CompleteBy.Equal(next.completeBy) || st.Attempt != tt.attempt+1 {
				t.Errorf("record %+v, want %+v claimed under attempt %d", st, *next, tt.attempt+1)
			}
			if len(sent) != 1 {
				t.Fatalf("sent %d messages, want exactly 1", len(sent))
			}
			if want := cfg.AgentQueues[next.step]; sent[0].QueueURL != want || sent[0].Delay != 0 {
				t.Errorf("sent to %s with delay %v, want %s", sent[0].QueueURL, sent[0].Delay, want)
			}
			checkRequest(t, sent[0].Body, message.AgentRequest{
				V: message.Version, Kind: message.KindAgentRequest, Workflow: "order-v1",
				OrderID: orderC, Step: next.step, StepIndex: tt.stepIndex + 1,
				Attempt:        tt.attempt + 1,
				CompleteBy:     next.completeBy,
				IdempotencyKey: workflow.IdempotencyKey(orderC, next.step),
				Input:          inputOf(orderC),
				Previous:       tt.wantPrevious,
			})
		})
	}
}

func TestReplyFailed(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	seed := processingAt(cfg, orderC, 1, 3, testNow)
	seed.FailureCount = failureCount
	f := newFixture(t, cfg, testNow, seed)
	if failed := f.handle(t, context.Background(), record("r1", failedBody(orderC, "charge-payment", 1, 3))); len(failed) != 0 {
		t.Fatalf("batch item failures = %v", failed)
	}
	// Publish before confirming; nothing advanced or sent.
	f.Calls.Check(t, "Apply "+orderC+" failed", "Publish not-undoable "+orderC, "Apply "+orderC+" alert-sent")
	// reserve-inventory has no undo and was applied: the order cannot be
	// undone whole, so nothing is, and it waits in Error.
	const fault = "card-declined: the issuer declined the card"
	const lastError = "not undoable: step reserve-inventory was applied and has no undo; " + fault
	st := f.Store.Record(t, orderC)
	if st.ProcessState != workflow.Error || st.StepIndex != 1 || st.Attempt != 3 || st.LastError != lastError ||
		st.LockedBy != "" || !st.CompleteBy.Equal(testNow.Add(cfg.Policy.AlertTimeout)) {
		t.Errorf("record %+v, want Error at step 1 with %q, its alert due by %v", st, lastError, testNow.Add(cfg.Policy.AlertTimeout))
	}
	if h := st.Steps[1]; h.State != workflow.StepFailed || h.Error != fault || h.FinishedAt == nil {
		t.Errorf("step history %+v, want failed with %q", h, fault)
	}
	if st.AlertPending || st.InFlight {
		t.Errorf("alert pending %v, in flight %v: the confirmed alert must take the record out of the Supervisor's index", st.AlertPending, st.InFlight)
	}
	wantAlert := alert.Alert{
		Kind: alert.KindNotUndoable, OrderID: orderC, Workflow: "order-v1", Step: "charge-payment", StepIndex: 1,
		FailureCount: failureCount, MaxFailures: cfg.Policy.MaxFailures, Attempt: 3,
		LastError: lastError, At: testNow, CLI: alert.CLI(""), State: workflow.Error,
	}
	if published := f.Publish.Published(); len(published) != 1 || !reflect.DeepEqual(published[0], wantAlert) {
		t.Fatalf("published = %+v, want [%+v]", published, wantAlert)
	}
	if got, want := f.Store.Changes("alert-sent"), (workflow.Machine{}).AlertSent(orderC, 3, workflow.Error, testNow); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("confirmations = %+v, want [%+v]", got, want)
	}
}

// undoingAt is a record whose undo of step k an Agent works on under
// attempt: the order stopped after its steps up to k succeeded.
func undoingAt(cfg Config, orderID string, k, attempt int, now time.Time) workflow.State {
	st := processingAt(cfg, orderID, k, attempt, now)
	st.ProcessState, st.Steps = workflow.Compensating, history(cfg.Workflows.Definitions[0], k+1)
	st.Steps[k].Compensation = workflow.StepProcessing
	return st
}

// An undo's reply commits the way a step's does: the next undo (last step
// first) is claimed in the same write and dispatched with the outputs of
// its own step and those before it; a permanent fault of an undo needs an
// operator.
func TestUndoReplies(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Workflows.Definitions[0].Steps[0].Compensable, cfg.Workflows.Definitions[0].Steps[1].Compensable = true, true
	undoReply := func(step string, k int, outcome message.Outcome) string {
		m := message.AgentReply{V: message.Version, Kind: message.KindAgentReply, OrderID: orderA, Step: step, StepIndex: k,
			Attempt: 6, Action: message.Compensate, Outcome: outcome, Output: json.RawMessage(`{"refunded":true}`)}
		if outcome == message.Failed {
			m.Output, m.Fault = nil, &message.Fault{Code: "refund-refused", Message: "the charge is disputed"}
		}
		return message.Encode(m)
	}
	tests := []struct {
		name      string
		seed      workflow.State
		body      string
		wantCalls []string
		want      actortest.Digest
	}{
		{
			name: "undo of a later step: the undo of the one before claimed and dispatched",
			seed: undoingAt(cfg, orderA, 1, 6, testNow), body: undoReply("charge-payment", 1, message.Succeeded),
			wantCalls: []string{"Apply " + orderA + " step-undone", "Send agent-reserve-inventory " + orderA},
			want:      actortest.Digest{State: workflow.Compensating, Attempt: 7, Locked: true},
		},
		{
			// The last undo ends the order, as the record says who stopped it.
			name: "undo of the first step: compensated",
			seed: undoingAt(cfg, orderA, 0, 6, testNow), body: undoReply("reserve-inventory", 0, message.Succeeded),
			wantCalls: []string{"GetState " + orderA, "Apply " + orderA + " compensated"},
			want:      actortest.Digest{State: workflow.Compensated, Attempt: 6},
		},
		{
			name: "undo of the first step of a cancelled order: cancelled",
			seed: func() workflow.State {
				st := undoingAt(cfg, orderA, 0, 6, testNow)
				st.Cancelled = true
				return st
			}(), body: undoReply("reserve-inventory", 0, message.Succeeded),
			wantCalls: []string{"GetState " + orderA, "Apply " + orderA + " compensated"},
			want:      actortest.Digest{State: workflow.Cancelled, Attempt: 6},
		},
		{
			// A failed undo reads the record: a LastError naming a step
			// whose effect stays is kept.
			name: "undo failed: an operator must act",
			seed: undoingAt(cfg, orderA, 1, 6, testNow), body: undoReply("charge-payment", 1, message.Failed),
			wantCalls: []string{"GetState " + orderA, "Apply " + orderA + " compensation-failed", "Publish compensation-failed " + orderA, "Apply " + orderA + " alert-sent"},
			want:      actortest.Digest{State: workflow.CompensationFailed, Step: 1, Attempt: 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, tt.seed)
			if failed := f.handle(t, context.Background(), record("u1", tt.body)); len(failed) != 0 {
				t.Fatalf("batch item failures = %v", failed)
			}
			f.Calls.Check(t, tt.wantCalls...)
			st := f.Store.Record(t, orderA)
			if got := actortest.DigestOf(st); got != tt.want {
				t.Errorf("record = %+v, want %+v", got, tt.want)
			}
			switch done := st.Steps[tt.seed.StepIndex]; {
			case tt.want.State == workflow.CompensationFailed:
				if done.Compensation != workflow.StepFailed || done.CompensationError != "compensation refund-refused: the charge is disputed" {
					t.Errorf("step history %+v, want its undo failed with the fault", done)
				}
			case done.Compensation != workflow.StepSucceeded || !sameJSON(t, done.CompensationOutput, []byte(`{"refunded":true}`)):
				t.Errorf("step history %+v, want undone, keeping the undo's output", done)
			}
			if tt.want.State != workflow.Compensating {
				return
			}
			sent := f.Send.Sent()
			if len(sent) != 1 {
				t.Fatalf("sent %+v, want the next undo's request", sent)
			}
			checkRequest(t, sent[0].Body, message.AgentRequest{
				V: message.Version, Kind: message.KindAgentRequest, Workflow: "order-v1", OrderID: orderA, Step: "reserve-inventory",
				Attempt: 7, CompleteBy: testNow.Add(30 * time.Second), Action: message.Compensate,
				IdempotencyKey: workflow.CompensationKey(orderA, "reserve-inventory"),
				EffectKey:      workflow.IdempotencyKey(orderA, "reserve-inventory"),
				Input:          inputOf(orderA),
				// What to undo: the output of the step undone, and of
				// those before it.
				Previous: map[string]json.RawMessage{"reserve-inventory": outputOf("reserve-inventory")},
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Batches.

// A poison record is reported alone; the records around it are processed.
func TestPoisonRecordsFailAlone(t *testing.T) {
	t.Parallel()
	request := message.Encode(message.AgentRequest{
		V: message.Version, Kind: message.KindAgentRequest, Workflow: "order-v1", OrderID: orderA, Step: "charge-payment",
		StepIndex: 1, Attempt: 2, CompleteBy: testNow.Add(time.Minute),
		IdempotencyKey: workflow.IdempotencyKey(orderA, "charge-payment"), Input: inputOf(orderA),
	})
	tests := []struct {
		name string
		body string
	}{
		{name: "not JSON", body: "this is not json"},
		{name: "empty body", body: ""},
		{name: "JSON array", body: `[1,2,3]`},
		{name: "unknown kind", body: `{"v":1,"kind":"agent.cancel","orderId":"` + orderA + `","stepIndex":0}`},
		{name: "unknown version", body: `{"v":2,"kind":"schedule","orderId":"` + orderA + `","stepIndex":0}`},
		{name: "agent request sent to the scheduler", body: request},
		{name: "schedule with an unknown field", body: `{"v":1,"kind":"schedule","orderId":"` + orderA + `","stepIndex":0,"priority":1}`},
		{name: "schedule with a bad order ID", body: scheduleBody("not/an/id", 0)},
		{name: "schedule of a step outside the workflow", body: scheduleBody(orderA, 3)},
		{name: "schedule of a step far outside the workflow", body: scheduleBody(orderA, 99)},
		{name: "schedule with a negative step", body: `{"v":1,"kind":"schedule","orderId":"` + orderA + `","stepIndex":-1}`},
		{name: "reply for a step outside the workflow", body: succeededBody(orderA, "ship-goods", 3, 1)},
		{name: "reply whose step name does not match its index", body: succeededBody(orderA, "charge-payment", 0, 1)},
		{name: "failed reply whose step name does not match its index", body: failedBody(orderA, "reserve-inventory", 2, 1)},
		{name: "reply for a step not in the workflow", body: succeededBody(orderA, "gift-wrap", 1, 1)},
		{name: "failed reply without a fault", body: `{"v":1,"kind":"agent.reply","orderId":"` + orderA + `","step":"charge-payment","stepIndex":1,"attempt":1,"outcome":"failed"}`},
		{name: "reply with attempt 0", body: succeededBody(orderA, "charge-payment", 1, 0)},
		// A version this deployment does not run (removed with orders still
		// on it): to the DLQ with an alert, to redrive once it is back.
		{name: "schedule of a version not deployed", body: strings.Replace(scheduleBody(orderA, 0), `"order-v1"`, `"order-v7"`, 1)},
		{name: "reply of a version not deployed", body: strings.Replace(succeededBody(orderC, "reserve-inventory", 0, 1), `"orderId"`, `"workflow":"order-v7","orderId"`, 1)},
		{name: "schedule with a malformed version", body: strings.Replace(scheduleBody(orderA, 0), `"order-v1"`, `"order 1"`, 1)},
	}
	cfg := testConfig()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, pendingAt(cfg, orderA, 0, testNow), pendingAt(cfg, orderB, 0, testNow),
				processingAt(cfg, orderC, 0, 1, testNow))
			failed := f.handle(t, context.Background(),
				record("before", scheduleBody(orderB, 0)),
				record("poison", tt.body),
				record("after", succeededBody(orderC, "reserve-inventory", 0, 1)),
			)
			if !slices.Equal(failed, []string{"poison"}) {
				t.Errorf("batch item failures = %v, want [poison]", failed)
			}
			// The poison record touches nothing.
			f.Calls.Check(t,
				"Apply "+orderB+" claimed", "Send agent-reserve-inventory "+orderB,
				"Apply "+orderC+" step-completed", "Send agent-charge-payment "+orderC,
			)
		})
	}
}

// Every record of a batch is processed, in order, each under its own owner,
// and exactly the ones that need it are reported.
func TestBatchProcessesEveryRecord(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	f := newFixture(t, cfg, testNow,
		pendingAt(cfg, orderA, 0, testNow),
		processingAt(cfg, orderB, 2, 8, testNow),
		processingAt(cfg, orderC, 1, 2, testNow), // claimed already: the claim is lost
		processingAt(cfg, orderD, 1, 4, testNow),
		pendingAt(cfg, orderE, 2, testNow),
	)
	f.Store.Fault = actortest.Fault(errStore, "Apply", "claimed", orderB)
	failed := f.handle(t, context.Background(),
		record("m1", scheduleBody(orderA, 0)),
		record("m2", scheduleBody(orderB, 0)),
		record("m3", "garbage"),
		record("m4", scheduleBody(orderC, 1)),
		record("m5", succeededBody(orderD, "charge-payment", 1, 4)),
		record("m6", failedBody(orderB, "ship-goods", 2, 8)),
		record("m7", scheduleBody(orderE, 2)),
	)
	if want := []string{"m2", "m3"}; !slices.Equal(failed, want) {
		t.Errorf("batch item failures = %v, want %v", failed, want)
	}
	f.Calls.Check(t,
		"Apply "+orderA+" claimed", "Send agent-reserve-inventory "+orderA,
		"Apply "+orderB+" claimed",
		"Apply "+orderC+" claimed",
		"Apply "+orderD+" step-completed", "Send agent-ship-goods "+orderD,
		"Apply "+orderB+" failed", "Publish not-undoable "+orderB, "Apply "+orderB+" alert-sent",
		"Apply "+orderE+" claimed", "Send agent-ship-goods "+orderE,
	)
	owners := []string{}
	for _, c := range f.Store.Changes("claimed") {
		owners = append(owners, c.Patch.Lock)
	}
	wantOwners := []string{"scheduler/local/m1", "scheduler/local/m2", "scheduler/local/m4", "scheduler/local/m7"}
	if !slices.Equal(owners, wantOwners) {
		t.Errorf("claim owners = %v, want %v", owners, wantOwners)
	}
	if c := f.Store.Changes("step-completed"); len(c) != 1 || c[0].Patch.Lock != "scheduler/local/m5" {
		t.Errorf("commit %+v must claim the next step for the reply's own message m5", c)
	}
}

func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow)
	if failed := f.handle(t, context.Background()); len(failed) != 0 {
		t.Errorf("batch item failures = %v", failed)
	}
	f.Calls.Check(t)
}

// ---------------------------------------------------------------------------
// The sample events under events/ are what developers invoke the function
// with locally; running them here keeps them from drifting from the handler.

// loadSQSEvent decodes a sample strictly and checks each record has the shape
// Lambda delivers.
func loadSQSEvent(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	ev := eventsample.Load[events.SQSEvent](t, name)
	if len(ev.Records) == 0 {
		t.Fatalf("%s: no records", name)
	}
	seen := map[string]bool{}
	for i, r := range ev.Records {
		where := fmt.Sprintf("%s record %d", name, i)
		if r.MessageId == "" || seen[r.MessageId] {
			t.Errorf("%s: messageId %q missing or repeated", where, r.MessageId)
		}
		seen[r.MessageId] = true
		if r.ReceiptHandle == "" {
			t.Errorf("%s: no receiptHandle", where)
		}
		if sum := md5.Sum([]byte(r.Body)); r.Md5OfBody != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: md5OfBody %s, but the body's MD5 is %x", where, r.Md5OfBody, sum)
		}
		if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err != nil || n < 1 {
			t.Errorf("%s: ApproximateReceiveCount %q", where, r.Attributes["ApproximateReceiveCount"])
		}
		if r.Attributes["SentTimestamp"] == "" {
			t.Errorf("%s: no SentTimestamp", where)
		}
		if r.MessageAttributes == nil {
			t.Errorf("%s: messageAttributes missing (Lambda sends {} when there are none)", where)
		}
		parts := strings.Split(r.EventSourceARN, ":")
		if r.EventSource != "aws:sqs" || len(parts) != 6 || parts[2] != "sqs" || parts[3] != r.AWSRegion || r.AWSRegion == "" {
			t.Errorf("%s: eventSource %q, eventSourceARN %q, awsRegion %q", where, r.EventSource, r.EventSourceARN, r.AWSRegion)
		}
	}
	return ev
}

// queueARN is the ARN of a queue URL such as
// https://sqs.eu-west-1.amazonaws.com/123456789012/name.
func queueARN(t *testing.T, url string) string {
	t.Helper()
	var region, account, name string
	rest, ok := strings.CutPrefix(url, "https://sqs.")
	if ok {
		region, rest, ok = strings.Cut(rest, ".amazonaws.com/")
	}
	if ok {
		account, name, ok = strings.Cut(rest, "/")
	}
	if !ok {
		t.Fatalf("%s is not an SQS queue URL", url)
	}
	return "arn:aws:sqs:" + region + ":" + account + ":" + name
}

func sampleConfig(t *testing.T) Config {
	t.Helper()
	cfg, err := loadReference(configtest.Env(deployed))
	if err != nil {
		t.Fatalf("LoadConfig of the deployed environment: %v", err)
	}
	return cfg
}

func receivedAt(t *testing.T, r events.SQSMessage) time.Time {
	t.Helper()
	ms, err := strconv.ParseInt(r.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
	if err != nil {
		t.Fatalf("record %s: ApproximateFirstReceiveTimestamp: %v", r.MessageId, err)
	}
	return time.UnixMilli(ms).UTC()
}

func TestSampleScheduleEvent(t *testing.T) {
	t.Parallel()
	ev := loadSQSEvent(t, "scheduler-schedule.json")
	if len(ev.Records) < 2 {
		t.Fatalf("the sample should show a batch of several records, has %d", len(ev.Records))
	}
	cfg := sampleConfig(t)
	now := receivedAt(t, ev.Records[0])
	schedules := make([]message.Schedule, len(ev.Records))
	f := newFixture(t, cfg, now)
	for i, r := range ev.Records {
		m, err := message.DecodeSchedule(r.Body)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		schedules[i] = m
		f.Store.Put(pendingAt(cfg, m.OrderID, m.StepIndex, now))
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "6b4f1e0a-3c2d-4e5f-8a9b-0c1d2e3f4a5b"})
	resp, err := f.h.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want every record processed", resp, err)
	}
	applies, sent := f.Store.Applies(), f.Send.Sent()
	if len(applies) != len(ev.Records) || len(sent) != len(ev.Records) {
		t.Fatalf("%d records gave %d writes and %d sends; want one claim and one dispatch each", len(ev.Records), len(applies), len(sent))
	}
	for i, r := range ev.Records {
		m := schedules[i]
		if queueARN(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-scheduler") != r.EventSourceARN {
			t.Errorf("record %d comes from %s, not the scheduler queue", i, r.EventSourceARN)
		}
		st := applies[i].State
		step := cfg.Workflows.Definitions[0].Steps[m.StepIndex]
		if applies[i].Err != nil || actortest.Label(applies[i].Change) != "claimed" || st.OrderID != m.OrderID || st.StepIndex != m.StepIndex ||
			!strings.Contains(st.LockedBy, r.MessageId) || !st.CompleteBy.Equal(now.Add(step.Lease())) {
			t.Errorf("record %d: claim %+v wrote %+v, which does not match %+v", i, applies[i].Change, st, m)
		}
		req, err := message.DecodeAgentRequest(sent[i].Body)
		if err != nil {
			t.Fatalf("record %d: dispatched %v", i, err)
		}
		if sent[i].QueueURL != cfg.AgentQueues[step.Name] || req.OrderID != m.OrderID || req.Step != step.Name {
			t.Errorf("record %d: dispatched %+v to %s", i, req, sent[i].QueueURL)
		}
	}
}

// The replies of the sample: one commits its step and claims the next,
// whose request is the agent-request sample; the other reports a permanent
// fault of a step that can be undone, whose order's compensation starts.
func TestSampleAgentReplyEvent(t *testing.T) {
	t.Parallel()
	replies := loadSQSEvent(t, "scheduler-agent-reply.json")
	requests := loadSQSEvent(t, "agent-request.json")
	if len(requests.Records) != 1 {
		t.Fatalf("agent-request.json has %d records, want 1", len(requests.Records))
	}
	cfg := sampleConfig(t)
	want, err := message.DecodeAgentRequest(requests.Records[0].Body)
	if err != nil {
		t.Fatalf("agent-request.json: %v", err)
	}
	// The replies are handled as they arrive; each answers the attempt its
	// record runs, and the order's input is the one the sample request
	// carries.
	now := receivedAt(t, replies.Records[0])
	f := newFixture(t, cfg, now)
	var succeeded, failed []message.AgentReply
	for i, r := range replies.Records {
		if queueARN(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-responses") != r.EventSourceARN {
			t.Errorf("record %d comes from %s, not the response queue", i, r.EventSourceARN)
		}
		m, err := message.DecodeAgentReply(r.Body)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		st := processingAt(cfg, m.OrderID, m.StepIndex, m.Attempt, now)
		if m.Outcome == message.Succeeded {
			succeeded = append(succeeded, m)
			st.Input = want.Input
		} else {
			failed = append(failed, m)
		}
		f.Store.Put(st)
	}
	if len(succeeded) != 1 || len(failed) != 1 || failed[0].StepIndex != 1 {
		t.Fatalf("the sample should hold one succeeded and one failed reply (of step 1), has %d and %d", len(succeeded), len(failed))
	}
	ok, bad := succeeded[0], failed[0]
	resp, err := f.h.Handle(context.Background(), replies)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want every record processed", resp, err)
	}

	agentQueue := "Send sas-agent-charge-payment "
	f.Calls.Check(t,
		"Apply "+ok.OrderID+" step-completed", agentQueue+ok.OrderID,
		"Apply "+bad.OrderID+" compensating", agentQueue+bad.OrderID,
	)
	if c := f.Store.Changes("step-completed"); len(c) != 1 || c[0].OrderID != ok.OrderID || *c[0].Fence.Attempt != ok.Attempt {
		t.Errorf("commits = %+v, want one for %+v", c, ok)
	}
	lastError := bad.Fault.Code + ": " + bad.Fault.Message
	if st := f.Store.Record(t, bad.OrderID); st.ProcessState != workflow.Compensating || st.StepIndex != bad.StepIndex ||
		st.LastError != lastError || st.Steps[bad.StepIndex].State != workflow.StepFailed || st.AlertPending {
		t.Errorf("record %+v, want the undo of step %d claimed after %q, no alert owed", st, bad.StepIndex, lastError)
	}
	if published := f.Publish.Published(); len(published) != 0 {
		t.Errorf("published %+v; an order whose compensation runs owes no alert", published)
	}

	// The request dispatched for the next step is the agent-request sample;
	// then the undo of the failed step, with the outputs before it.
	sent := f.Send.Sent()
	if len(sent) != 2 {
		t.Fatalf("sent %d messages, want the next step's request and the undo", len(sent))
	}
	reqRec := requests.Records[0]
	if got := queueARN(t, sent[0].QueueURL); got != reqRec.EventSourceARN {
		t.Errorf("next step sent to %s, the sample request comes from %s", got, reqRec.EventSourceARN)
	}
	checkRequest(t, sent[0].Body, want)
	undo := cfg.Workflows.Definitions[0].Steps[bad.StepIndex]
	checkRequest(t, sent[1].Body, message.AgentRequest{
		V: message.Version, Kind: message.KindAgentRequest, Workflow: "order-v1", OrderID: bad.OrderID, Step: undo.Name,
		StepIndex: bad.StepIndex, Attempt: bad.Attempt + 1, CompleteBy: now.Add(undo.Lease()), Action: message.Compensate,
		IdempotencyKey: workflow.CompensationKey(bad.OrderID, undo.Name), EffectKey: workflow.IdempotencyKey(bad.OrderID, undo.Name),
		Input:    inputOf(bad.OrderID),
		Previous: map[string]json.RawMessage{"reserve-inventory": outputOf("reserve-inventory")},
	})
}

func TestSampleAgentRequestIsPoisonToScheduler(t *testing.T) {
	t.Parallel()
	ev := loadSQSEvent(t, "agent-request.json")
	f := newFixture(t, sampleConfig(t), testNow)
	resp, err := f.h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].MessageId {
		t.Errorf("batch item failures = %+v, want the agent request reported as poison", resp.BatchItemFailures)
	}
	f.Calls.Check(t)
}

func TestPoisonAlertsOnItsLastReceiveOnly(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	for _, tc := range []struct {
		receives string
		alerts   int
	}{{"1", 0}, {"2", 0}, {"3", 1}, {"4", 1}} {
		f := newFixture(t, cfg, testNow, pendingAt(cfg, orderA, 0, testNow))
		poison := record("m-poison", `{"v":99}`)
		poison.Attributes["ApproximateReceiveCount"] = tc.receives
		failed := f.handle(t, context.Background(), poison, record("m-ok", scheduleBody(orderA, 0)))
		if !reflect.DeepEqual(failed, []string{"m-poison"}) {
			t.Fatalf("receive %s: failed %v, want only the poison", tc.receives, failed)
		}
		published := f.Publish.Published()
		if len(published) != tc.alerts {
			t.Fatalf("receive %s of %d: %d alerts, want %d", tc.receives, cfg.MaxReceiveCount, len(published), tc.alerts)
		}
		if tc.alerts == 1 && (published[0].Kind != alert.KindPoisonMessage || published[0].ID() != "poison/m-poison") {
			t.Fatalf("alert %+v", published[0])
		}
	}
}

// TestRefusalsGiveClientsAReason feeds the texts the Scheduler writes for a
// reply that failed (FailureMessage, with UndoRejectedPrefix for an undo),
// under every fault code the agent runtime and the Scheduler use, to
// workflow.ReasonOf: a client reads the reason's code and our own words,
// never the fault's message.
func TestRefusalsGiveClientsAReason(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	// Steps with an undo: each refusal stops the order into its
	// compensation with the refusal's own text.
	cfg.Workflows.Definitions[0].Steps[0].Compensable, cfg.Workflows.Definitions[0].Steps[1].Compensable = true, true
	mach := workflow.Machine{Def: cfg.Workflows.Definitions[0], Policy: cfg.Policy}
	const secret = "arn:aws:iam::444455556666:role/payments at https://10.0.3.7/charge"
	for _, tc := range []struct {
		code      string
		undo      bool
		uncertain bool
		want      workflow.ReasonCode
		text      string
	}{
		{agent.CodePermanent, false, false, workflow.ReasonRejected, "step charge-payment was refused by its service (permanent)"},
		{"http_422", false, true, workflow.ReasonRejected, "step charge-payment was refused by its service (http_422)"},
		{"https://example.com/probs/out-of-credit", false, false, workflow.ReasonRejected, "step charge-payment was refused by its service"},
		{agent.CodeNotCompensable, true, false, workflow.ReasonUndoRejected, "the undo of step charge-payment was refused by its service (not_compensable)"},
		{agent.CodeInvalidOutput, false, true, workflow.ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{agent.CodeOutputTooLarge, false, true, workflow.ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{agent.CodeResponseTooLarge, false, true, workflow.ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{agent.CodeBadResponse, false, true, workflow.ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{message.FaultOutputTooLarge, false, true, workflow.ReasonOutputInvalid, "the result of step charge-payment could not be used"},
	} {
		st := processingAt(cfg, orderC, 1, 3, testNow)
		action := message.Perform
		if tc.undo {
			st.ProcessState, action = workflow.Compensating, message.Compensate
		}
		reply := message.AgentReply{V: message.Version, Kind: message.KindAgentReply, OrderID: orderC, Step: "charge-payment",
			StepIndex: 1, Attempt: 3, Action: action, Outcome: message.Failed,
			Fault: &message.Fault{Code: tc.code, Message: secret, Uncertain: tc.uncertain}}
		after := decide(mach, reply, workflow.State{}, "scheduler/now/msg-1", testNow).Patch.Apply(st)
		if !strings.Contains(after.LastError, secret) {
			t.Errorf("%s: LastError %q lost the cause", tc.code, after.LastError)
		}
		if got := workflow.ReasonOf(after); got.Code != tc.want || got.Text != tc.text {
			t.Errorf("%s (undo %v): reason %+v, want %s %q", tc.code, tc.undo, got, tc.want, tc.text)
		}
	}
}

// Replies come from their Agent: any principal allowed to send to the
// response queue (every Agent and code step) could write a reply naming
// another step of another order. The Scheduler commits a reply only when
// SQS says its sender is the role of the Agent of the step it names; any
// other is deleted uncommitted, with an ERROR line for the alarm.
func TestAReplyFromAnotherAgentIsRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	running := processingAt(cfg, orderA, 1, 3, testNow)
	f := newFixture(t, cfg, testNow, running)
	var buf logtest.Buffer
	h, err := New(cfg, f.Store, f.Send, f.Publish, actor.Deps{Clock: f.clk, Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	forged := record("forged", succeededBody(orderA, "charge-payment", 1, 3))
	for _, sender := range []string{senderOf("reserve-inventory") + ":sas-Agent-reserve-inventory", "", "AROA" + senderOf("charge-payment"), "000000000000"} {
		forged.Attributes[SenderIDAttr] = sender
		resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{forged}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("sender %q: %+v, %v; want the record deleted", sender, resp, err)
		}
	}
	if st := f.Store.Record(t, orderA); st.ProcessState != workflow.Processing || st.StepIndex != 1 || st.Attempt != 3 {
		t.Fatalf("a forged reply moved the record: %s step %d attempt %d", st.ProcessState, st.StepIndex, st.Attempt)
	}
	if sent := f.Send.Sent(); len(sent) != 0 {
		t.Fatalf("a forged reply dispatched %d messages", len(sent))
	}
	refused := 0
	for _, r := range buf.Records(t) {
		if r["msg"] == ReplyRefused && r["level"] == "ERROR" && r["orderId"] == orderA && r["step"] == "charge-payment" {
			refused++
		}
	}
	if refused != 4 {
		t.Fatalf("%d refusals logged at ERROR, want 4:\n%s", refused, buf.String())
	}
	// From its own Agent, the same reply commits.
	genuine := record("genuine", succeededBody(orderA, "charge-payment", 1, 3))
	if failed := f.handle(t, context.Background(), genuine); len(failed) != 0 {
		t.Fatalf("the genuine reply failed: %v", failed)
	}
	if st := f.Store.Record(t, orderA); st.StepIndex != 2 {
		t.Fatalf("the genuine reply left the record at step %d", st.StepIndex)
	}
}
