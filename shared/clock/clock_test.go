package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	f.Advance(time.Minute)
	if got := f.Now(); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Now = %v", got)
	}
	f.Set(t0)
	if got := f.Now(); !got.Equal(t0) {
		t.Fatalf("Now after Set = %v", got)
	}
}

func TestOffsetJumpsAhead(t *testing.T) {
	t.Parallel()
	var o Offset
	before := time.Now()
	o.Advance(time.Hour)
	if got := o.Now(); got.Sub(before) < time.Hour {
		t.Fatalf("Now = %v, want at least an hour after %v", got, before)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
}
