package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

// The store the wrappers are tried on is the in-memory state store, and
// the writes are the workflow Machine's changes, as the actors make them: a
// write the chaos store lets through is fenced and applied as on DynamoDB.

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func machine() workflow.Machine {
	return workflow.Machine{Def: workflow.Reference(), Policy: workflow.DefaultPolicy()}
}

// pending is the record of order id waiting for the claim of step k, its
// attempt-th claim so far.
func pending(id string, k, attempt int) workflow.State {
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), now.Add(-time.Hour), now.Add(time.Minute))
	st.StepIndex, st.Step, st.Attempt = k, st.Steps[k].Name, attempt
	return st
}

// processing is the record of order id whose step k an agent works on
// under attempt until deadline.
func processing(id string, k, attempt int, deadline time.Time) workflow.State {
	st := pending(id, k, attempt)
	st.ProcessState, st.LockedBy, st.CompleteBy = workflow.Processing, "scheduler-0", deadline
	st.Steps[k].State, st.Steps[k].Attempts = workflow.StepProcessing, 1
	return st
}

// commit is the Scheduler's commit of the successful reply of attempt of
// step k.
func commit(id string, k, attempt int) workflow.Change {
	return machine().StepCompleted(id, k, attempt, json.RawMessage(`{"ok":true}`), "scheduler-1", now)
}

type fakeSender struct{ sent []string }

func (f *fakeSender) Send(_ context.Context, _, body string, _ time.Duration) error {
	f.sent = append(f.sent, body)
	return nil
}

// injector returns an Injector striking each point at its rate.
func injector(t *testing.T, seed uint64, rates map[chaos.Point]float64) *chaos.Injector {
	t.Helper()
	in, err := chaos.New(seed, rates)
	if err != nil {
		t.Fatal(err)
	}
	return in
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

// Each kill point strikes its own kind of write, and only once the store
// has taken it: the kill falls between this write and the next.
func TestKillsHappenAfterTheWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		point chaos.Point
		role  string
		// before is the record the i-th write finds; change is that write.
		before func(i int) workflow.State
		change func(t *testing.T, seen workflow.State) workflow.Change
	}{
		{chaos.KillAfterClaim, "scheduler",
			func(i int) workflow.State { return pending("o", i%2, i) },
			func(_ *testing.T, seen workflow.State) workflow.Change {
				return machine().Claim(seen.OrderID, seen.StepIndex, false, "scheduler-1", now)
			}},
		{chaos.KillAfterCommit, "scheduler",
			func(i int) workflow.State { return processing("o", i%2, i, now.Add(time.Minute)) },
			func(_ *testing.T, seen workflow.State) workflow.Change {
				return commit(seen.OrderID, seen.StepIndex, seen.Attempt)
			}},
		{chaos.KillAfterRecover, "supervisor",
			func(i int) workflow.State { return processing("o", i%2, i, now.Add(-time.Second)) },
			func(t *testing.T, seen workflow.State) workflow.Change {
				t.Helper()
				c, ok := machine().Expired(seen, now)
				if !ok {
					t.Fatalf("no recovery of %+v", seen)
				}
				return c
			}},
	}
	for _, tt := range tests {
		t.Run(string(tt.point), func(t *testing.T) {
			t.Parallel()
			in := injector(t, 1, map[chaos.Point]float64{chaos.KillAfterClaim: 0.5, chaos.KillAfterCommit: 0.5,
				chaos.KillAfterRecover: 0.5, chaos.KillAfterAccept: 0.5})
			ms := memstore.New()
			ms.Clock = clock.NewFake(now) // records expire by the test's time
			s := in.Store(tt.role, ms)
			kills := 0
			for i := range 200 {
				seen := tt.before(i)
				ms.Put(seen)
				c := tt.change(t, seen)
				p := killed(func() {
					if _, err := s.Apply(context.Background(), c); err != nil {
						t.Fatalf("write %d: %v", i, err)
					}
				})
				switch p {
				case tt.point:
					kills++
				case "":
				default:
					t.Fatalf("killed at %s", p)
				}
				// Killed or not, the record is as the write leaves it.
				want := c.Patch.Apply(seen)
				if got, err := ms.GetState(context.Background(), "o"); err != nil || got.ProcessState != want.ProcessState ||
					got.StepIndex != want.StepIndex || got.Attempt != want.Attempt {
					t.Fatalf("write %d (killed at %q) left %+v, %v; want %s at step %d attempt %d",
						i, p, got, err, want.ProcessState, want.StepIndex, want.Attempt)
				}
				// A kill is recorded against the claim it left undispatched.
				if st := in.Strikes(); p != "" && (len(st) != kills || st[kills-1].Point != p || st[kills-1].OrderID != "o" || st[kills-1].Attempt != want.Attempt) {
					t.Fatalf("write %d killed at %s: strikes end %+v, want %d, the last of order o at attempt %d", i, p, st[len(st)-1], kills, want.Attempt)
				}
			}
			if ms.Writes() != 200 || kills < 60 || kills > 140 || in.Counts()[tt.point] != kills {
				t.Fatalf("writes %d, kills %d, counted %v", ms.Writes(), kills, in.Counts())
			}
		})
	}
}

func TestSameSeedSameFaults(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) string {
		in := injector(t, seed, map[chaos.Point]float64{chaos.KillAfterCommit: 0.3, chaos.DuplicateSend: 0.3})
		ms := memstore.New()
		ms.Clock = clock.NewFake(now) // records expire by the test's time
		s := in.Store("scheduler", ms)
		snd := in.Sender("scheduler", &fakeSender{})
		var trace strings.Builder
		for i := range 100 {
			id := "o" + string(rune('a'+i%7))
			ms.Put(processing(id, i%2, i, now.Add(time.Minute)))
			p := killed(func() {
				if _, err := s.Apply(context.Background(), commit(id, i%2, i)); err != nil {
					t.Fatalf("commit %d: %v", i, err)
				}
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
	in := injector(t, 3, map[chaos.Point]float64{chaos.DuplicateSend: 0.5, chaos.KillBeforeReply: 0.5})
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
	// The bodies name no order: nothing to record against one.
	if st := in.Strikes(); len(st) != 0 {
		t.Fatalf("strikes %+v", st)
	}
}

// A strike on a message is recorded against the order, attempt and kind
// of message its body names.
func TestStrikesNameTheMessagesOrderAndAttempt(t *testing.T) {
	t.Parallel()
	in := injector(t, 3, map[chaos.Point]float64{chaos.KillBeforeReply: 0.5})
	agent := in.Sender("agent", &fakeSender{})
	kills := 0
	for i := range 20 {
		body := fmt.Sprintf(`{"kind":"agent.reply","orderId":"o%d","stepIndex":1,"attempt":%d}`, i, i+1)
		if killed(func() { _ = agent.Send(context.Background(), "r", body, 0) }) != chaos.KillBeforeReply {
			continue
		}
		kills++
		st := in.Strikes()
		if len(st) != kills {
			t.Fatalf("%d kills, strikes %+v", kills, st)
		}
		if got := st[kills-1]; got.Point != chaos.KillBeforeReply || got.OrderID != fmt.Sprintf("o%d", i) || got.Attempt != i+1 ||
			got.Message != "agent.reply" || got.At.IsZero() {
			t.Errorf("strike of reply %d = %+v", i, got)
		}
	}
	if kills == 0 {
		t.Fatal("no reply killed")
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
	in := injector(t, 1, nil)
	ms := memstore.New()
	ms.Clock = clock.NewFake(now) // records expire by the test's time
	s := in.Store("scheduler", ms)
	ctx := context.Background()
	apply := func(c workflow.Change) workflow.State {
		t.Helper()
		st, err := s.Apply(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Transition, err)
		}
		return st
	}
	m := machine()
	ms.Put(pending("o1", 1, 0))
	first := apply(m.Claim("o1", 1, false, "scheduler-1", now)) // attempt 1
	// Its agent does not answer in time; the Supervisor hands the step
	// back, and it is claimed again.
	retry, ok := m.Expired(first, first.CompleteBy)
	if !ok {
		t.Fatalf("no recovery of %+v", first)
	}
	apply(retry)
	second := apply(m.Claim("o1", 1, false, "scheduler-1", first.CompleteBy.Add(time.Minute))) // attempt 2
	if first.Attempt != 1 || second.Attempt != 2 {
		t.Fatalf("claimed attempts %d and %d", first.Attempt, second.Attempt)
	}
	apply(m.StepCompleted("o1", 1, 2, nil, "scheduler-1", second.CompleteBy.Add(-time.Second)))
	if got := in.Ledger().StaleCommits(); len(got) != 0 || in.Ledger().Commits() != 1 {
		t.Fatalf("current attempt flagged: %v (%d commits)", got, in.Ledger().Commits())
	}
	// A store whose fencing failed: the record is back at attempt 1, and
	// the zombie's commit gets through.
	ms.Put(processing("o1", 1, 1, now.Add(time.Hour)))
	apply(m.StepCompleted("o1", 1, 1, nil, "scheduler-1", now))
	if got := in.Ledger().StaleCommits(); len(got) != 1 || !strings.Contains(got[0], "attempt 1 (attempt 2 already claimed)") {
		t.Fatalf("stale commits %v", got)
	}
}

// A throttled commit fails before it reaches the store, for the Scheduler
// only, and a later try of the same commit is decided anew.
func TestThrottledCommitsNeverReachTheStore(t *testing.T) {
	t.Parallel()
	in := injector(t, 3, map[chaos.Point]float64{chaos.ThrottleCommit: 0.5})
	ms := memstore.New()
	ms.Clock = clock.NewFake(now) // records expire by the test's time
	s := in.Store("scheduler", ms)
	ctx := context.Background()
	seen := processing("o", 0, 1, now.Add(time.Minute))
	throttled := 0
	for range 100 {
		ms.Put(seen)
		_, err := s.Apply(ctx, commit("o", 0, 1))
		switch {
		case errors.Is(err, chaos.ErrThrottled):
			throttled++
			if st, _ := ms.GetState(ctx, "o"); st.ProcessState != seen.ProcessState || st.StepIndex != 0 || st.Attempt != 1 {
				t.Fatalf("a throttled commit changed the record: %+v", st)
			}
		case err != nil:
			t.Fatal(err)
		}
	}
	if throttled < 25 || throttled > 75 || ms.Writes() != 100-throttled {
		t.Fatalf("%d of 100 tries of one commit throttled, %d reached the store", throttled, ms.Writes())
	}
	// Only commits of replies: the Scheduler's claims are never throttled.
	for i := range 50 {
		ms.Put(pending("o", 0, i))
		if _, err := s.Apply(ctx, machine().Claim("o", 0, false, "scheduler-1", now)); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	ms.Put(seen)
	if _, err := in.Store("supervisor", ms).Apply(ctx, commit("o", 0, 1)); err != nil {
		t.Fatalf("a role other than the Scheduler was throttled: %v", err)
	}
}

// A refused dispatch fails for one, two, or every send of the same step's
// request, never for another step's or for replies.
func TestRefusedDispatchesComeInBursts(t *testing.T) {
	t.Parallel()
	in := injector(t, 5, map[chaos.Point]float64{chaos.FailDispatch: 0.5})
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
	in := injector(t, 7, map[chaos.Point]float64{chaos.LoseAnswer: 0.5})
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

// A replica fault strikes about its rate of the periods, one replica of
// the remote at a time, and the same seed replays the same plan; a remote
// without a second replica has nothing to route to, so none strikes.
func TestReplicaOutagePlan(t *testing.T) {
	t.Parallel()
	steps := []string{"reserve-inventory", "charge-payment"}
	plan := func(seed uint64, replicas int) []string {
		in := injector(t, seed, map[chaos.Point]float64{chaos.ReplicaFault: 0.5})
		var out []string
		for n := range 200 {
			if o, ok := in.ReplicaOutage(n, steps, replicas, time.Second); ok {
				if o.Replica < 0 || o.Replica >= replicas || o.Fault.Healthy() {
					t.Fatalf("period %d: %+v", n, o)
				}
				if o.Fault.Refuse && o.Fault.Step != "" {
					t.Errorf("period %d: a replica refusing connections for one step only: %+v", n, o)
				}
				out = append(out, fmt.Sprintf("%d:%d:%s", n, o.Replica, o.Fault))
			}
		}
		return out
	}
	a, b := plan(3, 2), plan(3, 2)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("the same seed planned\n%v\nthen\n%v", a, b)
	}
	if len(a) < 70 || len(a) > 130 {
		t.Errorf("%d periods of 200 struck at rate 0.5", len(a))
	}
	kinds := map[string]bool{}
	for _, p := range a {
		for _, k := range []string{"down (503)", "refusing connections", "slow (+1s)"} {
			if strings.Contains(p, k) {
				kinds[k] = true
			}
		}
	}
	if len(kinds) != 3 {
		t.Errorf("kinds struck %v, want down, refusing and slow", kinds)
	}
	if got := plan(3, 1); len(got) != 0 {
		t.Errorf("one replica: %v struck", got)
	}
}
