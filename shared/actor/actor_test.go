package actor_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 11, 22, 9, 41, 0, 0, time.UTC))
	own := slog.New(slog.NewJSONHandler(io.Discard, nil))
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
			got.Log.With("orderId", "o-1").Error("ignored")
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
