package timer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/workflow"
)

// expireFunc is a Ledger from a function.
type expireFunc func(ctx context.Context, key string, at time.Time) error

func (f expireFunc) Expire(ctx context.Context, key string, at time.Time) error {
	return f(ctx, key, at)
}

// A ledger entry has no TTL while its order may still try its key, which
// an order waiting for an operator may do years later; once the order
// ended for good its entries get its record's TTL, every key each code
// step ran under, and only then.
func TestAnEndedOrdersLedgerEntriesExpireWithIt(t *testing.T) {
	t.Parallel()
	const a, b, c = "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90", "7a1e2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"
	ends := now.Add(90 * 24 * time.Hour).Truncate(time.Second)
	processing := phase(a, workflow.Processing, 2, 30*time.Second)
	processing.StepIndex, processing.Step = 1, "charge-payment"
	processing.Steps[0].Attempts, processing.Steps[1].Attempts = 1, 1
	processed := *processing
	processed.ProcessState, processed.InFlight, processed.ExpiresAt = workflow.Processed, false, ends
	// b's undo of charge-payment was refused, retried by an operator under
	// a new round, and done: both rounds' entries expire.
	undoing := phase(b, workflow.Compensating, 5, 30*time.Second)
	undoing.StepIndex, undoing.Step = 1, "charge-payment"
	undoing.Steps[1].Attempts, undoing.Steps[1].CompensationAttempts, undoing.Steps[1].UndoKeyRound = 1, 2, 1
	compensated := *undoing
	compensated.ProcessState, compensated.InFlight, compensated.ExpiresAt = workflow.Compensated, false, ends
	// c waits for an operator: its entries keep no TTL.
	failed := phase(c, workflow.Error, 3, 2*time.Minute)
	failed.StepIndex, failed.Step, failed.Steps[1].Attempts = 1, "charge-payment", 3
	var expired []string
	ledger := expireFunc(func(_ context.Context, key string, at time.Time) error {
		if !at.Equal(ends) {
			t.Errorf("%s expires at %v, want the record's %v", key, at, ends)
		}
		expired = append(expired, key)
		return nil
	})
	h, err := timer.New(timer.Config{DeadlineQueueURL: queueURL, LedgerTable: "sas-ledger", CodeSteps: []string{"charge-payment"}},
		sendFunc(func(context.Context, string, []queue.Outgoing) error { return nil }), ledger, actor.Deps{Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	again := processed
	again.EventSeq++
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		rec(t, "100", processing, &processed),
		rec(t, "200", &processed, &again), // already ended: nothing more
		rec(t, "300", undoing, &compensated),
		rec(t, "400", nil, failed),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	want := []string{
		"charge-payment#" + a + "/charge-payment",
		"charge-payment#" + b + "/charge-payment", "charge-payment#" + b + "/charge-payment/undo", "charge-payment#" + b + "/charge-payment/undo/r1",
	}
	if !slices.Equal(expired, want) {
		t.Fatalf("expired %q, want %q", expired, want)
	}
}

// An entry that could not be given its TTL holds the stream back from its
// record, as a Deadline not sent does; the records before it are done.
func TestALedgerFailureIsRetriedFromItsRecord(t *testing.T) {
	t.Parallel()
	const a, b = "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
	claimed := phase(a, workflow.Processing, 1, 30*time.Second)
	running := phase(b, workflow.Processing, 1, 30*time.Second)
	running.Steps[0].Attempts = 1
	ended := *running
	ended.ProcessState, ended.InFlight, ended.ExpiresAt = workflow.Processed, false, now.Add(time.Hour)
	later := phase(a, workflow.Processing, 2, 40*time.Second)
	var sent int
	h, err := timer.New(timer.Config{DeadlineQueueURL: queueURL, LedgerTable: "sas-ledger", CodeSteps: []string{"reserve-inventory"}},
		sendFunc(func(_ context.Context, _ string, msgs []queue.Outgoing) error { sent += len(msgs); return nil }),
		expireFunc(func(context.Context, string, time.Time) error { return errors.New("ThrottlingException") }), actor.Deps{Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		rec(t, "100", nil, claimed), rec(t, "200", running, &ended), rec(t, "300", claimed, later),
	}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "200" || sent != 1 {
		t.Fatalf("failures %+v, %d deadlines sent; want a retry from 200 and the one deadline before it", resp.BatchItemFailures, sent)
	}
}

// With code steps the Timer needs its ledger.
func TestCodeStepsNeedTheLedger(t *testing.T) {
	t.Parallel()
	_, err := timer.New(timer.Config{DeadlineQueueURL: queueURL, CodeSteps: []string{"ship-order", "ship-order"}},
		sendFunc(nil), nil, actor.Deps{})
	for _, want := range []string{"LedgerTable", "named twice", "Ledger"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want a problem naming %s", err, want)
		}
	}
}

// The Timer reads an image's steps only at an order's end: a record whose
// steps do not read still has its Deadline sent, and an end whose steps do
// not read is skipped as unreadable (the keys it would expire are unknown),
// never given a TTL from a partial read.
func TestStepsAreReadOnlyAtAnOrdersEnd(t *testing.T) {
	t.Parallel()
	const a, b = "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
	claimed := phase(a, workflow.Processing, 1, 30*time.Second)
	running := phase(b, workflow.Processing, 1, 30*time.Second)
	running.Steps[0].Attempts = 1
	ended := *running
	ended.ProcessState, ended.InFlight, ended.ExpiresAt = workflow.Processed, false, now.Add(time.Hour)
	var sent, expired int
	h, err := timer.New(timer.Config{DeadlineQueueURL: queueURL, LedgerTable: "sas-ledger", CodeSteps: []string{"reserve-inventory"}},
		sendFunc(func(_ context.Context, _ string, msgs []queue.Outgoing) error { sent += len(msgs); return nil }),
		expireFunc(func(context.Context, string, time.Time) error { expired++; return nil }), actor.Deps{Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	oddSteps := func(r events.DynamoDBEventRecord) events.DynamoDBEventRecord {
		r.Change.NewImage["Steps"] = events.NewStringAttribute("not a list")
		return r
	}
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		oddSteps(rec(t, "100", nil, claimed)), oddSteps(rec(t, "200", running, &ended)),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 || sent != 1 || expired != 0 {
		t.Fatalf("Handle = %+v, %v; %d deadlines sent, %d entries expired; want the claim's deadline and no TTL", resp, err, sent, expired)
	}
}
