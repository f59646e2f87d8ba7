// Package await polls a condition that only something outside the test can
// answer (an engine's queue or table, a remote simulator, captured logs)
// until it holds, and fails the test with what it last saw when it does not
// within the time given. Everything a test can signal (a channel, a
// WaitGroup, the fake clock) is waited on directly, not through this.
package await

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The pause between checks starts short, so a condition that holds at
// once costs little, and doubles up to a ceiling, so a slow one does not
// flood the engine with requests.
const (
	firstPause = 5 * time.Millisecond
	maxPause   = 200 * time.Millisecond
)

// testEnd is the room left before the test binary's -timeout, so that a
// wait running into it fails with its own message rather than the
// binary's panic.
const testEnd = 2 * time.Second

// Until calls check until it reports done, pausing between calls, and
// fails tb if within passes (or the test ends) first. what names the
// condition, as in "the order processed"; while the condition does not
// hold, check's error says what it saw instead, and the failure quotes the
// last one. check runs on the caller's goroutine, so it may call tb.Fatal
// for what must stop the test at once.
func Until(tb testing.TB, within time.Duration, what string, check func() (done bool, err error)) {
	tb.Helper()
	ctx := tb.Context()
	deadline := time.Now().Add(within)
	if d, ok := testDeadline(tb); ok && d.Add(-testEnd).Before(deadline) {
		deadline = d.Add(-testEnd)
	}
	pause := firstPause
	for checks := 1; ; checks++ {
		done, err := check()
		if done {
			return
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			stop := fmt.Sprintf("within %v", within)
			if ctx.Err() != nil {
				stop = "before the test ended"
			}
			if err == nil {
				err = fmt.Errorf("not yet")
			}
			tb.Fatalf("await %s: did not happen %s (%d checks); last seen: %v", what, stop, checks, err)
			return
		}
		sleep(ctx, min(pause, time.Until(deadline)))
		pause = next(pause)
	}
}

// Value calls get until ok holds of what it returns, and returns that
// value; it fails tb as Until does, quoting the last value (or get's last
// error). A get that errs has not produced the value yet.
func Value[T any](tb testing.TB, within time.Duration, what string, get func() (T, error), ok func(T) bool) T {
	tb.Helper()
	var v T
	Until(tb, within, what, func() (bool, error) {
		got, err := get()
		if err != nil {
			return false, err
		}
		v = got
		if ok(got) {
			return true, nil
		}
		return false, fmt.Errorf("%+v", got)
	})
	return v
}

// next is the pause after pause.
func next(pause time.Duration) time.Duration { return min(2*pause, maxPause) }

// testDeadline is the -timeout of the test binary, which only *testing.T
// knows.
func testDeadline(tb testing.TB) (time.Time, bool) {
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
