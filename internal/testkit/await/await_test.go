package await

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/tbrecord"
)

func TestUntil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ctx       func() context.Context
		within    time.Duration
		holdsAt   int // the call on which check holds; 0 never
		fatalAt   int // the call on which check fails the test itself; 0 never
		wantCalls int // -1: at least two
		want      []string
	}{
		{name: "holds at once", within: time.Minute, holdsAt: 1, wantCalls: 1},
		{name: "holds on the third check", within: time.Minute, holdsAt: 3, wantCalls: 3},
		{name: "never holds", within: 30 * time.Millisecond, wantCalls: -1,
			want: []string{"await the thing: did not happen within 30ms (", " checks); last seen: saw "}},
		{name: "the test ends first", within: time.Hour, wantCalls: 1,
			ctx:  func() context.Context { ctx, cancel := context.WithCancel(context.Background()); cancel(); return ctx },
			want: []string{"await the thing: did not happen before the test ended (1 checks); last seen: saw 1"}},
		{name: "check stops the test", within: time.Minute, fatalAt: 2, wantCalls: 2, want: []string{"broken at 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			calls := 0
			msgs := tbrecord.RunContext(ctx, func(tb testing.TB) {
				Until(tb, tc.within, "the thing", func() (bool, error) {
					calls++
					if calls == tc.fatalAt {
						tb.Fatalf("broken at %d", calls)
					}
					return calls == tc.holdsAt, fmt.Errorf("saw %d", calls)
				})
			})
			if tc.wantCalls == -1 && calls < 2 || tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("check called %d times, want %d", calls, tc.wantCalls)
			}
			if len(msgs) != min(len(tc.want), 1) {
				t.Fatalf("failures %q, want one like %q", msgs, tc.want)
			}
			for _, part := range tc.want {
				if !strings.Contains(msgs[0], part) {
					t.Errorf("failure %q lacks %q", msgs[0], part)
				}
			}
			if tc.wantCalls == -1 && !strings.HasSuffix(msgs[0], fmt.Sprintf("saw %d", calls)) {
				t.Errorf("failure %q does not quote the last check (%d)", msgs[0], calls)
			}
		})
	}
}

func TestUntilWithoutAnError(t *testing.T) {
	t.Parallel()
	msgs := tbrecord.Run(func(tb testing.TB) {
		Until(tb, 0, "the thing", func() (bool, error) { return false, nil })
	})
	if want := "await the thing: did not happen within 0s (1 checks); last seen: not yet"; len(msgs) != 1 || msgs[0] != want {
		t.Fatalf("failures %q, want %q", msgs, want)
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	type state struct{ N int }
	tests := []struct {
		name   string
		values []int // what get returns, call by call; -1 is an error; then the last again
		want   int
		fail   string
	}{
		{name: "the first value that fits", values: []int{1, 2, 3, 4}, want: 3},
		{name: "errors are not yet", values: []int{-1, -1, 5}, want: 5},
		{name: "quotes the last value", values: []int{1, 2}, fail: "await N at least 3: did not happen within 20ms"},
		{name: "quotes the last error", values: []int{1, -1}, fail: "last seen: engine down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got state
			calls := 0
			msgs := tbrecord.Run(func(tb testing.TB) {
				got = Value(tb, 20*time.Millisecond, "N at least 3", func() (state, error) {
					v := tc.values[min(calls, len(tc.values)-1)]
					calls++
					if v == -1 {
						return state{}, errors.New("engine down")
					}
					return state{N: v}, nil
				}, func(s state) bool { return s.N >= 3 })
			})
			if tc.fail != "" {
				if len(msgs) != 1 || !strings.Contains(msgs[0], tc.fail) {
					t.Fatalf("failures %q, want one with %q", msgs, tc.fail)
				}
				if tc.values[len(tc.values)-1] != -1 && !strings.HasSuffix(msgs[0], "last seen: {N:2}") {
					t.Errorf("failure %q does not quote the last value", msgs[0])
				}
				return
			}
			if len(msgs) != 0 || got.N != tc.want {
				t.Fatalf("Value = %+v, failures %q; want N %d", got, msgs, tc.want)
			}
		})
	}
}

func TestPausesDoubleUpToTheCeiling(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for p := firstPause; len(got) < 8; p = next(p) {
		got = append(got, p)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 200, 200}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
}

// TestTestDeadlineIsTheBinarys: Until ends short of -timeout, which only
// *testing.T knows.
func TestTestDeadlineIsTheBinarys(t *testing.T) {
	t.Parallel()
	d, ok := testDeadline(t)
	if want, has := t.Deadline(); has != ok || !d.Equal(want) {
		t.Fatalf("testDeadline = %v, %v; the test's is %v, %v", d, ok, want, has)
	}
	if _, ok := testDeadline(struct{ testing.TB }{}); ok {
		t.Fatal("a TB without Deadline has one")
	}
}
