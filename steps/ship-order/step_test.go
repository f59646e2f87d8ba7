package shiporder_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
	shiporder "github.com/sasflow/sas/steps/ship-order"
)

// bucketFuncs is a Bucket of two functions; a nil one fails the test if
// called.
type bucketFuncs struct {
	t   *testing.T
	put func(ctx context.Context, key string, body []byte) error
	del func(ctx context.Context, key string) error
}

func (b bucketFuncs) PutObject(ctx context.Context, key string, body []byte) error {
	if b.put == nil {
		b.t.Fatalf("unexpected PutObject %s", key)
	}
	return b.put(ctx, key, body)
}

func (b bucketFuncs) DeleteObject(ctx context.Context, key string) error {
	if b.del == nil {
		b.t.Fatalf("unexpected DeleteObject %s", key)
	}
	return b.del(ctx, key)
}

// objects records what a bucketFuncs was given.
type objects map[string][]byte

func (o objects) bucket(t *testing.T) bucketFuncs {
	return bucketFuncs{t: t,
		put: func(_ context.Context, key string, body []byte) error { o[key] = body; return nil },
		del: func(_ context.Context, key string) error { delete(o, key); return nil },
	}
}

const orderID = "0d9c3f5e-7b1a-4c2d-9e8f-6a5b4c3d2e1f"

func request() step.Request {
	return step.Request{
		OrderID: orderID, Step: shiporder.Name, StepIndex: 2, Attempt: 1, Action: message.Perform,
		IdempotencyKey: orderID + ":2:perform",
		Input: json.RawMessage(`{"orderId":"` + orderID + `","customerId":"customer-42","currency":"EUR",` +
			`"items":[{"sku":"BOOK-0451","quantity":2,"unitPriceCents":1999}],"totalCents":3998}`),
		Previous: map[string]json.RawMessage{
			"reserve-inventory": json.RawMessage(`{"reservationId":"r-1"}`),
			"charge-payment":    json.RawMessage(`{"chargeId":"ch-3f9a2c71","amountCents":3998,"currency":"EUR"}`),
		},
	}
}

func TestDoWritesTheShipment(t *testing.T) {
	t.Parallel()
	got := objects{}
	s := shiporder.NewStep(got.bucket(t))
	out, err := s.Do(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	key := "shipments/" + orderID + ".json"
	tracking := shiporder.TrackingNumber(request().IdempotencyKey)
	want := `{"orderId":"` + orderID + `","items":[{"sku":"BOOK-0451","quantity":2,"unitPriceCents":1999}],` +
		`"payment":{"chargeId":"ch-3f9a2c71","amountCents":3998,"currency":"EUR"},"trackingNumber":"` + tracking + `"}`
	if len(got) != 1 || string(got[key]) != want {
		t.Fatalf("objects %q, want only %s = %s", got, key, want)
	}
	if w := `{"shipmentKey":"` + key + `","trackingNumber":"` + tracking + `"}`; string(out) != w {
		t.Errorf("output %s, want %s", out, w)
	}
	if !strings.HasPrefix(tracking, "TRK-") || len(tracking) != len("TRK-")+12 {
		t.Errorf("tracking number %q", tracking)
	}
}

// Every try of the step writes the same bytes under the same name: a try
// that runs again after a crash between the put and the ledger write
// leaves the shipment as it was.
func TestDoTwiceWritesTheSameBytes(t *testing.T) {
	t.Parallel()
	var puts [][]byte
	s := shiporder.NewStep(bucketFuncs{t: t, put: func(_ context.Context, _ string, body []byte) error {
		puts = append(puts, body)
		return nil
	}})
	req := request()
	for attempt := 1; attempt <= 2; attempt++ {
		req.Attempt = attempt
		if _, err := s.Do(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if len(puts) != 2 || string(puts[0]) != string(puts[1]) {
		t.Fatalf("puts %q, want two equal ones", puts)
	}
	// Another key, another tracking number.
	if shiporder.TrackingNumber("a") == shiporder.TrackingNumber("b") {
		t.Error("two keys gave one tracking number")
	}
}

// A workflow without the payment step ships without a payment.
func TestDoWithoutPayment(t *testing.T) {
	t.Parallel()
	got := objects{}
	req := request()
	delete(req.Previous, shiporder.PaymentStep)
	if _, err := shiporder.NewStep(got.bucket(t)).Do(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if body := string(got[shiporder.Key(orderID)]); strings.Contains(body, "payment") {
		t.Errorf("shipment %s has a payment", body)
	}
}

// An input the step cannot ship is refused for good, and nothing is
// written.
func TestDoRefusesABadInput(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		input string
		code  string
	}{
		"unknown member": {`{"orderId":"` + orderID + `","items":[{"sku":"A","quantity":1,"unitPriceCents":1}],"gift":true}`, ""},
		"not an object":  {`[1]`, ""},
		"another order":  {`{"orderId":"other","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, "invalid_input"},
		"no items":       {`{"orderId":"` + orderID + `","items":[]}`, "invalid_input"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := request()
			req.Input = json.RawMessage(tc.input)
			_, err := shiporder.NewStep(bucketFuncs{t: t}).Do(context.Background(), req)
			if !step.IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent one", err)
			}
			var fault *step.FaultError
			if tc.code != "" && (!errors.As(err, &fault) || fault.Code != tc.code) {
				t.Errorf("err = %v, want fault %s", err, tc.code)
			}
		})
	}
}

// S3's failures are transient: the step is tried again while its budget
// lasts.
func TestS3FailuresAreTransient(t *testing.T) {
	t.Parallel()
	boom := errors.New("slow down")
	s := shiporder.NewStep(bucketFuncs{t: t,
		put: func(context.Context, string, []byte) error { return boom },
		del: func(context.Context, string) error { return boom },
	})
	_, err := s.Do(context.Background(), request())
	if !errors.Is(err, boom) || step.IsPermanent(err) {
		t.Errorf("Do: err = %v, want the transient %v", err, boom)
	}
	_, err = s.Undo(context.Background(), request())
	if !errors.Is(err, boom) || step.IsPermanent(err) {
		t.Errorf("Undo: err = %v, want the transient %v", err, boom)
	}
}

func TestUndoDeletesTheShipment(t *testing.T) {
	t.Parallel()
	got := objects{}
	s := shiporder.NewStep(got.bucket(t))
	if _, err := s.Do(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	undo := request()
	undo.Action, undo.IdempotencyKey, undo.EffectKey = message.Compensate, orderID+":2:compensate", request().IdempotencyKey
	out, err := s.Undo(context.Background(), undo)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("objects left %q", got)
	}
	if w := `{"deleted":"shipments/` + orderID + `.json"}`; string(out) != w {
		t.Errorf("output %s, want %s", out, w)
	}
}

func TestNewNeedsTheBucket(t *testing.T) {
	t.Parallel()
	_, err := shiporder.New(context.Background(), step.Env{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), shiporder.EnvBucket) {
		t.Fatalf("err = %v, want one naming %s", err, shiporder.EnvBucket)
	}
}
