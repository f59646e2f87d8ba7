package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
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
	"github.com/sasflow/sas/shared/workflow"
)

// ---------------------------------------------------------------------------
// Fakes: every dependency is a function; the fixture records each call and
// then delegates to a function a test may replace.

type storeFuncs struct {
	expired   func(ctx context.Context, now time.Time, limit int) ([]workflow.State, error)
	recover   func(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error)
	alertSent func(ctx context.Context, orderID string, attempt int, now time.Time) error
}

func (f storeFuncs) Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
	return f.expired(ctx, now, limit)
}

func (f storeFuncs) Recover(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
	return f.recover(ctx, seen, r, now)
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

type deps struct {
	store   storeFuncs
	send    sendFunc
	publish publishFunc
}

type expiredCall struct {
	now   time.Time
	limit int
}

type recoverCall struct {
	seen workflow.State
	r    workflow.Recovery
	now  time.Time
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
	expired   []expiredCall
	recovers  []recoverCall
	confirms  []confirmed
	sent      []sentMessage
	published []alert.Alert
}

var (
	testNow  = time.Date(2025, 2, 4, 10, 20, 0, 0, time.UTC)
	errStore = errors.New("dynamodb: ProvisionedThroughputExceededException")
	errQueue = errors.New("sqs: ServiceUnavailable")
	errSNS   = errors.New("sns: InternalError")
)

const testQueueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler"

func testConfig() Config {
	return Config{
		OrdersTable:       "orders",
		StateTable:        "state",
		SchedulerQueueURL: testQueueURL,
		AlertTopicARN:     "arn:aws:sns:eu-west-1:123456789012:alerts",
		Policy: workflow.Policy{
			MaxFailures: 3, ClaimTimeout: 2 * time.Minute,
			BackoffBase: 5 * time.Second, BackoffMax: 8 * time.Second, AlertTimeout: 4 * time.Minute,
		},
		BatchLimit: 50,
	}
}

// applied is the record as the real store writes it for decision r.
func applied(seen workflow.State, r workflow.Recovery, now time.Time) workflow.State {
	st := seen
	st.CompleteBy, st.UpdatedAt = r.CompleteBy, now
	switch r.Kind {
	case workflow.Retry:
		st.ProcessState, st.FailureCount, st.LockedBy = workflow.Pending, r.FailureCount, ""
		st.LastError = "step " + seen.Step + " timed out"
	case workflow.GiveUp:
		st.ProcessState, st.FailureCount, st.LockedBy = workflow.Error, r.FailureCount, ""
		st.AlertPending = true
		st.LastError = "step " + seen.Step + " timed out"
	case workflow.Requeue:
		st.Requeues++
	}
	return st
}

// newFixture builds a Handler over recording fakes; the store lists
// records, and change may replace behaviours to inject faults.
func newFixture(t *testing.T, cfg Config, now time.Time, records []workflow.State, change func(*deps)) *fixture {
	t.Helper()
	if err := cfg.Policy.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	d := deps{
		store: storeFuncs{
			expired: func(context.Context, time.Time, int) ([]workflow.State, error) {
				return slices.Clone(records), nil
			},
			recover: func(_ context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
				return applied(seen, r, now), nil
			},
			alertSent: func(context.Context, string, int, time.Time) error { return nil },
		},
		send:    func(context.Context, string, string, time.Duration) error { return nil },
		publish: func(context.Context, alert.Alert) error { return nil },
	}
	if change != nil {
		change(&d)
	}
	f := &fixture{cfg: cfg, clk: clock.NewFake(now)}
	store := storeFuncs{
		expired: func(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
			f.record("Expired", func() { f.expired = append(f.expired, expiredCall{now, limit}) })
			return d.store.expired(ctx, now, limit)
		},
		recover: func(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
			f.record(fmt.Sprintf("Recover %s %s", seen.OrderID, r.Kind), func() { f.recovers = append(f.recovers, recoverCall{seen, r, now}) })
			return d.store.recover(ctx, seen, r, now)
		},
		alertSent: func(ctx context.Context, orderID string, attempt int, now time.Time) error {
			f.record("AlertSent "+orderID, func() { f.confirms = append(f.confirms, confirmed{orderID, attempt, now}) })
			return d.store.alertSent(ctx, orderID, attempt, now)
		},
	}
	send := func(ctx context.Context, queueURL, body string, delay time.Duration) error {
		f.record("Send "+decodeSchedule(t, body).OrderID, func() { f.sent = append(f.sent, sentMessage{queueURL, body, delay}) })
		return d.send(ctx, queueURL, body, delay)
	}
	publish := func(ctx context.Context, a alert.Alert) error {
		f.record(fmt.Sprintf("Publish %s %s", a.Kind, a.OrderID), func() { f.published = append(f.published, a) })
		return d.publish(ctx, a)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.h = New(cfg, store, sendFunc(send), publishFunc(publish), f.clk, log)
	return f
}

func (f *fixture) record(call string, save func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	save()
}

func (f *fixture) run(t *testing.T) (Report, error) {
	t.Helper()
	return f.h.Run(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func decodeSchedule(t *testing.T, body string) message.Schedule {
	t.Helper()
	m, err := message.DecodeSchedule(body)
	if err != nil {
		t.Fatalf("sent body is not a schedule message: %v\n%s", err, body)
	}
	return m
}

// Records as the in-flight index returns them: projected attributes only.

func processing(orderID string, failures int, completeBy time.Time) workflow.State {
	return workflow.State{
		OrderID: orderID, Workflow: "order-v1", StepIndex: 1, Step: "charge-payment",
		ProcessState: workflow.Processing, LockedBy: "scheduler/req-1/msg-1",
		CompleteBy: completeBy, FailureCount: failures, Attempt: 4,
	}
}

func pending(orderID string, completeBy time.Time) workflow.State {
	return workflow.State{
		OrderID: orderID, Workflow: "order-v1", StepIndex: 0, Step: "reserve-inventory",
		ProcessState: workflow.Pending, CompleteBy: completeBy, FailureCount: 1, Attempt: 2, Requeues: 1,
	}
}

func failed(orderID string, failures int, alertPending bool, completeBy time.Time) workflow.State {
	return workflow.State{
		OrderID: orderID, Workflow: "order-v1", StepIndex: 1, Step: "charge-payment",
		ProcessState: workflow.Error, CompleteBy: completeBy, FailureCount: failures, Attempt: 6,
		LastError: "card-declined: the issuer declined the card", AlertPending: alertPending,
	}
}

const (
	orderA = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	orderB = "2b1f0c8e-5a43-4d6e-9f21-0c7a8e3d4b56"
	orderC = "d4a7e2f1-0b3c-4e5d-8f6a-7b8c9d0e1f2a"
	orderD = "0e6b3c9a-1f2d-4a5b-8c7d-9e0f1a2b3c4d"
	orderE = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d"
)

// ---------------------------------------------------------------------------
// One record of each kind.

func TestRunRecoveryKinds(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	p := cfg.Policy
	past := testNow.Add(-time.Second)
	type wantSend struct {
		reason string
		delay  time.Duration
	}
	tests := []struct {
		name string
		seen workflow.State
		// wantRecovery is the decision applied; nil when the record is left
		// alone.
		wantRecovery *workflow.Recovery
		wantSend     *wantSend
		wantAlert    alert.Kind // "" for none
		wantReport   Report
	}{
		{
			name:         "processing expired, first failure: retry after the base backoff",
			seen:         processing(orderA, 0, past),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.Retry, FailureCount: 1, Delay: 5 * time.Second, CompleteBy: testNow.Add(5*time.Second + p.ClaimTimeout)},
			wantSend:     &wantSend{reason: "retry", delay: 5 * time.Second},
			wantReport:   Report{Expired: 1, Retried: 1},
		},
		{
			name:         "processing expired, second failure: retry after a capped backoff",
			seen:         processing(orderA, 1, past),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.Retry, FailureCount: 2, Delay: 8 * time.Second, CompleteBy: testNow.Add(8*time.Second + p.ClaimTimeout)},
			wantSend:     &wantSend{reason: "retry", delay: 8 * time.Second},
			wantReport:   Report{Expired: 1, Retried: 1},
		},
		{
			name:         "processing expired exactly now counts as expired",
			seen:         processing(orderA, 0, testNow),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.Retry, FailureCount: 1, Delay: 5 * time.Second, CompleteBy: testNow.Add(5*time.Second + p.ClaimTimeout)},
			wantSend:     &wantSend{reason: "retry", delay: 5 * time.Second},
			wantReport:   Report{Expired: 1, Retried: 1},
		},
		{
			name:         "processing expired at the threshold: give up and alert",
			seen:         processing(orderA, 2, past),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.GiveUp, FailureCount: 3, CompleteBy: testNow.Add(p.AlertTimeout)},
			wantAlert:    alert.KindRetriesExhausted,
			wantReport:   Report{Expired: 1, GaveUp: 1},
		},
		{
			name:         "processing expired past the threshold: give up and alert",
			seen:         processing(orderA, 7, past),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.GiveUp, FailureCount: 8, CompleteBy: testNow.Add(p.AlertTimeout)},
			wantAlert:    alert.KindRetriesExhausted,
			wantReport:   Report{Expired: 1, GaveUp: 1},
		},
		{
			name: "pending expired: requeue without delay",
			seen: pending(orderA, past),
			// Its second requeue: the claim wait doubles.
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.Requeue, FailureCount: 1, CompleteBy: testNow.Add(2 * p.ClaimTimeout)},
			wantSend:     &wantSend{reason: "requeue", delay: 0},
			wantReport:   Report{Expired: 1, Requeued: 1},
		},
		{
			name:         "error with its alert pending after an agent's permanent failure",
			seen:         failed(orderA, 1, true, past),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.ResendAlert, FailureCount: 1, CompleteBy: testNow.Add(p.AlertTimeout)},
			wantAlert:    alert.KindPermanentFailure,
			wantReport:   Report{Expired: 1, AlertsResent: 1},
		},
		{
			name:         "error with its alert pending after giving up",
			seen:         failed(orderA, 3, true, past),
			wantRecovery: &workflow.Recovery{UndoFrom: -1, Kind: workflow.ResendAlert, FailureCount: 3, CompleteBy: testNow.Add(p.AlertTimeout)},
			wantAlert:    alert.KindRetriesExhausted,
			wantReport:   Report{Expired: 1, AlertsResent: 1},
		},
		{name: "processing not expired", seen: processing(orderA, 0, testNow.Add(time.Millisecond)), wantReport: Report{Expired: 1}},
		{name: "pending not expired", seen: pending(orderA, testNow.Add(time.Minute)), wantReport: Report{Expired: 1}},
		{name: "error with its alert pending, not expired", seen: failed(orderA, 1, true, testNow.Add(time.Second)), wantReport: Report{Expired: 1}},
		{name: "error with its alert sent", seen: failed(orderA, 1, false, past), wantReport: Report{Expired: 1}},
		{
			name:       "processed",
			seen:       workflow.State{OrderID: orderA, StepIndex: 1, Step: "charge-payment", ProcessState: workflow.Processed, CompleteBy: past, Attempt: 4},
			wantReport: Report{Expired: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, []workflow.State{tt.seen}, nil)
			rep, err := f.run(t)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep != tt.wantReport {
				t.Errorf("report = %+v, want %+v", rep, tt.wantReport)
			}
			if want := []expiredCall{{testNow, cfg.BatchLimit}}; !slices.Equal(f.expired, want) {
				t.Errorf("Expired calls = %+v, want %+v", f.expired, want)
			}
			wantCalls := []string{"Expired"}
			if tt.wantRecovery != nil {
				wantCalls = append(wantCalls, fmt.Sprintf("Recover %s %s", orderA, tt.wantRecovery.Kind))
			}
			if tt.wantSend != nil {
				wantCalls = append(wantCalls, "Send "+orderA)
			}
			if tt.wantAlert != "" {
				wantCalls = append(wantCalls, fmt.Sprintf("Publish %s %s", tt.wantAlert, orderA), "AlertSent "+orderA)
			}
			if !slices.Equal(f.calls, wantCalls) {
				t.Fatalf("calls = %v, want %v", f.calls, wantCalls)
			}
			if tt.wantRecovery == nil {
				return
			}
			wantR := *tt.wantRecovery
			if wantR.Kind == workflow.Retry || wantR.Kind == workflow.GiveUp {
				wantR.Cause, wantR.Reason = workflow.CauseTimeout, workflow.TimeoutMessage(tt.seen)
			}
			want := recoverCall{tt.seen, wantR, testNow}
			if len(f.recovers) != 1 || !reflect.DeepEqual(f.recovers[0], want) {
				t.Fatalf("Recover calls = %+v, want [%+v]", f.recovers, want)
			}
			st := applied(tt.seen, *tt.wantRecovery, testNow)
			if tt.wantSend != nil {
				s := f.sent[0]
				if s.queueURL != testQueueURL || s.delay != tt.wantSend.delay {
					t.Errorf("sent to %s with delay %v, want %s with delay %v", s.queueURL, s.delay, testQueueURL, tt.wantSend.delay)
				}
				wantMsg := message.Schedule{V: message.Version, Kind: message.KindSchedule, OrderID: orderA, StepIndex: tt.seen.StepIndex, Reason: tt.wantSend.reason}
				if got := decodeSchedule(t, s.body); got != wantMsg {
					t.Errorf("sent %+v, want %+v", got, wantMsg)
				}
			}
			if tt.wantAlert != "" {
				wantAlert := alert.Alert{
					Kind: tt.wantAlert, OrderID: orderA, Step: st.Step, StepIndex: st.StepIndex,
					FailureCount: st.FailureCount, MaxFailures: p.MaxFailures, Attempt: st.Attempt,
					LastError: st.LastError, At: testNow, CLI: alert.CLI(""),
				}
				if !reflect.DeepEqual(f.published[0], wantAlert) {
					t.Errorf("published\n%+v\nwant\n%+v", f.published[0], wantAlert)
				}
				if want := (confirmed{orderA, st.Attempt, testNow}); f.confirms[0] != want {
					t.Errorf("AlertSent(%+v), want %+v", f.confirms[0], want)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Failures of the store, the queue and the topic.

func TestRunFailures(t *testing.T) {
	t.Parallel()
	past := testNow.Add(-time.Second)
	tests := []struct {
		name       string
		seen       workflow.State
		change     func(*deps)
		wantCalls  []string
		wantReport Report
		// wantErr: Run returns an error (the listing failed).
		wantErr error
		// wantHandleErr: Handle reports the run as failed.
		wantHandleErr bool
	}{
		{
			name: "another actor moved the record on: lost, nothing sent",
			seen: processing(orderA, 0, past),
			change: func(d *deps) {
				d.store.recover = func(context.Context, workflow.State, workflow.Recovery, time.Time) (workflow.State, error) {
					return workflow.State{}, fmt.Errorf("recover %s (retry): %w", orderA, workflow.ErrStale)
				}
			},
			wantCalls:  []string{"Expired", "Recover " + orderA + " retry"},
			wantReport: Report{Expired: 1, Lost: 1},
		},
		{
			name: "give-up lost to another actor: no alert",
			seen: processing(orderA, 2, past),
			change: func(d *deps) {
				d.store.recover = func(context.Context, workflow.State, workflow.Recovery, time.Time) (workflow.State, error) {
					return workflow.State{}, workflow.ErrStale
				}
			},
			wantCalls:  []string{"Expired", "Recover " + orderA + " give-up"},
			wantReport: Report{Expired: 1, Lost: 1},
		},
		{
			name: "resend lost to another actor: no alert",
			seen: failed(orderA, 0, true, past),
			change: func(d *deps) {
				d.store.recover = func(context.Context, workflow.State, workflow.Recovery, time.Time) (workflow.State, error) {
					return workflow.State{}, workflow.ErrStale
				}
			},
			wantCalls:  []string{"Expired", "Recover " + orderA + " resend-alert"},
			wantReport: Report{Expired: 1, Lost: 1},
		},
		{
			name: "recover fails",
			seen: processing(orderA, 0, past),
			change: func(d *deps) {
				d.store.recover = func(context.Context, workflow.State, workflow.Recovery, time.Time) (workflow.State, error) {
					return workflow.State{}, errStore
				}
			},
			wantCalls:     []string{"Expired", "Recover " + orderA + " retry"},
			wantReport:    Report{Expired: 1, Failed: 1},
			wantHandleErr: true,
		},
		{
			// The record is Pending with a new CompleteBy, so a later run
			// requeues it. Run counts it as Failed only.
			name:          "retry message not sent",
			seen:          processing(orderA, 0, past),
			change:        func(d *deps) { d.send = func(context.Context, string, string, time.Duration) error { return errQueue } },
			wantCalls:     []string{"Expired", "Recover " + orderA + " retry", "Send " + orderA},
			wantReport:    Report{Expired: 1, Failed: 1},
			wantHandleErr: true,
		},
		{
			name:          "requeue message not sent",
			seen:          pending(orderA, past),
			change:        func(d *deps) { d.send = func(context.Context, string, string, time.Duration) error { return errQueue } },
			wantCalls:     []string{"Expired", "Recover " + orderA + " requeue", "Send " + orderA},
			wantReport:    Report{Expired: 1, Failed: 1},
			wantHandleErr: true,
		},
		{
			// The record keeps AlertPending; the next run re-sends it.
			name:       "give-up alert not published: not confirmed",
			seen:       processing(orderA, 2, past),
			change:     func(d *deps) { d.publish = func(context.Context, alert.Alert) error { return errSNS } },
			wantCalls:  []string{"Expired", "Recover " + orderA + " give-up", "Publish retries-exhausted " + orderA},
			wantReport: Report{Expired: 1, GaveUp: 1},
		},
		{
			name:       "resent alert not published: not confirmed",
			seen:       failed(orderA, 0, true, past),
			change:     func(d *deps) { d.publish = func(context.Context, alert.Alert) error { return errSNS } },
			wantCalls:  []string{"Expired", "Recover " + orderA + " resend-alert", "Publish permanent-failure " + orderA},
			wantReport: Report{Expired: 1, AlertsResent: 1},
		},
		{
			name: "alert published, confirmation fails",
			seen: processing(orderA, 2, past),
			change: func(d *deps) {
				d.store.alertSent = func(context.Context, string, int, time.Time) error { return errStore }
			},
			wantCalls:  []string{"Expired", "Recover " + orderA + " give-up", "Publish retries-exhausted " + orderA, "AlertSent " + orderA},
			wantReport: Report{Expired: 1, GaveUp: 1},
		},
		{
			name: "alert published, confirmed by another actor first",
			seen: failed(orderA, 3, true, past),
			change: func(d *deps) {
				d.store.alertSent = func(context.Context, string, int, time.Time) error { return workflow.ErrStale }
			},
			wantCalls:  []string{"Expired", "Recover " + orderA + " resend-alert", "Publish retries-exhausted " + orderA, "AlertSent " + orderA},
			wantReport: Report{Expired: 1, AlertsResent: 1},
		},
		{
			name: "listing expired records fails",
			seen: processing(orderA, 0, past),
			change: func(d *deps) {
				d.store.expired = func(context.Context, time.Time, int) ([]workflow.State, error) { return nil, errStore }
			},
			wantCalls:     []string{"Expired"},
			wantErr:       errStore,
			wantHandleErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			records := []workflow.State{tt.seen}
			f := newFixture(t, testConfig(), testNow, records, tt.change)
			rep, err := f.run(t)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Run error = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Errorf("Run: %v", err)
			}
			if rep != tt.wantReport {
				t.Errorf("report = %+v, want %+v", rep, tt.wantReport)
			}
			if !slices.Equal(f.calls, tt.wantCalls) {
				t.Errorf("calls = %v, want %v", f.calls, tt.wantCalls)
			}

			// Handle surfaces a partial failure as a Lambda error.
			g := newFixture(t, testConfig(), testNow, records, tt.change)
			herr := g.h.Handle(context.Background(), scheduledEvent())
			if (herr != nil) != tt.wantHandleErr {
				t.Errorf("Handle error = %v, want error: %v", herr, tt.wantHandleErr)
			}
			if tt.wantErr != nil && !errors.Is(herr, tt.wantErr) {
				t.Errorf("Handle error = %v, want it to wrap %v", herr, tt.wantErr)
			}
		})
	}
}

// A run handles every record, whatever happens to the others, and counts
// each outcome.
func TestRunMixedBatch(t *testing.T) {
	t.Parallel()
	past := testNow.Add(-time.Minute)
	const (
		stale    = "aaaaaaaa-0000-4000-8000-000000000001"
		broken   = "aaaaaaaa-0000-4000-8000-000000000002"
		unsent   = "aaaaaaaa-0000-4000-8000-000000000003"
		notYet   = "aaaaaaaa-0000-4000-8000-000000000004"
		finished = "aaaaaaaa-0000-4000-8000-000000000005"
	)
	records := []workflow.State{
		processing(broken, 0, past),   // Recover fails
		processing(orderA, 0, past),   // retry
		processing(orderB, 2, past),   // give up
		pending(orderC, past),         // requeue
		failed(orderD, 0, true, past), // resend permanent-failure alert
		failed(orderE, 3, true, past), // resend retries-exhausted alert
		processing(stale, 1, past),    // lost to another actor
		pending(unsent, past),         // requeue, send fails
		processing(notYet, 0, testNow.Add(time.Second)),
		failed(finished, 1, false, past),
	}
	f := newFixture(t, testConfig(), testNow, records, func(d *deps) {
		d.store.recover = func(_ context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error) {
			switch seen.OrderID {
			case broken:
				return workflow.State{}, errStore
			case stale:
				return workflow.State{}, workflow.ErrStale
			}
			return applied(seen, r, now), nil
		}
		d.send = func(_ context.Context, _, body string, _ time.Duration) error {
			if strings.Contains(body, unsent) {
				return errQueue
			}
			return nil
		}
	})
	rep, err := f.run(t)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := Report{Expired: 10, Retried: 1, GaveUp: 1, Requeued: 1, AlertsResent: 2, Lost: 1, Failed: 2}
	if rep != want {
		t.Errorf("report = %+v, want %+v", rep, want)
	}
	wantCalls := []string{
		"Expired",
		"Recover " + broken + " retry",
		"Recover " + orderA + " retry", "Send " + orderA,
		"Recover " + orderB + " give-up", "Publish retries-exhausted " + orderB, "AlertSent " + orderB,
		"Recover " + orderC + " requeue", "Send " + orderC,
		"Recover " + orderD + " resend-alert", "Publish permanent-failure " + orderD, "AlertSent " + orderD,
		"Recover " + orderE + " resend-alert", "Publish retries-exhausted " + orderE, "AlertSent " + orderE,
		"Recover " + stale + " retry",
		"Recover " + unsent + " requeue", "Send " + unsent,
	}
	if !slices.Equal(f.calls, wantCalls) {
		t.Errorf("calls =\n  %s\nwant\n  %s", strings.Join(f.calls, "\n  "), strings.Join(wantCalls, "\n  "))
	}
	for _, s := range f.sent {
		if s.queueURL != testQueueURL {
			t.Errorf("sent to %s, want the scheduler queue", s.queueURL)
		}
	}

	g := newFixture(t, testConfig(), testNow, records, nil)
	if err := g.h.Handle(context.Background(), scheduledEvent()); err != nil {
		t.Errorf("Handle with every write succeeding: %v", err)
	}
}

func TestRunNothingExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, nil, nil)
	rep, err := f.run(t)
	if err != nil || rep != (Report{}) {
		t.Fatalf("Run = %+v, %v; want an empty report", rep, err)
	}
	if !slices.Equal(f.calls, []string{"Expired"}) {
		t.Errorf("calls = %v", f.calls)
	}
}

// Each run reads the clock afresh.
func TestRunUsesTheClockOfEachRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, nil, nil)
	for range 2 {
		if err := f.h.Handle(context.Background(), scheduledEvent()); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Minute)
	}
	want := []expiredCall{{testNow, 50}, {testNow.Add(time.Minute), 50}}
	if !slices.Equal(f.expired, want) {
		t.Errorf("Expired calls = %+v, want %+v", f.expired, want)
	}
}

// ---------------------------------------------------------------------------
// The sample event under events/ is what developers invoke the function with
// locally; running it here keeps it from drifting from the handler.

func scheduledEvent() events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version: "0", ID: "00000000-0000-4000-8000-000000000000", DetailType: "Scheduled Event",
		Source: "aws.events", AccountID: "123456789012", Time: testNow, Region: "eu-west-1",
		Resources: []string{"arn:aws:events:eu-west-1:123456789012:rule/sas-supervisor-every-minute"},
		Detail:    json.RawMessage(`{}`),
	}
}

func TestSampleScheduledEvent(t *testing.T) {
	t.Parallel()
	ev := eventsample.Load[events.EventBridgeEvent](t, "supervisor-scheduled.json")
	if ev.Version != "0" || ev.Source != "aws.events" || ev.DetailType != "Scheduled Event" || ev.ID == "" ||
		ev.AccountID == "" || ev.Region == "" || ev.Time.IsZero() {
		t.Errorf("not a scheduled event: %+v", ev)
	}
	if len(ev.Resources) != 1 || !strings.HasPrefix(ev.Resources[0], "arn:aws:events:"+ev.Region+":"+ev.AccountID+":rule/") {
		t.Errorf("resources = %v, want the rule's ARN", ev.Resources)
	}
	if string(ev.Detail) != "{}" {
		t.Errorf("detail = %s, want {}", ev.Detail)
	}

	cfg, err := LoadConfig(getenv(sampleEnv()))
	if err != nil {
		t.Fatalf("LoadConfig(sampleEnv): %v", err)
	}
	// The schedule fires at ev.Time; one record of each kind is due.
	now := ev.Time
	past := now.Add(-time.Second)
	records := []workflow.State{
		processing(orderA, 0, past),
		processing(orderB, cfg.Policy.MaxFailures-1, past),
		pending(orderC, past),
		failed(orderD, 0, true, past),
		processing(orderE, 0, now.Add(time.Second)),
	}
	f := newFixture(t, cfg, now, records, nil)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "3e1f0c2a-9b8d-4c7e-a6f5-1d2c3b4a5e6f"})
	if err := f.h.Handle(ctx, ev); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if want := []expiredCall{{now, cfg.BatchLimit}}; !slices.Equal(f.expired, want) {
		t.Errorf("Expired calls = %+v, want %+v", f.expired, want)
	}
	wantCalls := []string{
		"Expired",
		"Recover " + orderA + " retry", "Send " + orderA,
		"Recover " + orderB + " give-up", "Publish retries-exhausted " + orderB, "AlertSent " + orderB,
		"Recover " + orderC + " requeue", "Send " + orderC,
		"Recover " + orderD + " resend-alert", "Publish permanent-failure " + orderD, "AlertSent " + orderD,
	}
	if !slices.Equal(f.calls, wantCalls) {
		t.Errorf("calls =\n  %s\nwant\n  %s", strings.Join(f.calls, "\n  "), strings.Join(wantCalls, "\n  "))
	}
	wantSent := []sentMessage{
		{sampleSchedulerQueue, message.Encode(message.NewSchedule(orderA, 1, "retry")), cfg.Policy.BackoffBase},
		{sampleSchedulerQueue, message.Encode(message.NewSchedule(orderC, 0, "requeue")), 0},
	}
	if !slices.Equal(f.sent, wantSent) {
		t.Errorf("sent = %+v, want %+v", f.sent, wantSent)
	}
}
