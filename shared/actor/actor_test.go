package actor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 11, 22, 9, 41, 0, 0, time.UTC))
	own := slog.New(slog.DiscardHandler)
	tests := []struct {
		name      string
		deps      actor.Deps
		wantClock clock.Clock // nil: the system clock
		wantLog   *slog.Logger
	}{
		{name: "zero value", deps: actor.Deps{}},
		{name: "clock kept", deps: actor.Deps{Clock: fake}, wantClock: fake},
		{name: "logger kept", deps: actor.Deps{Log: own}, wantLog: own},
		{name: "both kept", deps: actor.Deps{Clock: fake, Log: own}, wantClock: fake, wantLog: own},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.deps.WithDefaults()
			if tt.wantClock == nil {
				if _, ok := got.Clock.(clock.System); !ok {
					t.Errorf("Clock = %T, want clock.System", got.Clock)
				}
			} else if got.Clock != tt.wantClock {
				t.Errorf("Clock = %T, want the one given", got.Clock)
			}
			switch {
			case got.Log == nil:
				t.Fatal("Log is nil")
			case tt.wantLog != nil && got.Log != tt.wantLog:
				t.Errorf("Log replaced, want the one given")
			case tt.wantLog == nil && got.Log.Enabled(context.Background(), slog.LevelError):
				// A logger that is enabled at no level writes nothing.
				t.Errorf("the default logger is enabled, want one that discards")
			}
			// The default logger must be safe to use.
			got.Log.With(slog.String("orderId", "o-1")).Error("ignored")
		})
	}
}

// WithDefaults returns a copy: the caller's Deps stay as they were.
func TestWithDefaultsLeavesTheOriginal(t *testing.T) {
	t.Parallel()
	d := actor.Deps{}
	_ = d.WithDefaults()
	if d.Clock != nil || d.Log != nil {
		t.Errorf("WithDefaults changed its receiver: %+v", d)
	}
}

func TestInvocationLog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want any // the requestId attribute; nil when absent
	}{
		{"in Lambda", lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"}), "req-1"},
		{"outside Lambda", context.Background(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf logtest.Buffer
			actor.InvocationLog(tc.ctx, slog.New(slog.NewJSONHandler(&buf, nil))).Info("line")
			recs := buf.Records(t)
			if len(recs) != 1 || recs[0]["requestId"] != tc.want {
				t.Errorf("records = %v, want requestId %v", recs, tc.want)
			}
			if want, _ := tc.want.(string); actor.RequestID(tc.ctx) != want {
				t.Errorf("RequestID = %q, want %q", actor.RequestID(tc.ctx), want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	var nilPort fmt.Stringer
	err := actor.Check("scheduler", errors.New("scheduler config: Step is required"),
		actor.Port{Name: "Store", Value: nilPort}, actor.Port{Name: "Sender", Value: "a sender"})
	configtest.Problems(t, "Check", err, "scheduler config: Step is required", "scheduler: New needs a Store")
	if err := actor.Check("scheduler", nil, actor.Port{Name: "Store", Value: "a store"}); err != nil {
		t.Errorf("Check of a valid config and ports = %v", err)
	}
}
