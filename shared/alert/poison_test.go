package alert_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/alert"
)

type publishFunc func(context.Context, alert.Alert) error

func (f publishFunc) Publish(ctx context.Context, a alert.Alert) error { return f(ctx, a) }

func TestPoisonOnLastReceive(t *testing.T) {
	t.Parallel()
	rec := func(receives, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: "m-1", Body: body, EventSourceARN: "arn:aws:sqs:eu-west-1:1:q",
			Attributes: map[string]string{"ApproximateReceiveCount": receives}}
	}
	const order = `{"orderId":"0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11"}`
	tests := []struct {
		name       string
		rec        events.SQSMessage
		max        int
		publishErr error
		want       bool
		wantOrder  string
	}{
		{"before the last receive", rec("4", "x"), 5, nil, false, ""},
		{"last receive", rec("5", "x"), 5, nil, true, ""},
		{"past the last receive (SQS counts approximately)", rec("6", "x"), 5, nil, true, ""},
		{"names the order when the body does", rec("5", order), 5, nil, true, "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11"},
		{"ignores a malformed order ID", rec("5", `{"orderId":"../etc"}`), 5, nil, true, ""},
		{"no receive count", rec("", "x"), 5, nil, false, ""},
		{"no redrive setting", rec("9", "x"), 0, nil, false, ""},
		{"publish fails", rec("5", "x"), 5, errors.New("sns down"), false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []alert.Alert
			pub := publishFunc(func(_ context.Context, a alert.Alert) error { got = append(got, a); return tc.publishErr })
			now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			ok := alert.PoisonOnLastReceive(context.Background(), pub, tc.rec, errors.New("poison: unknown version 99"), tc.max, now, slog.New(slog.DiscardHandler))
			if ok != tc.want {
				t.Fatalf("published = %v, want %v (calls %d)", ok, tc.want, len(got))
			}
			if !tc.want {
				return
			}
			a := got[0]
			if a.Kind != alert.KindPoisonMessage || a.ID() != "poison/m-1" || a.OrderID != tc.wantOrder || !a.At.Equal(now) ||
				!strings.Contains(a.LastError, "unknown version 99") || !strings.Contains(a.LastError, "dead-letter queue") {
				t.Fatalf("alert %+v", a)
			}
		})
	}
}
