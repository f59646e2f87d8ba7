package admission_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/workflow"
)

var queues = []string{"https://sqs.example/q/reserve", "https://sqs.example/q/charge"}

func TestDecide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		depths    []int
		wantAdmit bool
		wantRetry time.Duration
		wantQueue string
	}{
		{name: "unknown depths admit", depths: nil, wantAdmit: true},
		{name: "empty queues", depths: []int{0, 0}, wantAdmit: true, wantQueue: queues[0]},
		{name: "at the backlog", depths: []int{100, 3}, wantAdmit: true, wantQueue: queues[0]},
		{name: "one over", depths: []int{3, 101}, wantRetry: time.Second, wantQueue: queues[1]},
		{name: "drains in 3 s at 50 a second", depths: []int{250, 101}, wantRetry: 3 * time.Second, wantQueue: queues[0]},
		{name: "capped", depths: []int{100 + 50*600, 0}, wantRetry: admission.MaxRetryAfter, wantQueue: queues[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := admission.Decide(queues, tt.depths, admission.Limits{Backlog: 100, Reserve: 20}, 50, workflow.PriorityHigh)
			if d.Admit != tt.wantAdmit || d.RetryAfter != tt.wantRetry || d.Queue != tt.wantQueue {
				t.Fatalf("Decide(%v) = %+v, want admit %v retry %v queue %q", tt.depths, d, tt.wantAdmit, tt.wantRetry, tt.wantQueue)
			}
		})
	}
}

// The classes' limits in a backlog of 100 with a reserve of 20, at 50 a
// second. While the system keeps up, normal orders have three quarters of
// the backlog and low ones half; reserved (overloaded, with high orders arriving),
// normal orders are shed past 20 and low ones past 10, and high ones only
// ever past 100. Retry-After counts the drain to the class's own limit.
func TestDecideShedsLowerClassesFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		depth     int
		class     workflow.Priority
		reserved  bool
		wantAdmit bool
		wantRetry time.Duration
	}{
		{depth: 50, class: workflow.PriorityLow, wantAdmit: true},
		{depth: 51, class: workflow.PriorityLow, wantRetry: time.Second},
		{depth: 75, class: workflow.PriorityNormal, wantAdmit: true},
		{depth: 76, class: workflow.PriorityNormal, wantRetry: time.Second},
		{depth: 100, class: workflow.PriorityHigh, wantAdmit: true},
		{depth: 10, class: workflow.PriorityLow, reserved: true, wantAdmit: true},
		{depth: 11, class: workflow.PriorityLow, reserved: true, wantRetry: time.Second},
		{depth: 20, class: workflow.PriorityNormal, reserved: true, wantAdmit: true},
		{depth: 21, class: workflow.PriorityNormal, reserved: true, wantRetry: time.Second},
		{depth: 170, class: workflow.PriorityNormal, reserved: true, wantRetry: 3 * time.Second},
		{depth: 100, class: workflow.PriorityHigh, reserved: true, wantAdmit: true},
		{depth: 101, class: workflow.PriorityHigh, reserved: true, wantRetry: time.Second},
		// A record without a class is normal.
		{depth: 21, class: "", reserved: true, wantRetry: time.Second},
		{depth: 75, class: "", wantAdmit: true},
		{depth: 76, class: "", wantRetry: time.Second},
	}
	for _, tt := range tests {
		d := admission.Decide(queues, []int{tt.depth, 0}, admission.Limits{Backlog: 100, Reserve: 20, Reserved: tt.reserved}, 50, tt.class)
		if d.Admit != tt.wantAdmit || d.RetryAfter != tt.wantRetry {
			t.Errorf("Decide(depth %d, %q, reserved %v) = %+v, want admit %v retry %v", tt.depth, tt.class, tt.reserved, d, tt.wantAdmit, tt.wantRetry)
		}
	}
	// Limits too small to split still admit one message of each class.
	tiny := admission.Limits{Backlog: 1, Reserve: 1, Reserved: true}
	for _, c := range workflow.Priorities {
		if got := tiny.Limit(c); got != 1 {
			t.Errorf("Limit(%s) of a backlog of 1 = %d, want 1", c, got)
		}
	}
}

// classGate is a Gate over queues (the first at depth, the second empty)
// with a backlog of 10 at 5 a second, the reserve and refresh given, on a
// fake clock; its admit checks one decision.
func classGate(t *testing.T, depth, reserve int, refresh time.Duration) (q *fakeQueues, clk *clock.Fake, admit func(workflow.Priority, bool, string)) {
	t.Helper()
	clk = clock.NewFake(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	q = &fakeQueues{depth: map[string]int{queues[0]: depth, queues[1]: 0}}
	g, err := admission.New(admission.Config{Queues: queues, Backlog: 10, Rate: 5, Refresh: refresh, Reserve: reserve}, q, actor.Deps{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	admit = func(class workflow.Priority, want bool, why string) {
		t.Helper()
		if d := g.Admit(context.Background(), class); d.Admit != want {
			t.Fatalf("%s: %s order %+v, want admitted %v", why, class, d, want)
		}
	}
	return q, clk, admit
}

// A Gate keeps the room above Reserve for high orders only while it sees
// both high orders and an overload (an order shed), and for HighReserve
// after the later of the two; a system that keeps up sheds nothing below
// the class limits, whatever classes come.
func TestGateReservesRoomWhileHighOrdersArriveInAnOverload(t *testing.T) {
	t.Parallel()
	// Backlog 10, reserve 4: normal orders are shed past 7, reserved past
	// 4; low ones past 5, reserved past 2. A reading is trusted for 3 s.
	q, clk, admit := classGate(t, 3, 4, 3*time.Second)
	admit(workflow.PriorityHigh, true, "depth 3 of 10, within the reserve")
	admit(workflow.PriorityLow, true, "depth 4")
	admit(workflow.PriorityLow, true, "depth 5, low's half of 10")
	admit(workflow.PriorityLow, false, "depth 6, past low's half")
	admit(workflow.PriorityNormal, true, "depth 6, a high order, but only a low one shed: no overload")
	admit(workflow.PriorityNormal, true, "depth 7")
	admit(workflow.PriorityNormal, false, "depth 8, past normal's three quarters: an overload")
	admit(workflow.PriorityHigh, true, "depth 8, within the backlog for high")
	q.set(queues[0], 6, nil)
	clk.Advance(3 * time.Second) // a fresh reading: 6
	admit(workflow.PriorityNormal, false, "depth 6, a high order in an overload: past the reserve of 4")
	q.set(queues[0], 3, nil)
	clk.Advance(3 * time.Second) // a fresh reading: 3
	admit(workflow.PriorityLow, false, "depth 3, reserved: past half the reserve")
	admit(workflow.PriorityNormal, true, "depth 3, within the reserve")
	admit(workflow.PriorityNormal, true, "depth 4, at the reserve")
	admit(workflow.PriorityNormal, false, "depth 5, past it: the overload goes on")
	clk.Advance(admission.HighReserve - 6*time.Second) // HighReserve after the last high order, a fresh reading: 3
	admit(workflow.PriorityLow, true, "no high order for HighReserve: depth 3, within low's half of 10")
	admit(workflow.PriorityNormal, true, "depth 4, within three quarters")
}

// A high order that finds more than the reserve ahead of it starts the
// reserve at once: the queue need not fill to the normal orders' limit
// first, with high orders waiting behind all of it.
func TestAHighOrderBehindMoreThanTheReserveStartsIt(t *testing.T) {
	t.Parallel()
	_, _, admit := classGate(t, 5, 4, time.Second)
	admit(workflow.PriorityNormal, true, "depth 5 of 10, within normal's three quarters")
	admit(workflow.PriorityHigh, true, "depth 6, more than the reserve of 4 ahead")
	admit(workflow.PriorityNormal, false, "depth 7, reserved")
	admit(workflow.PriorityHigh, true, "depth 7")
}

// Without an overload, high orders take no room from the others: a
// system that keeps up sheds no class below its own limit.
func TestGateReservesNothingWhileTheSystemKeepsUp(t *testing.T) {
	t.Parallel()
	_, _, admit := classGate(t, 3, 8, 10*time.Second)
	for i, c := range []workflow.Priority{workflow.PriorityHigh, workflow.PriorityLow, workflow.PriorityNormal, workflow.PriorityHigh, workflow.PriorityNormal} {
		admit(c, true, fmt.Sprintf("order %d at depth %d of 10, nothing shed before", i, 3+i))
	}
}

// Between readings the Gate counts what the Agents took, at Rate: a
// reading of a full queue holds nothing back once the Agents have drained
// it, and never drains the estimate below empty.
func TestGateCountsTheDrainSinceItsReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	q := &fakeQueues{depth: map[string]int{queues[0]: 10, queues[1]: 0}}
	g, err := admission.New(admission.Config{Queues: queues, Backlog: 10, Rate: 10, Refresh: time.Second, Reserve: 5}, q, actor.Deps{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Admit(ctx, workflow.PriorityNormal); d.Admit {
		t.Fatalf("normal order at depth 10 of 10: %+v, want shed", d)
	}
	clk.Advance(500 * time.Millisecond) // 5 drained: 5 left
	if d := g.Admit(ctx, workflow.PriorityNormal); !d.Admit || d.Depth != 5 {
		t.Fatalf("normal order half a second later: %+v, want admitted at depth 5", d)
	}
	clk.Advance(400 * time.Millisecond) // 4 more drained, 1 admitted: 2
	if d := g.Admit(ctx, workflow.PriorityLow); !d.Admit || d.Depth != 2 {
		t.Fatalf("low order 0.9 s after the reading: %+v, want admitted at depth 2", d)
	}
	if q.reads != len(queues) {
		t.Fatalf("%d reads of %d queues within one Refresh, want one each", q.reads, len(queues))
	}
}

// depthsFunc is a function-type fake of the Depths port.
type depthsFunc func(ctx context.Context, url string) (int, error)

func (f depthsFunc) Depth(ctx context.Context, url string) (int, error) { return f(ctx, url) }

// fakeQueues answers depths from a map and counts the reads.
type fakeQueues struct {
	mu    sync.Mutex
	depth map[string]int
	err   error
	reads int
}

func (q *fakeQueues) Depth(_ context.Context, url string) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reads++
	return q.depth[url], q.err
}

func (q *fakeQueues) set(url string, n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.depth[url], q.err = n, err
}

func newGate(t *testing.T, q admission.Depths, clk clock.Clock, log *slog.Logger) *admission.Gate {
	t.Helper()
	g, err := admission.New(admission.Config{Queues: queues, Backlog: 10, Rate: 5, Refresh: time.Second}, q, actor.Deps{Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGateCountsItsOwnAdmissionsBetweenReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	q := &fakeQueues{depth: map[string]int{queues[0]: 4, queues[1]: 7}}
	g := newGate(t, q, clk, nil)

	// The fuller queue holds 7 of 10: orders are admitted while it holds
	// at most 10 counting them (7, 8, 9, 10), the fifth is shed.
	for i := range 5 {
		d := g.Admit(ctx, workflow.PriorityHigh)
		if want := i < 4; d.Admit != want {
			t.Fatalf("order %d: %+v, want admit %v", i, d, want)
		}
	}
	if q.reads != len(queues) {
		t.Fatalf("%d depth reads within the refresh, want one per queue (%d)", q.reads, len(queues))
	}
	// Drained meanwhile: the next reading after Refresh admits again.
	q.set(queues[1], 0, nil)
	clk.Advance(time.Second)
	if d := g.Admit(ctx, workflow.PriorityHigh); !d.Admit || d.Queue != queues[0] || d.Depth != 4 {
		t.Fatalf("after a fresh read: %+v, want admitted with reserve the fullest at 4", d)
	}
	if q.reads != 2*len(queues) {
		t.Fatalf("%d depth reads, want a second reading", q.reads)
	}
}

func TestGateShedsWithRetryAfter(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	q := &fakeQueues{depth: map[string]int{queues[0]: 31}}
	d := newGate(t, q, clk, nil).Admit(context.Background(), workflow.PriorityHigh)
	// 21 over the backlog at 5 a second: 5 s.
	if d.Admit || d.RetryAfter != 5*time.Second || d.Queue != queues[0] || d.Depth != 31 {
		t.Fatalf("%+v, want shed for 5s on reserve", d)
	}
}

func TestGateFailsOpenAndRetriesTheRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	var logs logtest.Buffer
	q := &fakeQueues{depth: map[string]int{queues[0]: 1000}}
	q.set(queues[0], 1000, errors.New("throttled"))
	g := newGate(t, q, clk, slog.New(slog.NewJSONHandler(&logs, nil)))

	for range 3 {
		if d := g.Admit(ctx, workflow.PriorityHigh); !d.Admit || d.Depth != -1 {
			t.Fatalf("unreadable depths: %+v, want admitted, depth unknown", d)
		}
	}
	if !strings.Contains(logs.String(), "throttled") || strings.Count(logs.String(), "\n") != 1 {
		t.Fatalf("want one warning naming the error until the next read, logs:\n%s", logs.String())
	}
	// The read is tried again after Refresh, and its answer applies.
	q.set(queues[0], 1000, nil)
	clk.Advance(time.Second)
	if d := g.Admit(ctx, workflow.PriorityHigh); d.Admit {
		t.Fatalf("readable again: %+v, want shed", d)
	}
}

func TestGateWithoutQueuesAdmitsWithoutReading(t *testing.T) {
	t.Parallel()
	g, err := admission.New(admission.Config{}, depthsFunc(func(context.Context, string) (int, error) {
		t.Error("a depth was read")
		return 0, nil
	}), actor.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Admit(context.Background(), workflow.PriorityHigh); !d.Admit {
		t.Fatalf("%+v, want admitted", d)
	}
}

func TestReadAndCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    admission.Config
		wantErr []string
	}{
		{name: "off", env: map[string]string{}, want: admission.Config{Refresh: admission.DefaultRefresh}},
		{name: "two queues", env: map[string]string{
			"ADMISSION_QUEUES": " https://sqs.example/q/a ,https://sqs.example/q/b", "ADMISSION_BACKLOG": "500", "ADMISSION_RATE": "500",
		}, want: admission.Config{Queues: []string{"https://sqs.example/q/a", "https://sqs.example/q/b"}, Backlog: 500, Rate: 500, Refresh: admission.DefaultRefresh}},
		{name: "queues without the model", env: map[string]string{"ADMISSION_QUEUES": "https://sqs.example/q/a", "ADMISSION_REFRESH": "1m"},
			wantErr: []string{"ADMISSION_BACKLOG", "ADMISSION_RATE", "ADMISSION_REFRESH"}},
		{name: "not a URL", env: map[string]string{"ADMISSION_QUEUES": "reserve", "ADMISSION_BACKLOG": "5", "ADMISSION_RATE": "5"},
			wantErr: []string{"ADMISSION_QUEUES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load("admission", func(k string) string { return tt.env[k] }, admission.Variables, admission.Read)
			if len(tt.wantErr) > 0 {
				for _, w := range tt.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to name %s", err, w)
					}
				}
				return
			}
			if err != nil || strings.Join(got.Queues, " ") != strings.Join(tt.want.Queues, " ") ||
				got.Backlog != tt.want.Backlog || got.Rate != tt.want.Rate || got.Refresh != tt.want.Refresh {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
