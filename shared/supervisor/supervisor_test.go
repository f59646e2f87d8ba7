package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/actortest"
	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// ---------------------------------------------------------------------------
// The Handler runs on the in-memory state store (through actortest, which
// logs every call of the store, the queue and the topic in one list): the
// Supervisor finds the records a test puts there through the store's own
// Expired, as the in-flight index holds them, and a test injects faults with
// the store's Fault hook and the sender's and publisher's Fail.

var (
	_ Store        = (*actortest.Store)(nil)
	_ Sender       = (*actortest.Sender)(nil)
	_ alert.Sender = (*actortest.Publisher)(nil)
)

type fixture struct {
	actortest.Doubles
	cfg Config
	clk *clock.Fake
	h   *Handler
}

var testNow = time.Date(2025, 2, 4, 10, 20, 0, 0, time.UTC)

var errStore, errQueue, errSNS = actortest.ErrStore, actortest.ErrQueue, actortest.ErrSNS

const orderA, orderB, orderC, orderD, orderE = actortest.OrderA, actortest.OrderB, actortest.OrderC, actortest.OrderD, actortest.OrderE

const testQueueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler"

// testConfig runs the default workflow with no step to undo: a step given
// up on puts its order in Error with an alert.
func testConfig() Config {
	def := workflow.Reference()
	for i := range def.Steps {
		def.Steps[i].Compensable = false
	}
	return Config{Config: followup.Config{
		Workflows:         workflow.Single(def),
		OrdersTable:       "orders",
		StateTable:        "state",
		SchedulerQueueURL: testQueueURL,
		AlertTopicARN:     "arn:aws:sns:eu-west-1:123456789012:alerts",
		Policy: workflow.Policy{
			MaxFailures: 3, ClaimTimeout: 2 * time.Minute,
			BackoffBase: 5 * time.Second, BackoffMax: 8 * time.Second, AlertTimeout: 4 * time.Minute,
			Retention: workflow.DefaultRetention,
		},
	}, BatchLimit: 50}
}

// newFixture builds a Handler over the doubles, its store holding records.
func newFixture(t *testing.T, cfg Config, now time.Time, records []workflow.State) *fixture {
	t.Helper()
	if err := cfg.Policy.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	f := &fixture{Doubles: actortest.New(), cfg: cfg, clk: clock.NewFake(now)}
	f.Store.Clock = f.clk // the store's reads expire records by the test's time
	for _, st := range records {
		f.Store.Put(st)
	}
	// The logger is actor.Deps's default, which discards.
	h, err := New(cfg, f.Store, f.Send, f.Publish, actor.Deps{Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func (f *fixture) run(t *testing.T) (Report, error) {
	t.Helper()
	return f.h.Run(context.Background(), f.h.log)
}

func decodeSchedule(t *testing.T, body string) message.Schedule {
	t.Helper()
	m, err := message.DecodeSchedule(body)
	if err != nil {
		t.Fatalf("sent body is not a schedule message: %v\n%s", err, body)
	}
	return m
}

// Records the Supervisor watches (in its index).

// history is a record's step history, as an order of the default workflow
// starts with: a store refuses a patch of a step the record lacks.
func history() []workflow.StepRecord {
	return workflow.NewState("", workflow.Reference(), nil, testNow, testNow).Steps
}

// processing is a record working on its second step: the first succeeded,
// the second was claimed (the Supervisor reads whole records, so the
// history must agree with Attempt).
func processing(orderID string, failures int, completeBy time.Time) workflow.State {
	steps := history()
	steps[0].State, steps[0].Attempts = workflow.StepSucceeded, 1
	steps[1].State, steps[1].Attempts = workflow.StepProcessing, 3
	return workflow.State{
		OrderID: orderID, Workflow: "order-v1", StepIndex: 1, Step: "charge-payment",
		ProcessState: workflow.Processing, LockedBy: "scheduler/req-1/msg-1",
		CompleteBy: completeBy, FailureCount: failures, Attempt: 4, InFlight: true, Steps: steps,
	}
}

func pending(orderID string, completeBy time.Time) workflow.State {
	return workflow.State{
		OrderID: orderID, Workflow: "order-v1", StepIndex: 0, Step: "reserve-inventory",
		ProcessState: workflow.Pending, CompleteBy: completeBy, FailureCount: 1, Attempt: 2, Requeues: 1, InFlight: true,
		Steps: history(),
	}
}

// failed is a record in Error; the index holds it even once its alert is
// sent (as it may until the confirmation reaches it), so that the
// Supervisor's own check is tested.
func failed(orderID string, failures int, alertPending bool, completeBy time.Time) workflow.State {
	return workflow.State{
		OrderID: orderID, Workflow: "order-v1", StepIndex: 1, Step: "charge-payment",
		ProcessState: workflow.Error, CompleteBy: completeBy, FailureCount: failures, Attempt: 6,
		LastError: "card-declined: the issuer declined the card", AlertPending: alertPending, InFlight: true,
		Steps: history(),
	}
}

// inListingOrder moves the records' deadlines a millisecond apart, the
// first earliest, so that the store (earliest deadline first) lists them in
// the order given.
func inListingOrder(records ...workflow.State) []workflow.State {
	for i := range records {
		records[i].CompleteBy = records[i].CompleteBy.Add(time.Duration(i-len(records)) * time.Millisecond)
	}
	return records
}

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
	type row struct {
		name string
		seen workflow.State
		// wantApply labels the change the Supervisor writes; "" when it
		// leaves the record alone.
		wantApply string
		// want is the record as written, and wantCompleteBy its new deadline.
		want           actortest.Digest
		wantCompleteBy time.Time
		wantSend       *wantSend
		wantAlert      alert.Kind // "" for none
		wantReport     Report
	}
	// The outcomes, each with the FailureCount it writes.
	retry := func(name string, seen workflow.State, failures int, backoff time.Duration) row {
		return row{name: name, seen: seen, wantApply: "retried",
			want:           actortest.Digest{State: workflow.Pending, Step: seen.StepIndex, Attempt: seen.Attempt, Failures: failures},
			wantCompleteBy: testNow.Add(backoff + p.ClaimTimeout), wantSend: &wantSend{reason: "retry", delay: backoff},
			wantReport: Report{Expired: 1, Retried: 1}}
	}
	giveUp := func(name string, seen workflow.State, failures int) row {
		return row{name: name, seen: seen, wantApply: "gave-up",
			want:           actortest.Digest{State: workflow.Error, Step: seen.StepIndex, Attempt: seen.Attempt, Failures: failures, AlertOwed: true},
			wantCompleteBy: testNow.Add(p.AlertTimeout), wantAlert: alert.KindNotUndoable,
			wantReport: Report{Expired: 1, GaveUp: 1}}
	}
	resend := func(name string, seen workflow.State, kind alert.Kind) row {
		return row{name: name, seen: seen, wantApply: "alert-resent",
			want:           actortest.Digest{State: workflow.Error, Step: seen.StepIndex, Attempt: seen.Attempt, Failures: seen.FailureCount, AlertOwed: true},
			wantCompleteBy: testNow.Add(p.AlertTimeout), wantAlert: kind,
			wantReport: Report{Expired: 1, AlertsResent: 1}}
	}
	leftAlone := func(name string, seen workflow.State) row {
		return row{name: name, seen: seen, wantReport: Report{Expired: 1}}
	}
	tests := []row{
		retry("processing expired, first failure: retry after the base backoff", processing(orderA, 0, past), 1, 5*time.Second),
		retry("processing expired, second failure: retry after a capped backoff", processing(orderA, 1, past), 2, 8*time.Second),
		retry("processing expired exactly now counts as expired", processing(orderA, 0, testNow), 1, 5*time.Second),
		giveUp("processing expired at the threshold: give up and alert", processing(orderA, 2, past), 3),
		giveUp("processing expired past the threshold: give up and alert", processing(orderA, 7, past), 8),
		{
			name: "pending expired: requeue without delay", seen: pending(orderA, past),
			wantApply: "requeued", want: actortest.Digest{State: workflow.Pending, Attempt: 2, Failures: 1},
			// Its second requeue: the claim wait doubles.
			wantCompleteBy: testNow.Add(2 * p.ClaimTimeout), wantSend: &wantSend{reason: "requeue", delay: 0},
			wantReport: Report{Expired: 1, Requeued: 1},
		},
		resend("error with its alert pending after an agent's permanent failure", failed(orderA, 1, true, past), alert.KindPermanentFailure),
		resend("error with its alert pending after giving up", failed(orderA, 3, true, past), alert.KindRetriesExhausted),
		leftAlone("processing not expired", processing(orderA, 0, testNow.Add(time.Millisecond))),
		leftAlone("pending not expired", pending(orderA, testNow.Add(time.Minute))),
		leftAlone("error with its alert pending, not expired", failed(orderA, 1, true, testNow.Add(time.Second))),
		leftAlone("error with its alert sent", failed(orderA, 1, false, past)),
		leftAlone("processed", workflow.State{OrderID: orderA, StepIndex: 1, Step: "charge-payment",
			ProcessState: workflow.Processed, CompleteBy: past, Attempt: 4, InFlight: true}),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, cfg, testNow, []workflow.State{tt.seen})
			// The store lists what falls due within the hour too: the
			// Supervisor must leave alone what is not due yet.
			f.Store.ListAhead = time.Hour
			rep, err := f.run(t)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep != tt.wantReport {
				t.Errorf("report = %+v, want %+v", rep, tt.wantReport)
			}
			if want := []actortest.Listing{{Now: testNow, Limit: cfg.BatchLimit}}; !slices.Equal(f.Store.Listings(), want) {
				t.Errorf("Expired calls = %+v, want %+v", f.Store.Listings(), want)
			}
			wantCalls := []string{"Expired"}
			if tt.wantApply != "" {
				wantCalls = append(wantCalls, "Apply "+orderA+" "+tt.wantApply)
			}
			if tt.wantSend != nil {
				wantCalls = append(wantCalls, "Send scheduler "+orderA)
			}
			if tt.wantAlert != "" {
				wantCalls = append(wantCalls, "Publish "+string(tt.wantAlert)+" "+orderA, "Apply "+orderA+" alert-sent")
			}
			f.Calls.Check(t, wantCalls...)
			if tt.wantApply == "" {
				if f.Store.Writes() != 0 {
					t.Errorf("%d writes to a record left alone", f.Store.Writes())
				}
				return
			}
			// The record as the Supervisor's change wrote it: fenced on
			// what it saw, so it is the listed record moved on.
			st := f.Store.Applies()[0].State
			if got := actortest.DigestOf(st); got != tt.want || !st.CompleteBy.Equal(tt.wantCompleteBy) || st.LockedBy != "" {
				t.Errorf("written %+v due %v, want %+v due %v, unlocked", got, st.CompleteBy, tt.want, tt.wantCompleteBy)
			}
			wantLastError := tt.seen.LastError
			if tt.seen.ProcessState == workflow.Processing {
				wantLastError = workflow.TimeoutMessage(tt.seen)
			}
			if tt.wantApply == "gave-up" {
				// No step has an undo: the ones before were applied, and
				// this one may have been.
				wantLastError = workflow.NotUndoablePrefix + "step reserve-inventory was applied, step charge-payment may have been applied and have no undo; " + wantLastError
			}
			if st.LastError != wantLastError || st.Requeues != tt.seen.Requeues+btoi(tt.wantApply == "requeued") {
				t.Errorf("written LastError %q, requeues %d; want %q, %d", st.LastError, st.Requeues, wantLastError, tt.seen.Requeues+btoi(tt.wantApply == "requeued"))
			}
			if tt.wantSend != nil {
				s := f.Send.Sent()[0]
				if s.QueueURL != testQueueURL || s.Delay != tt.wantSend.delay {
					t.Errorf("sent to %s with delay %v, want %s with delay %v", s.QueueURL, s.Delay, testQueueURL, tt.wantSend.delay)
				}
				wantMsg := message.Schedule{V: message.Version, Kind: message.KindSchedule, OrderID: orderA, Workflow: "order-v1", StepIndex: tt.seen.StepIndex, Reason: tt.wantSend.reason}
				if got := decodeSchedule(t, s.Body); got != wantMsg {
					t.Errorf("sent %+v, want %+v", got, wantMsg)
				}
			}
			if tt.wantAlert != "" {
				wantAlert := alert.Alert{
					Kind: tt.wantAlert, OrderID: orderA, Workflow: st.Workflow, Step: st.Step, StepIndex: st.StepIndex,
					FailureCount: st.FailureCount, MaxFailures: p.MaxFailures, Attempt: st.Attempt, State: st.ProcessState,
					LastError: st.LastError, At: testNow, CLI: alert.CLI(""),
				}
				if got := f.Publish.Published()[0]; !reflect.DeepEqual(got, wantAlert) {
					t.Errorf("published\n%+v\nwant\n%+v", got, wantAlert)
				}
				if got, want := f.Store.Changes("alert-sent"), (workflow.Machine{}).AlertSent(orderA, st.Attempt, st.ProcessState, testNow); !reflect.DeepEqual(got, []workflow.Change{want}) {
					t.Errorf("confirmations %+v, want [%+v]", got, want)
				}
				if after := f.Store.Record(t, orderA); after.AlertPending || after.InFlight {
					t.Errorf("record %+v still owes its alert after the confirmation", after)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ---------------------------------------------------------------------------
// Failures of the store, the queue and the topic.

func TestRunFailures(t *testing.T) {
	t.Parallel()
	past := testNow.Add(-time.Second)
	apply := func(label string) string { return "Apply " + orderA + " " + label }
	retried, gaveUp, resent, confirmed := apply("retried"), apply("gave-up"), apply("alert-resent"), apply("alert-sent")
	handBack := "Send scheduler " + orderA
	failSend := func(f *fixture) { f.Send.Fail = func(string, string) error { return errQueue } }
	failPublish := func(f *fixture) { f.Publish.Fail = func(alert.Alert) error { return errSNS } }
	tests := []struct {
		name       string
		seen       workflow.State
		setup      func(*fixture)
		wantCalls  []string
		wantReport Report
		// wantErr: Run returns an error (the listing failed).
		wantErr error
		// wantHandleErr: Handle reports the run as failed.
		wantHandleErr bool
		// wantAlertOwed: the record still owes its alert after the run.
		wantAlertOwed bool
	}{
		{
			name:       "another Supervisor moved the record on: lost, nothing sent",
			seen:       processing(orderA, 0, past),
			setup:      func(f *fixture) { f.Store.Beaten("retried", orderA) },
			wantCalls:  []string{"Expired", retried},
			wantReport: Report{Expired: 1, Lost: 1},
		},
		{
			name:       "give-up lost to another actor: no alert",
			seen:       processing(orderA, 2, past),
			setup:      func(f *fixture) { f.Store.Beaten("gave-up", orderA) },
			wantCalls:  []string{"Expired", gaveUp},
			wantReport: Report{Expired: 1, Lost: 1}, wantAlertOwed: true,
		},
		{
			name:       "resend lost to another actor: no alert",
			seen:       failed(orderA, 0, true, past),
			setup:      func(f *fixture) { f.Store.Beaten("alert-resent", orderA) },
			wantCalls:  []string{"Expired", resent},
			wantReport: Report{Expired: 1, Lost: 1}, wantAlertOwed: true,
		},
		{
			name:          "recover fails",
			seen:          processing(orderA, 0, past),
			setup:         func(f *fixture) { f.Store.Fault = actortest.Fault(errStore, "Apply", "retried") },
			wantCalls:     []string{"Expired", retried},
			wantReport:    Report{Expired: 1, Failed: 1},
			wantHandleErr: true,
		},
		{
			// The record is Pending with a new CompleteBy, so a later run
			// requeues it. Run counts it as Failed only.
			name:          "retry message not sent",
			seen:          processing(orderA, 0, past),
			setup:         failSend,
			wantCalls:     []string{"Expired", retried, handBack},
			wantReport:    Report{Expired: 1, Failed: 1},
			wantHandleErr: true,
		},
		{
			name:          "requeue message not sent",
			seen:          pending(orderA, past),
			setup:         failSend,
			wantCalls:     []string{"Expired", apply("requeued"), handBack},
			wantReport:    Report{Expired: 1, Failed: 1},
			wantHandleErr: true,
		},
		{
			// The record keeps AlertPending; the next run re-sends it.
			name:       "give-up alert not published: not confirmed",
			seen:       processing(orderA, 2, past),
			setup:      failPublish,
			wantCalls:  []string{"Expired", gaveUp, "Publish not-undoable " + orderA},
			wantReport: Report{Expired: 1, GaveUp: 1}, wantAlertOwed: true,
		},
		{
			name:       "resent alert not published: not confirmed",
			seen:       failed(orderA, 0, true, past),
			setup:      failPublish,
			wantCalls:  []string{"Expired", resent, "Publish permanent-failure " + orderA},
			wantReport: Report{Expired: 1, AlertsResent: 1}, wantAlertOwed: true,
		},
		{
			name:       "alert published, confirmation fails",
			seen:       processing(orderA, 2, past),
			setup:      func(f *fixture) { f.Store.Fault = actortest.Fault(errStore, "Apply", "alert-sent") },
			wantCalls:  []string{"Expired", gaveUp, "Publish not-undoable " + orderA, confirmed},
			wantReport: Report{Expired: 1, GaveUp: 1}, wantAlertOwed: true,
		},
		{
			name:       "alert published, confirmed by another actor first",
			seen:       failed(orderA, 3, true, past),
			setup:      func(f *fixture) { f.Store.Beaten("alert-sent", orderA) },
			wantCalls:  []string{"Expired", resent, "Publish retries-exhausted " + orderA, confirmed},
			wantReport: Report{Expired: 1, AlertsResent: 1},
		},
		{
			name:          "listing expired records fails",
			seen:          processing(orderA, 0, past),
			setup:         func(f *fixture) { f.Store.Fault = actortest.Fault(errStore, "Expired", "") },
			wantCalls:     []string{"Expired"},
			wantErr:       errStore,
			wantHandleErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			records := []workflow.State{tt.seen}
			f := newFixture(t, testConfig(), testNow, records)
			tt.setup(f)
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
			f.Calls.Check(t, tt.wantCalls...)
			f.Store.Fault = nil // the store is back, to read the record
			if owed := f.Store.Record(t, orderA).AlertPending; owed != tt.wantAlertOwed {
				t.Errorf("alert owed %v after the run, want %v", owed, tt.wantAlertOwed)
			}

			// Handle surfaces a partial failure as a Lambda error.
			g := newFixture(t, testConfig(), testNow, records)
			tt.setup(g)
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
	records := inListingOrder(
		processing(broken, 0, past),   // its write fails
		processing(orderA, 0, past),   // retry
		processing(orderB, 2, past),   // give up
		pending(orderC, past),         // requeue
		failed(orderD, 0, true, past), // resend permanent-failure alert
		failed(orderE, 3, true, past), // resend retries-exhausted alert
		processing(stale, 1, past),    // lost to another Supervisor
		pending(unsent, past),         // requeue, send fails
		failed(finished, 1, false, past),
		processing(notYet, 0, testNow.Add(time.Second)),
	)
	f := newFixture(t, testConfig(), testNow, records)
	f.Store.ListAhead = time.Minute // notYet is listed, and left alone
	f.Store.Fault = actortest.Fault(errStore, "Apply", "", broken)
	f.Store.Beaten("retried", stale)
	f.Send.Fail = func(_, body string) error {
		if strings.Contains(body, unsent) {
			return errQueue
		}
		return nil
	}
	rep, err := f.run(t)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := Report{Expired: 10, Retried: 1, GaveUp: 1, Requeued: 1, AlertsResent: 2, Lost: 1, Failed: 2}
	if rep != want {
		t.Errorf("report = %+v, want %+v", rep, want)
	}
	f.Calls.Check(t,
		"Expired",
		"Apply "+broken+" retried",
		"Apply "+orderA+" retried", "Send scheduler "+orderA,
		"Apply "+orderB+" gave-up", "Publish not-undoable "+orderB, "Apply "+orderB+" alert-sent",
		"Apply "+orderC+" requeued", "Send scheduler "+orderC,
		"Apply "+orderD+" alert-resent", "Publish permanent-failure "+orderD, "Apply "+orderD+" alert-sent",
		"Apply "+orderE+" alert-resent", "Publish retries-exhausted "+orderE, "Apply "+orderE+" alert-sent",
		"Apply "+stale+" retried",
		"Apply "+unsent+" requeued", "Send scheduler "+unsent,
	)
	for _, s := range f.Send.Sent() {
		if s.QueueURL != testQueueURL {
			t.Errorf("sent to %s, want the scheduler queue", s.QueueURL)
		}
	}

	g := newFixture(t, testConfig(), testNow, records)
	if err := g.h.Handle(context.Background(), scheduledEvent()); err != nil {
		t.Errorf("Handle with every write succeeding: %v", err)
	}
}

func TestRunNothingExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, nil)
	rep, err := f.run(t)
	if err != nil || rep != (Report{}) {
		t.Fatalf("Run = %+v, %v; want an empty report", rep, err)
	}
	f.Calls.Check(t, "Expired")
}

// Each run reads the clock afresh.
func TestRunUsesTheClockOfEachRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, nil)
	for range 2 {
		if err := f.h.Handle(context.Background(), scheduledEvent()); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Minute)
	}
	want := []actortest.Listing{{Now: testNow, Limit: 50}, {Now: testNow.Add(time.Minute), Limit: 50}}
	if got := f.Store.Listings(); !slices.Equal(got, want) {
		t.Errorf("Expired calls = %+v, want %+v", got, want)
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

	cfg, err := loadReference(configtest.Env(deployed))
	if err != nil {
		t.Fatalf("LoadConfig of the deployed environment: %v", err)
	}
	// The schedule fires at ev.Time; one record of each kind is due. The
	// shipped workflow can undo its steps, so the step given up on starts
	// its order's compensation rather than stopping it in Error.
	now := ev.Time
	past := now.Add(-time.Second)
	records := inListingOrder(
		processing(orderA, 0, past),
		processing(orderB, cfg.Policy.MaxFailures-1, past),
		pending(orderC, past),
		failed(orderD, 0, true, past),
		processing(orderE, 0, now.Add(time.Second)),
	)
	f := newFixture(t, cfg, now, records)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "3e1f0c2a-9b8d-4c7e-a6f5-1d2c3b4a5e6f"})
	if err := f.h.Handle(ctx, ev); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if want := []actortest.Listing{{Now: now, Limit: cfg.BatchLimit}}; !slices.Equal(f.Store.Listings(), want) {
		t.Errorf("Expired calls = %+v, want %+v", f.Store.Listings(), want)
	}
	queue := "Send sas-scheduler "
	f.Calls.Check(t,
		"Expired",
		"Apply "+orderA+" retried", queue+orderA,
		"Apply "+orderB+" compensating", queue+orderB,
		"Apply "+orderC+" requeued", queue+orderC,
		"Apply "+orderD+" alert-resent", "Publish permanent-failure "+orderD, "Apply "+orderD+" alert-sent",
	)
	wantSent := []actortest.Sent{
		{QueueURL: sampleSchedulerQueue, Body: message.Encode(message.NewSchedule(orderA, "order-v1", 1, "retry")), Delay: cfg.Policy.BackoffBase},
		{QueueURL: sampleSchedulerQueue, Body: message.Encode(message.NewCompensation(orderB, "order-v1", 1, "give-up"))},
		{QueueURL: sampleSchedulerQueue, Body: message.Encode(message.NewSchedule(orderC, "order-v1", 0, "requeue"))},
	}
	if got := f.Send.Sent(); !slices.Equal(got, wantSent) {
		t.Errorf("sent = %+v, want %+v", got, wantSent)
	}
	if st := f.Store.Record(t, orderB); st.ProcessState != workflow.CompensationPending || st.StepIndex != 1 || st.AlertPending {
		t.Errorf("record %+v, want the undo of step 1 waiting for its claim", st)
	}
}

// TestRunWaitsThenHandsTheStepBack: a step whose retry policy waits is put
// in Waiting at its own threshold (not the deployment's), with a notice
// of severity warning and no alert owed, and handed back to the Scheduler
// by the run that finds its wait over.
func TestRunWaitsThenHandsTheStepBack(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	def := cfg.Workflows.Definitions[0]
	two := 2
	def.Steps[1].Retry = &workflow.Retry{MaxFailures: &two, OnExhausted: workflow.ExhaustedWait, Wait: time.Hour, WaitRounds: 1}
	cfg.Workflows = workflow.Single(def)
	f := newFixture(t, cfg, testNow, []workflow.State{processing(orderA, 1, testNow.Add(-time.Second))})
	rep, err := f.run(t)
	if err != nil || rep != (Report{Expired: 1, Waited: 1}) {
		t.Fatalf("Run = %+v, %v", rep, err)
	}
	st := f.Store.Record(t, orderA)
	if st.ProcessState != workflow.Waiting || st.WaitRound != 1 || st.FailureCount != 0 || st.AlertPending || !st.InFlight ||
		!st.CompleteBy.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("after the threshold: %+v", st)
	}
	pub := f.Publish.Published()
	if len(pub) != 1 || pub[0].Kind != alert.KindWaiting || pub[0].Kind.Severity() != workflow.SeverityWarning || pub[0].MaxFailures != 2 {
		t.Fatalf("published %+v; want one waiting notice naming the step's threshold", pub)
	}
	f.Calls.Check(t, "Expired", "Apply "+orderA+" waiting", "Publish waiting "+orderA)

	f.clk.Set(st.CompleteBy)
	rep, err = f.run(t)
	if err != nil || rep != (Report{Expired: 1, Retried: 1}) {
		t.Fatalf("second Run = %+v, %v", rep, err)
	}
	st = f.Store.Record(t, orderA)
	sent := f.Send.Sent()
	if st.ProcessState != workflow.Pending || len(sent) != 1 || decodeSchedule(t, sent[0].Body).Reason != "wait-over" || sent[0].Delay != 0 {
		t.Fatalf("after the wait: %s, sent %+v", st.ProcessState, sent)
	}
}

// partListed is a store whose listing of expired records fails in part: a
// shard's query or a batch of reads was throttled, and the rest was read.
type partListed struct{ *actortest.Store }

func (s partListed) Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
	found, err := s.Store.Expired(ctx, now, limit)
	return found, errors.Join(err, errStore)
}

// A sweep whose listing failed in part recovers what it did read, and
// still fails its run, for the alarm and Lambda's retry: one throttled call
// of a sweep's many must not stop every recovery while throttling lasts.
func TestASweepRecoversWhatItReadWhenPartOfTheListingFails(t *testing.T) {
	t.Parallel()
	past := testNow.Add(-time.Second)
	f := newFixture(t, testConfig(), testNow, []workflow.State{processing(orderA, 0, past), processing(orderB, 0, past)})
	h, err := New(f.cfg, partListed{f.Store}, f.Send, f.Publish, actor.Deps{Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.Run(context.Background(), h.log)
	if !errors.Is(err, errStore) {
		t.Errorf("Run = %v, want the listing's error", err)
	}
	if rep.Expired != 2 || rep.Retried != 2 {
		t.Errorf("report %+v, want both records found and retried", rep)
	}
	if err := h.Handle(context.Background(), events.EventBridgeEvent{}); !errors.Is(err, errStore) {
		t.Errorf("Handle = %v, want the run failed with the listing's error", err)
	}
}

// unlisted is a store whose listing of expired records fails whole.
type unlisted struct{ *actortest.Store }

func (unlisted) Expired(context.Context, time.Time, int) ([]workflow.State, error) {
	return nil, errStore
}

// A sweep that cannot list at all fails its run with an ERROR line, which
// the ErrorLogLines alarm sees: until it lists again only the fast path
// recovers expired steps.
func TestASweepThatCannotListLogsAnError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testConfig(), testNow, nil)
	var buf logtest.Buffer
	h, err := New(f.cfg, unlisted{f.Store}, f.Send, f.Publish, actor.Deps{Clock: f.clk, Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), events.EventBridgeEvent{}); !errors.Is(err, errStore) {
		t.Fatalf("Handle = %v, want the listing's error", err)
	}
	for _, r := range buf.Records(t) {
		if r["level"] == "ERROR" && r["msg"] == "expired records not listed; the next run tries again" {
			return
		}
	}
	t.Errorf("no ERROR line for the failed listing in:\n%s", buf.String())
}
