package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// fakeStore records the writes that reached it; the methods chaos does not
// wrap come from the nil embedded interface and must not be called.
type fakeStore struct {
	wiring.Store
	claims, advances, recovers, creates int
}

func (f *fakeStore) Claim(_ context.Context, c statestore.Claim) (workflow.State, error) {
	f.claims++
	return workflow.State{OrderID: c.OrderID, StepIndex: c.StepIndex, Attempt: f.claims}, nil
}

func (f *fakeStore) Advance(_ context.Context, a statestore.Advance) (workflow.State, error) {
	f.advances++
	return workflow.State{OrderID: a.OrderID, StepIndex: a.StepIndex + 1, Attempt: a.Attempt + 1}, nil
}

func (f *fakeStore) Recover(_ context.Context, seen workflow.State, _ workflow.Recovery, _ time.Time) (workflow.State, error) {
	f.recovers++
	return seen, nil
}

func (f *fakeStore) CreateOrder(context.Context, workflow.Order, workflow.State) error {
	f.creates++
	return nil
}

type fakeSender struct{ sent []string }

func (f *fakeSender) Send(_ context.Context, _, body string, _ time.Duration) error {
	f.sent = append(f.sent, body)
	return nil
}

// killed runs f and reports the point it was killed at, if any.
func killed(f func()) (p chaos.Point) {
	defer func() {
		if r := recover(); r != nil {
			p = r.(chaos.Killed).Point
		}
	}()
	f()
	return ""
}

func TestKillsHappenAfterTheWrite(t *testing.T) {
	t.Parallel()
	in, err := chaos.New(1, map[chaos.Point]float64{chaos.KillAfterClaim: 0.5, chaos.KillAfterRecover: 0.5, chaos.KillAfterAccept: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeStore{}
	s := in.Store("scheduler", fs)
	kills := 0
	for i := range 200 {
		p := killed(func() { _, _ = s.Claim(context.Background(), statestore.Claim{OrderID: "o", StepIndex: i % 2}) })
		if p == chaos.KillAfterClaim {
			kills++
		} else if p != "" {
			t.Fatalf("killed at %s", p)
		}
	}
	// Every claim reached the store, killed or not: the kill strikes
	// between this write and the next.
	if fs.claims != 200 || kills < 60 || kills > 140 || in.Counts()[chaos.KillAfterClaim] != kills {
		t.Fatalf("claims %d, kills %d, counted %v", fs.claims, kills, in.Counts())
	}
}

func TestSameSeedSameFaults(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) string {
		in, _ := chaos.New(seed, map[chaos.Point]float64{chaos.KillAfterCommit: 0.3, chaos.DuplicateSend: 0.3})
		s := in.Store("scheduler", &fakeStore{})
		snd := in.Sender("scheduler", &fakeSender{})
		var trace strings.Builder
		for i := range 100 {
			p := killed(func() {
				_, _ = s.Advance(context.Background(), statestore.Advance{OrderID: "o" + string(rune('a'+i%7)), StepIndex: i % 3, Attempt: i})
			})
			trace.WriteString(string(p) + ",")
			_ = snd.Send(context.Background(), "q", "m"+string(rune('a'+i%11)), 0)
		}
		return trace.String() + in.CountsString()
	}
	if a, b := run(7), run(7); a != b {
		t.Fatal("the same seed injected different faults")
	}
	if run(7) == run(8) {
		t.Fatal("different seeds injected the same faults")
	}
}

func TestSenderDuplicatesAndKillsAgentReplies(t *testing.T) {
	t.Parallel()
	in, _ := chaos.New(3, map[chaos.Point]float64{chaos.DuplicateSend: 0.5, chaos.KillBeforeReply: 0.5})
	fs := &fakeSender{}
	sched, agent := in.Sender("scheduler", fs), in.Sender("agent", fs)
	for i := range 50 {
		_ = sched.Send(context.Background(), "q", "s"+string(rune('a'+i)), 0)
	}
	if dup := len(fs.sent) - 50; dup < 10 || dup != in.Counts()[chaos.DuplicateSend] {
		t.Fatalf("%d duplicates, counted %v", dup, in.Counts())
	}
	before, kills := len(fs.sent), 0
	for i := range 50 {
		if killed(func() { _ = agent.Send(context.Background(), "r", "reply"+string(rune('a'+i)), 0) }) == chaos.KillBeforeReply {
			kills++
		}
	}
	if kills == 0 || kills == 50 || len(fs.sent)-before < 50-kills {
		t.Fatalf("kills %d, sent %d", kills, len(fs.sent)-before)
	}
}

func TestRatesAreBounded(t *testing.T) {
	t.Parallel()
	if _, err := chaos.New(1, map[chaos.Point]float64{chaos.DelaySend: 0.9}); err == nil {
		t.Fatal("a rate of 0.9 was accepted")
	}
}

func TestLedgerFindsACommitOfASupersededAttempt(t *testing.T) {
	t.Parallel()
	in, _ := chaos.New(1, nil)
	s := in.Store("scheduler", &fakeStore{})
	ctx := context.Background()
	_, _ = s.Claim(ctx, statestore.Claim{OrderID: "o1"}) // attempt 1
	_, _ = s.Claim(ctx, statestore.Claim{OrderID: "o1"}) // attempt 2 (after a retry)
	_, _ = s.Advance(ctx, statestore.Advance{OrderID: "o1", Attempt: 2})
	if got := in.Ledger().StaleCommits(); len(got) != 0 {
		t.Fatalf("current attempt flagged: %v", got)
	}
	_, _ = s.Advance(ctx, statestore.Advance{OrderID: "o1", Attempt: 1}) // a zombie got through
	if got := in.Ledger().StaleCommits(); len(got) != 1 || !strings.Contains(got[0], "attempt 1") {
		t.Fatalf("stale commits %v", got)
	}
}

// A throttled commit fails before it reaches the store, for the Scheduler
// only, and a later try of the same commit is decided anew.
func TestThrottledCommitsNeverReachTheStore(t *testing.T) {
	t.Parallel()
	in, err := chaos.New(3, map[chaos.Point]float64{chaos.ThrottleCommit: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeStore{}
	s := in.Store("scheduler", fs)
	throttled := 0
	for range 100 {
		_, err := s.Advance(context.Background(), statestore.Advance{OrderID: "o", StepIndex: 0, Attempt: 1})
		switch {
		case errors.Is(err, chaos.ErrThrottled):
			throttled++
		case err != nil:
			t.Fatal(err)
		}
	}
	if throttled < 25 || throttled > 75 || fs.advances != 100-throttled {
		t.Fatalf("%d of 100 tries of one commit throttled, %d reached the store", throttled, fs.advances)
	}
	if _, err := in.Store("supervisor", fs).Advance(context.Background(), statestore.Advance{OrderID: "p"}); err != nil {
		t.Fatalf("a role other than the Scheduler was throttled: %v", err)
	}
}

// A refused dispatch fails for one, two, or every send of the same step's
// request, never for another step's or for replies.
func TestRefusedDispatchesComeInBursts(t *testing.T) {
	t.Parallel()
	in, err := chaos.New(5, map[chaos.Point]float64{chaos.FailDispatch: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	s := in.Sender("scheduler", &fakeSender{})
	bursts := map[int]int{}
	for order := range 60 {
		req := fmt.Sprintf(`{"v":1,"kind":"agent.request","orderId":"o-%d","stepIndex":1}`, order)
		failed := 0
		for range 5 {
			if err := s.Send(context.Background(), "q", req, 0); errors.Is(err, chaos.ErrDispatchRefused) {
				failed++
			} else if err != nil {
				t.Fatal(err)
			} else if failed < 5 {
				break
			}
		}
		bursts[failed]++
	}
	if bursts[1] == 0 || bursts[2] == 0 || bursts[5] == 0 || bursts[0] == 0 {
		t.Fatalf("burst lengths %v, want some of 0, 1, 2 and every try", bursts)
	}
	reply := `{"v":1,"kind":"agent.reply","orderId":"o-1","stepIndex":1}`
	if err := in.Sender("agent", &fakeSender{}).Send(context.Background(), "q", reply, 0); err != nil {
		t.Fatalf("a reply was refused: %v", err)
	}
}

// The transport loses the answer of a struck state write after the engine
// has acted on it.
func TestTransportLosesAnswersOfStateWrites(t *testing.T) {
	t.Parallel()
	in, err := chaos.New(7, map[chaos.Point]float64{chaos.LoseAnswer: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))
	defer srv.Close()
	client := &http.Client{Transport: in.Transport(http.DefaultTransport)}
	lost := 0
	for i := range 40 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(fmt.Sprintf(`{"Key":{"OrderID":{"S":"o-%d"}}}`, i)))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.UpdateItem")
		resp, err := client.Do(req)
		if err != nil {
			if !strings.Contains(err.Error(), "connection reset") {
				t.Fatalf("lost answer reported as %v", err)
			}
			lost++
			continue
		}
		resp.Body.Close()
	}
	if served != 40 || lost < 8 || lost > 32 || in.Counts()[chaos.LoseAnswer] != lost {
		t.Fatalf("served %d, lost %d, counted %v", served, lost, in.Counts())
	}
}
