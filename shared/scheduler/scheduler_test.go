package scheduler

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// ---------------------------------------------------------------------------
// Fakes: every dependency is a function; the fixture records each call and
// then delegates to a function a test may replace.

type storeFuncs struct {
	claim     func(ctx context.Context, c statestore.Claim) (workflow.State, error)
	recover   func(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error)
	advance   func(ctx context.Context, a statestore.Advance) (workflow.State, error)
	fail      func(ctx context.Context, f statestore.Failure) (workflow.State, error)
	alertSent func(ctx context.Context, orderID string, attempt int, now time.Time) error
	undone    func(ctx context.Context, u statestore.Undone) (workflow.State, error)
	failUndo  func(ctx context.Context, f statestore.Failure) (workflow.State, error)
	getState  func(ctx context.Context, orderID string) (workflow.State, error)
}

func (f storeFuncs) Undone(ctx context.Context, u statestore.Undone) (workflow.State, error) {
	return f.undone(ctx, u)
}

func (f storeFuncs) FailCompensation(ctx context.Context, fl statestore.Failure) (workflow.State, error) {
	return f.failUndo(ctx, fl)
}

// GetState answers a record at the reply's step with no history when a test
// sets nothing: a permanent fault then has nothing uncertain to undo.
func (f storeFuncs) GetState(ctx context.Context, orderID string) (workflow.State, error) {
	if f.getState == nil {
		return workflow.State{OrderID: orderID, StepIndex: -1}, nil
	}
	return f.getState(ctx, orderID)
}

func (f storeFuncs) Claim(ctx context.Context, c statestore.Claim) (workflow.State, error) {
	return f.claim(ctx, c)
}

func (f storeFuncs) Recover(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
	return f.recover(ctx, seen, r, now)
}

func (f storeFuncs) Advance(ctx context.Context, a statestore.Advance) (workflow.State, error) {
	return f.advance(ctx, a)
}

func (f storeFuncs) Fail(ctx context.Context, fl statestore.Failure) (workflow.State, error) {
	return f.fail(ctx, fl)
}

func (f storeFuncs) AlertSent(ctx context.Context, orderID string, attempt int, now time.Time) error {
	return f.alertSent(ctx, orderID, attempt, now)
}

type sendFunc func(ctx context.Context, queueURL, body string, delay time.Duration) error

func (f sendFunc) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	return f(ctx, queueURL, body, delay)
}

type publishFunc func(ctx context.Context, a alert.Alert) error

func (f publishFunc) Publish(ctx context.Context, a alert.Alert) error { return f(ctx, a) }

var (
	_ Store        = storeFuncs{}
	_ Sender       = sendFunc(nil)
	_ alert.Sender = publishFunc(nil)
)

// deps are the behaviours behind the recording layer.
type deps struct {
	store   storeFuncs
	send    sendFunc
	publish publishFunc
}

type recovered struct {
	seen workflow.State
	r    workflow.Recovery
	now  time.Time
}

type redelivered struct {
	messageID string
	wait      time.Duration
}

type confirmed struct {
	orderID string
	attempt int
	now     time.Time
}

type sentMessage struct {
	queueURL, body string
	delay          time.Duration
}

type fixture struct {
	cfg Config
	clk *clock.Fake
	h   *Handler

	mu        sync.Mutex
	calls     []string
	claims    []statestore.Claim
	recovers  []recovered
	redeliver []redelivered
	advances  []statestore.Advance
	failures  []statestore.Failure
	confirms  []confirmed
	sent      []sentMessage
	published []alert.Alert
}

var (
	testNow  = time.Date(2025, 2, 4, 10, 15, 30, 0, time.UTC)
	errStore = errors.New("dynamodb: ProvisionedThroughputExceededException")
	errQueue = errors.New("sqs: ServiceUnavailable")
	errSNS   = errors.New("sns: InternalError")
)

const (
	orderA = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	orderB = "2b1f0c8e-5a43-4d6e-9f21-0c7a8e3d4b56"
	orderC = "d4a7e2f1-0b3c-4e5d-8f6a-7b8c9d0e1f2a"

	queuePrefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	// claimedAttempt is the Attempt the default Claim fake writes.
	claimedAttempt = 5
	// failureCount is the FailureCount the default Fail fake keeps.
	failureCount = 2
)

// testConfig has three steps with distinct budgets, so a test can tell which
// step's budget was used.
func testConfig() Config {
	return Config{
		OrdersTable: "orders",
		StateTable:  "state",
		AgentQueues: map[string]string{
			"reserve-inventory": queuePrefix + "agent-reserve-inventory",
			"charge-payment":    queuePrefix + "agent-charge-payment",
			"ship-goods":        queuePrefix + "agent-ship-goods",
		},
		Workflow: workflow.Definition{Name: "order-test", Steps: []workflow.Step{
			{Name: "reserve-inventory", Budget: 30 * time.Second},
			{Name: "charge-payment", Budget: 45 * time.Second},
			{Name: "ship-goods", Budget: 2 * time.Minute},
		}},
		Policy: workflow.Policy{
			MaxFailures: 4, ClaimTimeout: 90 * time.Second,
			BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 3 * time.Minute,
		},
		AlertTopicARN:     "arn:aws:sns:eu-west-1:123456789012:alerts",
		MaxReceiveCount:   3,
		SchedulerQueueURL: queuePrefix + "scheduler",
		ResponseQueueURL:  queuePrefix + "responses",
	}
}

func inputOf(orderID string) json.RawMessage {
	return json.RawMessage(`{"orderId":"` + orderID + `","customerId":"customer-42","currency":"EUR",` +
		`"items":[{"sku":"BOOK-0451","quantity":2,"unitPriceCents":1999}],"totalCents":3998}`)
}

func outputOf(step string) json.RawMessage {
	return json.RawMessage(`{"confirmation":"` + step + `-ok"}`)
}

// history is the step history of a record at step current: the steps before
// it succeeded with outputs[name], or outputOf(name) when unset.
func history(d workflow.Definition, current int, outputs map[string]json.RawMessage) []workflow.StepRecord {
	steps := make([]workflow.StepRecord, len(d.Steps))
	for i, s := range d.Steps {
		steps[i] = workflow.StepRecord{Name: s.Name, State: workflow.StepPending}
		switch {
		case i < current:
			steps[i].State, steps[i].Attempts = workflow.StepSucceeded, 1
			steps[i].Output = outputOf(s.Name)
			if out, ok := outputs[s.Name]; ok {
				steps[i].Output = out
			}
		case i == current:
			steps[i].State, steps[i].Attempts = workflow.StepProcessing, 1
		}
	}
	return steps
}

// defaultDeps behave like a healthy store, queue and topic: every write
// succeeds and returns the record as the real store would write it.
func defaultDeps(cfg Config) deps {
	return deps{
		store: storeFuncs{
			claim: func(_ context.Context, c statestore.Claim) (workflow.State, error) {
				return workflow.State{
					OrderID: c.OrderID, Workflow: cfg.Workflow.Name,
					StepIndex: c.StepIndex, Step: cfg.Workflow.Steps[c.StepIndex].Name,
					ProcessState: workflow.Processing, LockedBy: c.Owner, CompleteBy: c.CompleteBy,
					Attempt: claimedAttempt, Input: inputOf(c.OrderID),
					Steps:     history(cfg.Workflow, c.StepIndex, nil),
					CreatedAt: c.Now.Add(-time.Minute), UpdatedAt: c.Now,
				}, nil
			},
			// Like the store: a Retry hands the step back unlocked, a
			// GiveUp of a forward step starts its compensation or fails it.
			recover: func(_ context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
				st := seen
				st.LockedBy, st.FailureCount, st.CompleteBy, st.LastError, st.UpdatedAt = "", r.FailureCount, r.CompleteBy, r.Reason, now
				switch {
				case r.Kind == workflow.Retry && seen.ProcessState == workflow.Compensating:
					st.ProcessState = workflow.CompensationPending
				case r.Kind == workflow.Retry:
					st.ProcessState = workflow.Pending
				case r.Kind == workflow.GiveUp && seen.ProcessState == workflow.Compensating:
					st.ProcessState, st.AlertPending = workflow.CompensationFailed, true
				case r.Kind == workflow.GiveUp && r.UndoFrom >= 0:
					st.ProcessState, st.StepIndex, st.Step, st.FailureCount = workflow.CompensationPending, r.UndoFrom, r.UndoStep, 0
				case r.Kind == workflow.GiveUp:
					st.ProcessState, st.AlertPending = workflow.Error, true
				}
				return st, nil
			},
			advance: func(_ context.Context, a statestore.Advance) (workflow.State, error) {
				st := workflow.State{
					OrderID: a.OrderID, Workflow: cfg.Workflow.Name, Input: inputOf(a.OrderID),
					UpdatedAt: a.Now,
				}
				outputs := map[string]json.RawMessage{cfg.Workflow.Steps[a.StepIndex].Name: a.Output}
				if a.Next == nil {
					st.StepIndex, st.Step, st.ProcessState = a.StepIndex, cfg.Workflow.Steps[a.StepIndex].Name, workflow.Processed
					st.Attempt = a.Attempt
					st.Steps = history(cfg.Workflow, len(cfg.Workflow.Steps), outputs)
					return st, nil
				}
				st.StepIndex, st.Step, st.ProcessState = a.StepIndex+1, a.Next.Step, workflow.Processing
				st.LockedBy, st.CompleteBy, st.Attempt = a.Next.Owner, a.Next.CompleteBy, a.Attempt+1
				st.Steps = history(cfg.Workflow, a.StepIndex+1, outputs)
				return st, nil
			},
			fail: func(_ context.Context, f statestore.Failure) (workflow.State, error) {
				steps := history(cfg.Workflow, f.StepIndex, nil)
				steps[f.StepIndex].State, steps[f.StepIndex].Error = workflow.StepFailed, f.Error
				return workflow.State{
					OrderID: f.OrderID, Workflow: cfg.Workflow.Name,
					StepIndex: f.StepIndex, Step: cfg.Workflow.Steps[f.StepIndex].Name,
					ProcessState: workflow.Error, CompleteBy: f.AlertBy, FailureCount: failureCount,
					Attempt: f.Attempt, LastError: f.Error, AlertPending: true,
					Input: inputOf(f.OrderID), Steps: steps, UpdatedAt: f.Now,
				}, nil
			},
			alertSent: func(context.Context, string, int, time.Time) error { return nil },
		},
		send:    func(context.Context, string, string, time.Duration) error { return nil },
		publish: func(context.Context, alert.Alert) error { return nil },
	}
}

// newFixture builds a Handler over recording fakes; change may replace
// behaviours to inject faults.
func newFixture(t *testing.T, cfg Config, now time.Time, change func(*deps)) *fixture {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	d := defaultDeps(cfg)
	if change != nil {
		change(&d)
	}
	f := &fixture{cfg: cfg, clk: clock.NewFake(now)}
	store := storeFuncs{
		claim: func(ctx context.Context, c statestore.Claim) (workflow.State, error) {
			f.record(fmt.Sprintf("Claim %s/%d", c.OrderID, c.StepIndex), func() { f.claims = append(f.claims, c) })
			return d.store.claim(ctx, c)
		},
		recover: func(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
			f.record(fmt.Sprintf("Recover %s %s", seen.OrderID, r.Kind), func() { f.recovers = append(f.recovers, recovered{seen, r, now}) })
			return d.store.recover(ctx, seen, r, now)
		},
		advance: func(ctx context.Context, a statestore.Advance) (workflow.State, error) {
			f.record(fmt.Sprintf("Advance %s/%d", a.OrderID, a.StepIndex), func() { f.advances = append(f.advances, a) })
			return d.store.advance(ctx, a)
		},
		fail: func(ctx context.Context, fl statestore.Failure) (workflow.State, error) {
			f.record(fmt.Sprintf("Fail %s/%d", fl.OrderID, fl.StepIndex), func() { f.failures = append(f.failures, fl) })
			return d.store.fail(ctx, fl)
		},
		alertSent: func(ctx context.Context, orderID string, attempt int, now time.Time) error {
			f.record("AlertSent "+orderID, func() { f.confirms = append(f.confirms, confirmed{orderID, attempt, now}) })
			return d.store.alertSent(ctx, orderID, attempt, now)
		},
	}
	send := func(ctx context.Context, queueURL, body string, delay time.Duration) error {
		f.record("Send "+path.Base(queueURL), func() { f.sent = append(f.sent, sentMessage{queueURL, body, delay}) })
		return d.send(ctx, queueURL, body, delay)
	}
	publish := func(ctx context.Context, a alert.Alert) error {
		f.record(fmt.Sprintf("Publish %s %s", a.Kind, a.OrderID), func() { f.published = append(f.published, a) })
		return d.publish(ctx, a)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	redeliver := redeliverFunc(func(_ context.Context, rec events.SQSMessage, wait time.Duration) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.redeliver = append(f.redeliver, redelivered{rec.MessageId, wait})
		return nil
	})
	f.h = New(cfg, store, sendFunc(send), publishFunc(publish), f.clk, log, WithRedelivery(redeliver))
	return f
}

type redeliverFunc func(ctx context.Context, rec events.SQSMessage, wait time.Duration) error

func (f redeliverFunc) After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error {
	return f(ctx, rec, wait)
}

func (f *fixture) record(call string, save func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	save()
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

func record(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, ReceiptHandle: "AQEB" + id, Body: body,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:scheduler",
		AWSRegion:      "eu-west-1",
	}
}

func scheduleBody(orderID string, stepIndex int) string {
	return message.Encode(message.NewSchedule(orderID, stepIndex, "submitted"))
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

func wrapStale(op string) error {
	return fmt.Errorf("%s %s step 0 attempt 1: %w", op, orderA, workflow.ErrStale)
}

// ---------------------------------------------------------------------------
// What each kind of record leads to.

func TestHandleOutcomes(t *testing.T) {
	t.Parallel()
	const (
		reserve = "Send agent-reserve-inventory"
		charge  = "Send agent-charge-payment"
		ship    = "Send agent-ship-goods"
	)
	tests := []struct {
		name      string
		body      string
		change    func(*deps)
		wantCalls []string
		// redeliver: the record must be reported in BatchItemFailures.
		redeliver bool
	}{
		{
			name:      "schedule claimed and dispatched",
			body:      scheduleBody(orderA, 0),
			wantCalls: []string{"Claim " + orderA + "/0", reserve},
		},
		{
			name:      "schedule of a later step goes to that step's queue",
			body:      scheduleBody(orderA, 2),
			wantCalls: []string{"Claim " + orderA + "/2", ship},
		},
		{
			name: "claim lost: nothing sent, nothing redelivered",
			body: scheduleBody(orderA, 0),
			change: func(d *deps) {
				d.store.claim = func(context.Context, statestore.Claim) (workflow.State, error) {
					return workflow.State{}, fmt.Errorf("claim %s step 0: %w", orderA, workflow.ErrClaimLost)
				}
			},
			wantCalls: []string{"Claim " + orderA + "/0"},
		},
		{
			name: "claim store error: redelivered",
			body: scheduleBody(orderA, 0),
			change: func(d *deps) {
				d.store.claim = func(context.Context, statestore.Claim) (workflow.State, error) {
					return workflow.State{}, errStore
				}
			},
			wantCalls: []string{"Claim " + orderA + "/0"},
			redeliver: true,
		},
		{
			name:      "dispatch fails: a failure counted, handed back after the backoff",
			body:      scheduleBody(orderA, 1),
			change:    func(d *deps) { d.send = failAgentQueues },
			wantCalls: []string{"Claim " + orderA + "/1", charge, "Recover " + orderA + " retry", "Send scheduler"},
		},
		{
			name:      "dispatch and hand-back send fail: redelivered",
			body:      scheduleBody(orderA, 1),
			change:    func(d *deps) { d.send = func(context.Context, string, string, time.Duration) error { return errQueue } },
			wantCalls: []string{"Claim " + orderA + "/1", charge, "Recover " + orderA + " retry", "Send scheduler"},
			redeliver: true,
		},
		{
			name: "dispatch fails and the hand-back cannot be written: redelivered",
			body: scheduleBody(orderA, 1),
			change: func(d *deps) {
				d.send = failAgentQueues
				d.store.recover = func(context.Context, workflow.State, workflow.Recovery, time.Time) (workflow.State, error) {
					return workflow.State{}, errStore
				}
			},
			wantCalls: []string{"Claim " + orderA + "/1", charge, "Recover " + orderA + " retry"},
			redeliver: true,
		},
		{
			name:      "succeeded reply on a middle step: advance and dispatch the next",
			body:      succeededBody(orderA, "charge-payment", 1, 3),
			wantCalls: []string{"Advance " + orderA + "/1", ship},
		},
		{
			name:      "succeeded reply on the first step",
			body:      succeededBody(orderA, "reserve-inventory", 0, 1),
			wantCalls: []string{"Advance " + orderA + "/0", charge},
		},
		{
			name:      "succeeded reply on the last step: advance, nothing sent",
			body:      succeededBody(orderA, "ship-goods", 2, 7),
			wantCalls: []string{"Advance " + orderA + "/2"},
		},
		{
			name: "stale succeeded reply: dropped quietly",
			body: succeededBody(orderA, "reserve-inventory", 0, 1),
			change: func(d *deps) {
				d.store.advance = func(context.Context, statestore.Advance) (workflow.State, error) {
					return workflow.State{}, wrapStale("advance")
				}
			},
			wantCalls: []string{"Advance " + orderA + "/0"},
		},
		{
			name: "stale succeeded reply on the last step: dropped quietly",
			body: succeededBody(orderA, "ship-goods", 2, 1),
			change: func(d *deps) {
				d.store.advance = func(context.Context, statestore.Advance) (workflow.State, error) {
					return workflow.State{}, wrapStale("advance")
				}
			},
			wantCalls: []string{"Advance " + orderA + "/2"},
		},
		{
			name: "advance store error: redelivered",
			body: succeededBody(orderA, "reserve-inventory", 0, 1),
			change: func(d *deps) {
				d.store.advance = func(context.Context, statestore.Advance) (workflow.State, error) {
					return workflow.State{}, errStore
				}
			},
			wantCalls: []string{"Advance " + orderA + "/0"},
			redeliver: true,
		},
		{
			// The reply is committed, so redelivering it cannot help; the
			// step is handed back with a failure counted.
			name:      "next dispatch fails: handed back, not redelivered",
			body:      succeededBody(orderA, "reserve-inventory", 0, 1),
			change:    func(d *deps) { d.send = func(context.Context, string, string, time.Duration) error { return errQueue } },
			wantCalls: []string{"Advance " + orderA + "/0", charge, "Recover " + orderA + " retry", "Send scheduler"},
		},
		{
			name:      "failed reply: fail, alert, confirm",
			body:      failedBody(orderA, "charge-payment", 1, 3),
			wantCalls: []string{"Fail " + orderA + "/1", "Publish permanent-failure " + orderA, "AlertSent " + orderA},
		},
		{
			name: "stale failed reply: dropped quietly",
			body: failedBody(orderA, "charge-payment", 1, 3),
			change: func(d *deps) {
				d.store.fail = func(context.Context, statestore.Failure) (workflow.State, error) {
					return workflow.State{}, wrapStale("fail")
				}
			},
			wantCalls: []string{"Fail " + orderA + "/1"},
		},
		{
			name: "fail store error: redelivered",
			body: failedBody(orderA, "charge-payment", 1, 3),
			change: func(d *deps) {
				d.store.fail = func(context.Context, statestore.Failure) (workflow.State, error) {
					return workflow.State{}, errStore
				}
			},
			wantCalls: []string{"Fail " + orderA + "/1"},
			redeliver: true,
		},
		{
			// The record keeps AlertPending; the Supervisor publishes it later.
			name:      "alert not published: not confirmed, not redelivered",
			body:      failedBody(orderA, "charge-payment", 1, 3),
			change:    func(d *deps) { d.publish = func(context.Context, alert.Alert) error { return errSNS } },
			wantCalls: []string{"Fail " + orderA + "/1", "Publish permanent-failure " + orderA},
		},
		{
			name: "alert published, confirmation fails: not redelivered",
			body: failedBody(orderA, "charge-payment", 1, 3),
			change: func(d *deps) {
				d.store.alertSent = func(context.Context, string, int, time.Time) error { return errStore }
			},
			wantCalls: []string{"Fail " + orderA + "/1", "Publish permanent-failure " + orderA, "AlertSent " + orderA},
		},
		{
			name: "alert confirmed by another actor first: not redelivered",
			body: failedBody(orderA, "charge-payment", 1, 3),
			change: func(d *deps) {
				d.store.alertSent = func(context.Context, string, int, time.Time) error { return wrapStale("alert sent") }
			},
			wantCalls: []string{"Fail " + orderA + "/1", "Publish permanent-failure " + orderA, "AlertSent " + orderA},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, testConfig(), testNow, tt.change)
			failed := f.handle(t, context.Background(), record("m1", tt.body))
			want := []string{}
			if tt.redeliver {
				want = []string{"m1"}
			}
			if !slices.Equal(failed, want) {
				t.Errorf("batch item failures = %v, want %v", failed, want)
			}
			if !slices.Equal(f.calls, tt.wantCalls) {
				t.Errorf("calls =\n  %s\nwant\n  %s", strings.Join(f.calls, "\n  "), strings.Join(tt.wantCalls, "\n  "))
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
			f := newFixture(t, cfg, testNow, nil)
			ctx := context.Background()
			if tt.requestID != "" {
				ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: tt.requestID})
			}
			msgID := "msg-" + strconv.Itoa(tt.stepIndex)
			if failed := f.handle(t, ctx, record(msgID, scheduleBody(orderB, tt.stepIndex))); len(failed) != 0 {
				t.Fatalf("batch item failures = %v", failed)
			}
			step := cfg.Workflow.Steps[tt.stepIndex]
			wantClaim := statestore.Claim{
				OrderID: orderB, StepIndex: tt.stepIndex, Owner: tt.wantOwner,
				Now: testNow, CompleteBy: testNow.Add(step.Budget),
			}
			if len(f.claims) != 1 || !reflect.DeepEqual(f.claims[0], wantClaim) {
				t.Fatalf("claims = %+v, want [%+v]", f.claims, wantClaim)
			}
			if !strings.Contains(f.claims[0].Owner, msgID) {
				t.Errorf("owner %q does not name message %s", f.claims[0].Owner, msgID)
			}
			if len(f.sent) != 1 {
				t.Fatalf("sent %d messages, want exactly 1: %+v", len(f.sent), f.sent)
			}
			s := f.sent[0]
			if s.queueURL != cfg.AgentQueues[step.Name] || s.delay != 0 {
				t.Errorf("sent to %s with delay %v, want %s without delay", s.queueURL, s.delay, cfg.AgentQueues[step.Name])
			}
			checkRequest(t, s.body, message.AgentRequest{
				V: message.Version, Kind: message.KindAgentRequest,
				OrderID: orderB, Step: step.Name, StepIndex: tt.stepIndex, Attempt: claimedAttempt,
				CompleteBy:     testNow.Add(step.Budget),
				IdempotencyKey: orderB + "/" + step.Name,
				Input:          inputOf(orderB),
				Previous:       tt.previous,
			})
			if len(f.recovers)+len(f.advances)+len(f.failures)+len(f.published) != 0 {
				t.Errorf("unexpected calls: %v", f.calls)
			}
		})
	}
}

// The idempotency key is the same for every attempt of a step, and only the
// Attempt (the fencing token) changes.
func TestIdempotencyKeyStableAcrossAttempts(t *testing.T) {
	t.Parallel()
	attempt := 0
	f := newFixture(t, testConfig(), testNow, func(d *deps) {
		claim := d.store.claim
		d.store.claim = func(ctx context.Context, c statestore.Claim) (workflow.State, error) {
			st, err := claim(ctx, c)
			attempt++
			st.Attempt = attempt
			return st, err
		}
	})
	for i := range 3 {
		if failed := f.handle(t, context.Background(), record("m"+strconv.Itoa(i), scheduleBody(orderA, 1))); len(failed) != 0 {
			t.Fatalf("batch item failures = %v", failed)
		}
		f.clk.Advance(time.Minute)
	}
	if len(f.sent) != 3 {
		t.Fatalf("sent %d messages, want 3", len(f.sent))
	}
	for i, s := range f.sent {
		req, err := message.DecodeAgentRequest(s.body)
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

// failAgentQueues fails every send to an agent's queue, as a revoked
// permission would, and lets the rest through.
func failAgentQueues(_ context.Context, queueURL, _ string, _ time.Duration) error {
	if strings.HasPrefix(path.Base(queueURL), "agent-") {
		return errQueue
	}
	return nil
}

// A failed dispatch counts as a failure of the step: the claimed record is
// handed back with the policy's decision, and a schedule message waits out
// the backoff; at the threshold the order stops with an alert.
func TestDispatchFailureCountsAFailure(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	for _, tt := range []struct {
		name string
		body string
		// claimed is the record the dispatch was for.
		claimed func(*fixture) workflow.State
	}{
		{
			name: "schedule", body: scheduleBody(orderA, 1),
			claimed: func(f *fixture) workflow.State {
				st, _ := defaultDeps(cfg).store.claim(context.Background(), f.claims[0])
				return st
			},
		},
		{
			name: "next step after a reply", body: succeededBody(orderA, "reserve-inventory", 0, 2),
			claimed: func(f *fixture) workflow.State {
				st, _ := defaultDeps(cfg).store.advance(context.Background(), f.advances[0])
				return st
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, func(d *deps) { d.send = failAgentQueues })
			if failed := f.handle(t, context.Background(), record("m1", tt.body)); len(failed) != 0 {
				t.Errorf("batch item failures = %v; the step was handed back", failed)
			}
			if len(f.recovers) != 1 {
				t.Fatalf("recovers = %+v, want one", f.recovers)
			}
			got := f.recovers[0]
			claimed := tt.claimed(f)
			if !reflect.DeepEqual(got.seen, claimed) {
				t.Errorf("handed back\n%+v\nwant the claimed record\n%+v", got.seen, claimed)
			}
			want := cfg.Policy.DispatchFailed(cfg.Workflow, claimed, testNow, got.r.Reason[strings.Index(got.r.Reason, "failed: ")+len("failed: "):])
			if got.r != want || !strings.Contains(got.r.Reason, errQueue.Error()) {
				t.Errorf("decision %+v, want %+v naming %q", got.r, want, errQueue)
			}
			last := f.sent[len(f.sent)-1]
			var m message.Schedule
			if err := json.Unmarshal([]byte(last.body), &m); err != nil || last.queueURL != cfg.SchedulerQueueURL ||
				m.OrderID != orderA || m.StepIndex != claimed.StepIndex || last.delay != want.Delay {
				t.Errorf("hand-back %+v (%+v), want a schedule of step %d delayed %v", last, m, claimed.StepIndex, want.Delay)
			}
		})
	}

	t.Run("at the threshold the order stops with an alert", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, cfg, testNow, func(d *deps) {
			d.send = failAgentQueues
			base := d.store.claim
			d.store.claim = func(ctx context.Context, c statestore.Claim) (workflow.State, error) {
				st, err := base(ctx, c)
				st.FailureCount = cfg.Policy.MaxFailures - 1
				return st, err
			}
		})
		f.handle(t, context.Background(), record("m1", scheduleBody(orderA, 1)))
		if len(f.recovers) != 1 || f.recovers[0].r.Kind != workflow.GiveUp {
			t.Fatalf("recovers = %+v, want a give-up", f.recovers)
		}
		if len(f.published) != 1 || f.published[0].Kind != alert.KindDispatchFailed || !strings.Contains(f.published[0].LastError, errQueue.Error()) {
			t.Fatalf("alerts = %+v, want one dispatch-failed alert naming the cause", f.published)
		}
	})

	t.Run("when nothing can be sent the message comes back after the backoff", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, cfg, testNow, func(d *deps) {
			d.send = func(context.Context, string, string, time.Duration) error { return errQueue }
		})
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
	f := newFixture(t, testConfig(), testNow, func(d *deps) {
		d.store.advance = func(context.Context, statestore.Advance) (workflow.State, error) { return workflow.State{}, errStore }
	})
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
	cfg.Workflow.Steps[1].MaxOutputBytes = 64
	f := newFixture(t, cfg, testNow, nil)
	body := message.Encode(message.AgentReply{
		V: message.Version, Kind: message.KindAgentReply, OrderID: orderA, Step: "charge-payment", StepIndex: 1, Attempt: 3,
		Outcome: message.Succeeded, Output: json.RawMessage(`{"receipt":"` + strings.Repeat("x", 100) + `"}`),
	})
	f.handle(t, context.Background(), record("m1", body))
	if len(f.advances) != 0 || len(f.failures) != 1 {
		t.Fatalf("advances %v, failures %v: the output must not be committed", f.advances, f.failures)
	}
	if e := f.failures[0].Error; !strings.Contains(e, "over its limit of 64 bytes") || !strings.Contains(e, "uncertain") {
		t.Fatalf("failure %q", e)
	}
}

// ---------------------------------------------------------------------------
// Agent replies.

func TestReplySucceeded(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tests := []struct {
		name      string
		stepIndex int
		attempt   int
		requestID string
		wantNext  *statestore.NextClaim
		// wantPrevious is the Previous of the next step's request.
		wantPrevious map[string]json.RawMessage
	}{
		{
			name: "first step claims the second", stepIndex: 0, attempt: 1,
			wantNext:     &statestore.NextClaim{Step: "charge-payment", Owner: "scheduler/local/r1", CompleteBy: testNow.Add(45 * time.Second)},
			wantPrevious: map[string]json.RawMessage{"reserve-inventory": outputOf("reserve-inventory")},
		},
		{
			name: "second step claims the third", stepIndex: 1, attempt: 6, requestID: "c0ffee",
			wantNext: &statestore.NextClaim{Step: "ship-goods", Owner: "scheduler/c0ffee/r1", CompleteBy: testNow.Add(2 * time.Minute)},
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
			f := newFixture(t, cfg, testNow, nil)
			ctx := context.Background()
			if tt.requestID != "" {
				ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: tt.requestID})
			}
			step := cfg.Workflow.Steps[tt.stepIndex].Name
			if failed := f.handle(t, ctx, record("r1", succeededBody(orderC, step, tt.stepIndex, tt.attempt))); len(failed) != 0 {
				t.Fatalf("batch item failures = %v", failed)
			}
			if len(f.advances) != 1 {
				t.Fatalf("advances = %+v, want one", f.advances)
			}
			a := f.advances[0]
			if !sameJSON(t, a.Output, outputOf(step)) {
				t.Errorf("advance output = %s, want %s", a.Output, outputOf(step))
			}
			a.Output = nil
			want := statestore.Advance{OrderID: orderC, StepIndex: tt.stepIndex, Attempt: tt.attempt, Now: testNow, Next: tt.wantNext}
			if !reflect.DeepEqual(a, want) {
				t.Errorf("advance = %+v (next %+v), want %+v (next %+v)", a, a.Next, want, want.Next)
			}
			if tt.wantNext == nil {
				if len(f.sent) != 0 {
					t.Errorf("sent %+v after the last step, want nothing", f.sent)
				}
				return
			}
			if len(f.sent) != 1 {
				t.Fatalf("sent %d messages, want exactly 1", len(f.sent))
			}
			if want := cfg.AgentQueues[tt.wantNext.Step]; f.sent[0].queueURL != want || f.sent[0].delay != 0 {
				t.Errorf("sent to %s with delay %v, want %s", f.sent[0].queueURL, f.sent[0].delay, want)
			}
			checkRequest(t, f.sent[0].body, message.AgentRequest{
				V: message.Version, Kind: message.KindAgentRequest,
				OrderID: orderC, Step: tt.wantNext.Step, StepIndex: tt.stepIndex + 1,
				Attempt:        tt.attempt + 1, // as the default Advance fake claims it
				CompleteBy:     tt.wantNext.CompleteBy,
				IdempotencyKey: workflow.IdempotencyKey(orderC, tt.wantNext.Step),
				Input:          inputOf(orderC),
				Previous:       tt.wantPrevious,
			})
		})
	}
}

func TestReplyFailed(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	f := newFixture(t, cfg, testNow, nil)
	if failed := f.handle(t, context.Background(), record("r1", failedBody(orderC, "charge-payment", 1, 3))); len(failed) != 0 {
		t.Fatalf("batch item failures = %v", failed)
	}
	const lastError = "card-declined: the issuer declined the card"
	wantFailure := statestore.Failure{
		OrderID: orderC, StepIndex: 1, Attempt: 3, Now: testNow,
		Error: lastError, AlertBy: testNow.Add(cfg.Policy.AlertTimeout),
	}
	if len(f.failures) != 1 || !reflect.DeepEqual(f.failures[0], wantFailure) {
		t.Fatalf("failures = %+v, want [%+v]", f.failures, wantFailure)
	}
	wantAlert := alert.Alert{
		Kind: alert.KindPermanentFailure, OrderID: orderC, Step: "charge-payment", StepIndex: 1,
		FailureCount: failureCount, MaxFailures: cfg.Policy.MaxFailures, Attempt: 3,
		LastError: lastError, At: testNow, CLI: alert.CLI(""),
	}
	if len(f.published) != 1 || !reflect.DeepEqual(f.published[0], wantAlert) {
		t.Fatalf("published = %+v, want [%+v]", f.published, wantAlert)
	}
	wantConfirm := confirmed{orderC, 3, testNow}
	if len(f.confirms) != 1 || f.confirms[0] != wantConfirm {
		t.Fatalf("AlertSent calls = %+v, want [%+v]", f.confirms, wantConfirm)
	}
	wantCalls := []string{"Fail " + orderC + "/1", "Publish permanent-failure " + orderC, "AlertSent " + orderC}
	if !slices.Equal(f.calls, wantCalls) {
		t.Errorf("calls = %v, want %v (publish before confirming)", f.calls, wantCalls)
	}
	if len(f.sent)+len(f.advances) != 0 {
		t.Errorf("a failed reply advanced or sent: %v", f.calls)
	}
}

// ---------------------------------------------------------------------------
// Batches.

// A poison record is reported alone; the records around it are processed.
func TestPoisonRecordsFailAlone(t *testing.T) {
	t.Parallel()
	request := message.Encode(message.AgentRequest{
		V: message.Version, Kind: message.KindAgentRequest, OrderID: orderA, Step: "charge-payment",
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, testConfig(), testNow, nil)
			failed := f.handle(t, context.Background(),
				record("before", scheduleBody(orderB, 0)),
				record("poison", tt.body),
				record("after", succeededBody(orderC, "reserve-inventory", 0, 1)),
			)
			if !slices.Equal(failed, []string{"poison"}) {
				t.Errorf("batch item failures = %v, want [poison]", failed)
			}
			want := []string{
				"Claim " + orderB + "/0", "Send agent-reserve-inventory",
				"Advance " + orderC + "/0", "Send agent-charge-payment",
			}
			if !slices.Equal(f.calls, want) {
				t.Errorf("calls = %v, want %v (the poison record touches nothing)", f.calls, want)
			}
		})
	}
}

// Every record of a batch is processed, in order, each under its own owner,
// and exactly the ones that need it are reported.
func TestBatchProcessesEveryRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, func(d *deps) {
		claim := d.store.claim
		d.store.claim = func(ctx context.Context, c statestore.Claim) (workflow.State, error) {
			switch c.OrderID {
			case orderB:
				return workflow.State{}, errStore
			case orderC:
				return workflow.State{}, workflow.ErrClaimLost
			}
			return claim(ctx, c)
		}
	})
	failed := f.handle(t, context.Background(),
		record("m1", scheduleBody(orderA, 0)),
		record("m2", scheduleBody(orderB, 0)),
		record("m3", "garbage"),
		record("m4", scheduleBody(orderC, 1)),
		record("m5", succeededBody(orderA, "charge-payment", 1, 4)),
		record("m6", failedBody(orderB, "ship-goods", 2, 8)),
		record("m7", scheduleBody(orderA, 2)),
	)
	if want := []string{"m2", "m3"}; !slices.Equal(failed, want) {
		t.Errorf("batch item failures = %v, want %v", failed, want)
	}
	want := []string{
		"Claim " + orderA + "/0", "Send agent-reserve-inventory",
		"Claim " + orderB + "/0",
		"Claim " + orderC + "/1",
		"Advance " + orderA + "/1", "Send agent-ship-goods",
		"Fail " + orderB + "/2", "Publish permanent-failure " + orderB, "AlertSent " + orderB,
		"Claim " + orderA + "/2", "Send agent-ship-goods",
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls =\n  %s\nwant\n  %s", strings.Join(f.calls, "\n  "), strings.Join(want, "\n  "))
	}
	owners := []string{}
	for _, c := range f.claims {
		owners = append(owners, c.Owner)
	}
	wantOwners := []string{"scheduler/local/m1", "scheduler/local/m2", "scheduler/local/m4", "scheduler/local/m7"}
	if !slices.Equal(owners, wantOwners) {
		t.Errorf("claim owners = %v, want %v", owners, wantOwners)
	}
	if len(f.advances) != 1 || f.advances[0].Next == nil || f.advances[0].Next.Owner != "scheduler/local/m5" {
		t.Errorf("advance %+v must claim the next step for the reply's own message m5", f.advances)
	}
}

func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, nil)
	if failed := f.handle(t, context.Background()); len(failed) != 0 {
		t.Errorf("batch item failures = %v", failed)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls = %v, want none", f.calls)
	}
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
	cfg, err := LoadConfig(getenv(sampleEnv()))
	if err != nil {
		t.Fatalf("LoadConfig(sampleEnv): %v", err)
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
	f := newFixture(t, cfg, now, nil)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "6b4f1e0a-3c2d-4e5f-8a9b-0c1d2e3f4a5b"})
	resp, err := f.h.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want every record processed", resp, err)
	}
	if len(f.claims) != len(ev.Records) || len(f.sent) != len(ev.Records) {
		t.Fatalf("%d records gave %d claims and %d sends; want one each", len(ev.Records), len(f.claims), len(f.sent))
	}
	for i, r := range ev.Records {
		m, err := message.DecodeSchedule(r.Body)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if queueARN(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-scheduler") != r.EventSourceARN {
			t.Errorf("record %d comes from %s, not the scheduler queue", i, r.EventSourceARN)
		}
		c := f.claims[i]
		step := cfg.Workflow.Steps[m.StepIndex]
		if c.OrderID != m.OrderID || c.StepIndex != m.StepIndex || !strings.Contains(c.Owner, r.MessageId) ||
			!c.CompleteBy.Equal(now.Add(step.Budget)) {
			t.Errorf("record %d: claim %+v does not match %+v", i, c, m)
		}
		req, err := message.DecodeAgentRequest(f.sent[i].body)
		if err != nil {
			t.Fatalf("record %d: dispatched %v", i, err)
		}
		if f.sent[i].queueURL != cfg.AgentQueues[step.Name] || req.OrderID != m.OrderID || req.Step != step.Name {
			t.Errorf("record %d: dispatched %+v to %s", i, req, f.sent[i].queueURL)
		}
	}
}

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
	// The replies are handled as they arrive, and the order's input is the
	// one the sample request carries.
	now := receivedAt(t, replies.Records[0])
	f := newFixture(t, cfg, now, func(d *deps) {
		advance := d.store.advance
		d.store.advance = func(ctx context.Context, a statestore.Advance) (workflow.State, error) {
			st, err := advance(ctx, a)
			st.Input = want.Input
			return st, err
		}
	})
	resp, err := f.h.Handle(context.Background(), replies)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want every record processed", resp, err)
	}

	var succeeded, failed []message.AgentReply
	for i, r := range replies.Records {
		if queueARN(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-responses") != r.EventSourceARN {
			t.Errorf("record %d comes from %s, not the response queue", i, r.EventSourceARN)
		}
		m, err := message.DecodeAgentReply(r.Body)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if m.Outcome == message.Succeeded {
			succeeded = append(succeeded, m)
		} else {
			failed = append(failed, m)
		}
	}
	if len(succeeded) != 1 || len(failed) != 1 {
		t.Fatalf("the sample should hold one succeeded and one failed reply, has %d and %d", len(succeeded), len(failed))
	}
	ok, bad := succeeded[0], failed[0]
	if len(f.advances) != 1 || f.advances[0].OrderID != ok.OrderID || f.advances[0].Attempt != ok.Attempt {
		t.Errorf("advances = %+v, want one for %+v", f.advances, ok)
	}
	if len(f.failures) != 1 || f.failures[0].OrderID != bad.OrderID || f.failures[0].Error != bad.Fault.Code+": "+bad.Fault.Message {
		t.Errorf("failures = %+v, want one for %+v", f.failures, bad)
	}
	if len(f.published) != 1 || f.published[0].Kind != alert.KindPermanentFailure || f.published[0].OrderID != bad.OrderID {
		t.Errorf("published = %+v, want a permanent-failure alert for %s", f.published, bad.OrderID)
	}
	if len(f.confirms) != 1 || f.confirms[0].orderID != bad.OrderID {
		t.Errorf("AlertSent calls = %+v", f.confirms)
	}

	// The request dispatched for the next step is the agent-request sample.
	if len(f.sent) != 1 {
		t.Fatalf("sent %d messages, want the next step's request", len(f.sent))
	}
	reqRec := requests.Records[0]
	if got := queueARN(t, f.sent[0].queueURL); got != reqRec.EventSourceARN {
		t.Errorf("next step sent to %s, the sample request comes from %s", got, reqRec.EventSourceARN)
	}
	checkRequest(t, f.sent[0].body, want)
}

func TestSampleAgentRequestIsPoisonToScheduler(t *testing.T) {
	t.Parallel()
	ev := loadSQSEvent(t, "agent-request.json")
	f := newFixture(t, sampleConfig(t), testNow, nil)
	resp, err := f.h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].MessageId {
		t.Errorf("batch item failures = %+v, want the agent request reported as poison", resp.BatchItemFailures)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls = %v, want none", f.calls)
	}
}

func TestPoisonAlertsOnItsLastReceiveOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		receives string
		alerts   int
	}{{"1", 0}, {"2", 0}, {"3", 1}, {"4", 1}} {
		f := newFixture(t, testConfig(), testNow, nil)
		poison := record("m-poison", `{"v":99}`)
		poison.Attributes["ApproximateReceiveCount"] = tc.receives
		failed := f.handle(t, context.Background(), poison, record("m-ok", scheduleBody(orderA, 0)))
		if !reflect.DeepEqual(failed, []string{"m-poison"}) {
			t.Fatalf("receive %s: failed %v, want only the poison", tc.receives, failed)
		}
		if len(f.published) != tc.alerts {
			t.Fatalf("receive %s of %d: %d alerts, want %d", tc.receives, testConfig().MaxReceiveCount, len(f.published), tc.alerts)
		}
		if tc.alerts == 1 && (f.published[0].Kind != alert.KindPoisonMessage || f.published[0].ID() != "poison/m-poison") {
			t.Fatalf("alert %+v", f.published[0])
		}
	}
}
