package remotesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/clock"
)

const compensatePath = "/v1/steps/" + step + "/compensate"

// Keys as the Scheduler makes them (workflow.IdempotencyKey and
// CompensationKey), spelled out so these tests do not depend on the workflow.
const (
	effectKey = "o1/" + step
	undoKey   = "o1/" + step + "/undo"
)

func compBody(orderID, effect string) string {
	return fmt.Sprintf(`{"orderId":%q,"step":%q,"effectKey":%q,"input":{"items":[]},"previous":{"a":{}}}`, orderID, step, effect)
}

func callUndo(t *testing.T, sim http.Handler, key, orderID, effect string) answer {
	t.Helper()
	return call(t, context.Background(), sim, key, compensatePath, compBody(orderID, effect))
}

func decodeUndo(t *testing.T, body string) remotesim.Undo {
	t.Helper()
	var u remotesim.Undo
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatalf("undo body %q: %v", body, err)
	}
	return u
}

// TestCompensateUndoesOnce: many concurrent tries of one compensation undo
// the applied effect once and all answer the same stored result.
func TestCompensateUndoesOnce(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	if a := callStep(t, sim, effectKey, "o1"); a.status != 200 {
		t.Fatalf("step: %+v", a)
	}
	const tries = 50
	answers := make([]answer, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() { answers[i] = callUndo(t, sim, undoKey, "o1", effectKey) })
	}
	wg.Wait()
	for i, a := range answers {
		if a != answers[0] {
			t.Errorf("try %d answered %+v, try 0 %+v", i, a, answers[0])
		}
	}
	if answers[0].status != 200 {
		t.Fatalf("compensation: %+v", answers[0])
	}
	u := decodeUndo(t, answers[0].body)
	if !u.Undone || !u.UndoneAt.Equal(t0) || u.EffectKey != effectKey || u.OrderID != "o1" || u.Step != step ||
		!strings.HasPrefix(u.Confirmation, step+"-undo-") {
		t.Errorf("undo %+v", u)
	}
	if n := sim.CompensationCount(effectKey); n != 1 {
		t.Errorf("CompensationCount = %d, want 1", n)
	}
	if got := sim.Compensations(); len(got) != 1 || got[effectKey] != 1 {
		t.Errorf("Compensations = %v", got)
	}
	// Effects count applies, which an undo does not take back.
	if n := sim.EffectCount(effectKey); n != 1 {
		t.Errorf("EffectCount = %d after the undo, want 1", n)
	}
	if sim.Calls() != tries+1 {
		t.Errorf("Calls = %d, want %d", sim.Calls(), tries+1)
	}
	// A try of the step after its undo replays the stored output, as any
	// retry of an applied request does; it does not apply again.
	if a := callStep(t, sim, effectKey, "o1"); a.status != 200 || sim.EffectCount(effectKey) != 1 {
		t.Errorf("step after its undo: %+v, effects %d", a, sim.EffectCount(effectKey))
	}
}

func TestCompensateReplaysAndRefusesReuse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		key, path, body  string
		wantStatus       int
		wantCode         string
		wantSameAsUndo   bool
		wantUndoCount    int
		wantEffectsAfter int
	}{
		{name: "replay", key: undoKey, path: compensatePath, body: compBody("o1", effectKey),
			wantStatus: 200, wantSameAsUndo: true, wantUndoCount: 1, wantEffectsAfter: 1},
		{name: "other body under the compensation key", key: undoKey, path: compensatePath, body: compBody("o2", effectKey),
			wantStatus: 409, wantCode: "idempotency_conflict", wantUndoCount: 1, wantEffectsAfter: 1},
		{name: "compensation key on the step route", key: undoKey, path: "/v1/steps/" + step, body: stepBody("o1"),
			wantStatus: 409, wantCode: "idempotency_conflict", wantUndoCount: 1, wantEffectsAfter: 1},
		{name: "step key on the compensation route", key: effectKey, path: compensatePath, body: compBody("o1", "o1/other"),
			wantStatus: 409, wantCode: "idempotency_conflict", wantUndoCount: 1, wantEffectsAfter: 1},
		{name: "another compensation key undoes again", key: "o1/again", path: compensatePath, body: compBody("o1", effectKey),
			wantStatus: 200, wantUndoCount: 2, wantEffectsAfter: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			callStep(t, sim, effectKey, "o1")
			first := callUndo(t, sim, undoKey, "o1", effectKey)
			if first.status != 200 {
				t.Fatalf("compensation: %+v", first)
			}
			a := call(t, context.Background(), sim, tt.key, tt.path, tt.body)
			if a.status != tt.wantStatus || (tt.wantCode != "" && code(t, a.body) != tt.wantCode) {
				t.Errorf("answer %d %s, want %d %s", a.status, a.body, tt.wantStatus, tt.wantCode)
			}
			if tt.wantSameAsUndo && a != first {
				t.Errorf("replay %+v, want the stored %+v", a, first)
			}
			if n := sim.CompensationCount(effectKey); n != tt.wantUndoCount {
				t.Errorf("CompensationCount = %d, want %d", n, tt.wantUndoCount)
			}
			if n := len(sim.Effects()); n != tt.wantEffectsAfter {
				t.Errorf("effects %v, want %d keys", sim.Effects(), tt.wantEffectsAfter)
			}
		})
	}
}

// TestCompensateBeforeTheStep: an undo that finds nothing applied leaves a
// tombstone, and a late try of the step is refused rather than applied.
func TestCompensateBeforeTheStep(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	a := callUndo(t, sim, undoKey, "o1", effectKey)
	if a.status != 200 {
		t.Fatalf("compensation: %+v", a)
	}
	if u := decodeUndo(t, a.body); u.Undone || !u.UndoneAt.IsZero() || u.EffectKey != effectKey {
		t.Errorf("undo of nothing %+v", u)
	}
	if strings.Contains(a.body, "undoneAt") {
		t.Errorf("undo of nothing carries an undoneAt: %s", a.body)
	}
	for i := range 2 {
		s := callStep(t, sim, effectKey, "o1")
		if s.status != 409 || code(t, s.body) != "compensated" {
			t.Errorf("step try %d after the tombstone: %+v", i, s)
		}
	}
	if again := callUndo(t, sim, undoKey, "o1", effectKey); again != a {
		t.Errorf("compensation replay %+v, want %+v", again, a)
	}
	if len(sim.Effects()) != 0 || len(sim.Compensations()) != 0 {
		t.Errorf("effects %v compensations %v, want none", sim.Effects(), sim.Compensations())
	}
	// Other orders are untouched by the tombstone.
	if s := callStep(t, sim, "o2/"+step, "o2"); s.status != 200 {
		t.Errorf("another order's step: %+v", s)
	}
}

// TestCompensateRacesTheStep runs tries of a step and its compensation at
// once over a real server: either the step applied first and was undone
// once, or it never applies at all.
func TestCompensateRacesTheStep(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		sim := remotesim.New()
		srv := httptest.NewServer(sim)
		post := func(key, path, body string) answer {
			req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
			if err != nil {
				t.Errorf("request: %v", err)
				return answer{}
			}
			req.Header.Set("Idempotency-Key", key)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Errorf("call: %v", err)
				return answer{}
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return answer{resp.StatusCode, string(b)}
		}
		var (
			wg    sync.WaitGroup
			undo  answer
			steps [4]answer
		)
		for i := range steps {
			wg.Go(func() { steps[i] = post(effectKey, "/v1/steps/"+step, stepBody("o1")) })
		}
		wg.Go(func() { undo = post(undoKey, compensatePath, compBody("o1", effectKey)) })
		wg.Wait()
		srv.Close()

		if undo.status != 200 {
			t.Fatalf("round %d: compensation %+v", round, undo)
		}
		u := decodeUndo(t, undo.body)
		applied, undone := sim.EffectCount(effectKey), sim.CompensationCount(effectKey)
		if u.Undone != (applied == 1) || applied != undone {
			t.Errorf("round %d: undone %v, effects %d, compensations %d", round, u.Undone, applied, undone)
		}
		for i, s := range steps {
			switch {
			case s.status == 200 && applied == 1:
			case s.status == 409 && code(t, s.body) == "compensated" && applied == 0:
			default:
				t.Errorf("round %d: step try %d answered %+v with %d effects", round, i, s, applied)
			}
		}
	}
}

// TestAppliedKeyIsNeverRejected: a retry of an applied request replays its
// result whatever permanent fault is drawn or configured, while scripted,
// transient and latency faults still apply.
func TestAppliedKeyIsNeverRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		undo   bool
		after  func(*remotesim.Sim)
		status int
	}{
		{"random permanent", false, func(s *remotesim.Sim) { mustSetFaults(t, s, remotesim.Faults{Permanent: 1}) }, 200},
		{"rejected step", false, func(s *remotesim.Sim) { s.RejectStep(step) }, 200},
		{"scripted permanent", false, func(s *remotesim.Sim) { s.Script(effectKey, remotesim.Permanent) }, 422},
		{"random transient", false, func(s *remotesim.Sim) { mustSetFaults(t, s, remotesim.Faults{Transient: 1}) }, 503},
		{"undo: random permanent", true, func(s *remotesim.Sim) { mustSetFaults(t, s, remotesim.Faults{Permanent: 1}) }, 200},
		{"undo: rejected undo", true, func(s *remotesim.Sim) { s.RejectUndo(step) }, 200},
		{"undo: scripted permanent", true, func(s *remotesim.Sim) { s.Script(undoKey, remotesim.Permanent) }, 422},
		{"undo: random transient", true, func(s *remotesim.Sim) { mustSetFaults(t, s, remotesim.Faults{Transient: 1}) }, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New(remotesim.WithSeed(5))
			do := func(key, orderID string) answer {
				if tt.undo {
					return callUndo(t, sim, key, orderID, orderID+"/"+step)
				}
				return callStep(t, sim, key, orderID)
			}
			key := effectKey
			if tt.undo {
				key = undoKey
				callStep(t, sim, effectKey, "o1")
			}
			first := do(key, "o1")
			tt.after(sim)
			a := do(key, "o1")
			if a.status != tt.status || (tt.status == 200 && a != first) {
				t.Errorf("retry of the applied key: %+v, want %d (first %+v)", a, tt.status, first)
			}
			if sim.EffectCount(effectKey) != 1 || (tt.undo && sim.CompensationCount(effectKey) != 1) {
				t.Errorf("effects %v compensations %v", sim.Effects(), sim.Compensations())
			}
		})
	}
	t.Run("a fresh key is still rejected", func(t *testing.T) {
		t.Parallel()
		sim := remotesim.New(remotesim.WithFaults(remotesim.Faults{Permanent: 1}))
		if a := callStep(t, sim, "fresh", "o1"); a.status != 422 || code(t, a.body) != "rejected" {
			t.Errorf("fresh key: %+v", a)
		}
	})
}

func mustSetFaults(t *testing.T, s *remotesim.Sim, f remotesim.Faults) {
	t.Helper()
	if err := s.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

// TestRandomFaultsOnceApplied: with random faults, a key is never rejected
// after its first success, and a seed still replays the same answers.
func TestRandomFaultsOnceApplied(t *testing.T) {
	t.Parallel()
	run := func() (statuses [][]int) {
		sim := remotesim.New(remotesim.WithSeed(11),
			remotesim.WithFaults(remotesim.Faults{Transient: 0.3, Permanent: 0.3, ApplyThenFail: 0.1}))
		for k := range 30 {
			var s []int
			for range 15 {
				s = append(s, callStep(t, sim, fmt.Sprintf("k%d", k), "o1").status)
			}
			statuses = append(statuses, s)
		}
		return statuses
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("one seed gave two runs")
	}
	var rejectedBefore, appliedKeys int
	for k, s := range a {
		applied := false
		for i, st := range s {
			switch {
			case st == 422 && applied:
				t.Errorf("key k%d call %d: rejected after it was applied: %v", k, i, s)
			case st == 422:
				rejectedBefore++
			case st == 200:
				applied = true
			}
		}
		if applied {
			appliedKeys++
		}
	}
	if rejectedBefore == 0 || appliedKeys == 0 {
		t.Errorf("%d rejections before an apply, %d applied keys: the faults did not show", rejectedBefore, appliedKeys)
	}
}

func TestRejectUndo(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	sim.RejectUndo(step)
	sim.RejectUndo(step)
	callStep(t, sim, effectKey, "o1")
	for i := range 3 {
		if a := callUndo(t, sim, undoKey, "o1", effectKey); a.status != 422 || code(t, a.body) != "rejected" {
			t.Errorf("compensation %d: %+v", i, a)
		}
	}
	if n := sim.CompensationCount(effectKey); n != 0 {
		t.Errorf("a rejected compensation undid %d times", n)
	}
	// A rejected compensation leaves no tombstone: the step still applies.
	if a := callUndo(t, sim, "o2/undo", "o2", "o2/"+step); a.status != 422 {
		t.Errorf("compensation of o2: %+v", a)
	}
	if a := callStep(t, sim, "o2/"+step, "o2"); a.status != 200 {
		t.Errorf("step after a rejected compensation: %+v", a)
	}
	// Other steps' compensations, and the step itself, are not rejected.
	other := `{"orderId":"o1","step":"charge-payment","effectKey":"o1/charge-payment","input":{}}`
	if a := call(t, context.Background(), sim, "o1/charge-payment/undo", "/v1/steps/charge-payment/compensate", other); a.status != 200 {
		t.Errorf("another step's compensation: %+v", a)
	}
	if a := callStep(t, sim, "o3/"+step, "o3"); a.status != 200 {
		t.Errorf("the step itself: %+v", a)
	}
	f := sim.Faults()
	if len(f.RejectUndo) != 1 || f.RejectUndo[0] != step || len(f.RejectSteps) != 0 {
		t.Errorf("faults %+v", f)
	}
	// Faults hands out a copy.
	f.RejectUndo[0] = "changed"
	if sim.Faults().RejectUndo[0] != step {
		t.Errorf("Faults shares its RejectUndo")
	}
}

// TestCompensationFaults: compensation calls draw faults on their own key.
func TestCompensationFaults(t *testing.T) {
	t.Parallel()
	type want struct {
		status int
		code   string
		undos  int
	}
	tests := []struct {
		name   string
		script []remotesim.Fault
		want   []want
	}{
		{"transient then ok", []remotesim.Fault{remotesim.Transient, remotesim.Transient},
			[]want{{503, "unavailable", 0}, {503, "unavailable", 0}, {200, "", 1}, {200, "", 1}}},
		{"permanent", []remotesim.Fault{remotesim.Permanent}, []want{{422, "rejected", 0}, {200, "", 1}}},
		{"apply then fail", []remotesim.Fault{remotesim.ApplyThenFail, remotesim.ApplyThenFail},
			[]want{{503, "unavailable", 1}, {503, "unavailable", 1}, {200, "", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			sim.Script(undoKey, tt.script...)
			if a := callStep(t, sim, effectKey, "o1"); a.status != 200 {
				t.Fatalf("the step drew the compensation's script: %+v", a)
			}
			for i, w := range tt.want {
				a := callUndo(t, sim, undoKey, "o1", effectKey)
				if a.status != w.status || (w.code != "" && code(t, a.body) != w.code) || sim.CompensationCount(effectKey) != w.undos {
					t.Errorf("call %d: %d %s undos %d, want %+v", i, a.status, a.body, sim.CompensationCount(effectKey), w)
				}
			}
		})
	}
	for _, tt := range []struct {
		fault     remotesim.Fault
		wantUndos int
	}{{remotesim.Hang, 0}, {remotesim.ApplyThenHang, 1}} {
		t.Run(tt.fault.String(), func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			callStep(t, sim, effectKey, "o1")
			sim.Script(undoKey, tt.fault)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan answer)
			go func() { done <- call(t, ctx, sim, undoKey, compensatePath, compBody("o1", effectKey)) }()
			cancel()
			if a := <-done; a.status != 503 {
				t.Errorf("hung compensation answered %+v", a)
			}
			if n := sim.CompensationCount(effectKey); n != tt.wantUndos {
				t.Errorf("undos %d, want %d", n, tt.wantUndos)
			}
		})
	}
	t.Run("random and latency", func(t *testing.T) {
		t.Parallel()
		var (
			mu    sync.Mutex
			waits []time.Duration
		)
		sleep := func(_ context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			return nil
		}
		sim := remotesim.New(remotesim.WithSleep(sleep), remotesim.WithFaults(remotesim.Faults{
			Transient: 1, Latency: 1, LatencyMin: remotesim.Duration(time.Millisecond), LatencyMax: remotesim.Duration(time.Millisecond),
		}))
		if a := callUndo(t, sim, undoKey, "o1", effectKey); a.status != 503 {
			t.Errorf("compensation under Transient 1: %+v", a)
		}
		if len(waits) != 1 || waits[0] != time.Millisecond {
			t.Errorf("waits %v, want one of 1ms", waits)
		}
		// Faults come before the undo: no tombstone was left.
		mustSetFaults(t, sim, remotesim.Faults{})
		if a := callStep(t, sim, effectKey, "o1"); a.status != 200 {
			t.Errorf("step after a failed compensation: %+v", a)
		}
	})
}

func TestCompensateRejectsBadRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, path, body string
		wantStatus            int
		wantCode              string
	}{
		{"no idempotency key", "", compensatePath, compBody("o1", effectKey), 400, "missing_idempotency_key"},
		{"key too long", strings.Repeat("k", remotesim.MaxKeyBytes+1), compensatePath, compBody("o1", effectKey), 400, "bad_idempotency_key"},
		{"no effect key", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","input":{}}`, 400, "bad_request"},
		{"effect key too long", undoKey, compensatePath, compBody("o1", strings.Repeat("e", remotesim.MaxKeyBytes+1)), 400, "bad_request"},
		{"effect key is the key", effectKey, compensatePath, compBody("o1", effectKey), 400, "bad_request"},
		{"no input", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","effectKey":"e"}`, 400, "bad_request"},
		{"null input", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","effectKey":"e","input":null}`, 400, "bad_request"},
		{"unknown field", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","effectKey":"e","input":{},"x":1}`, 400, "bad_request"},
		{"step mismatch", undoKey, "/v1/steps/charge-payment/compensate", compBody("o1", effectKey), 400, "bad_request"},
		{"no order", undoKey, compensatePath, `{"step":"reserve-inventory","effectKey":"e","input":{}}`, 400, "bad_request"},
		{"bad step name", undoKey, "/v1/steps/Bad_Step/compensate", compBody("o1", effectKey), 404, "unknown_step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			a := call(t, context.Background(), sim, tt.key, tt.path, tt.body)
			if a.status != tt.wantStatus || code(t, a.body) != tt.wantCode {
				t.Errorf("answer %d %s, want %d %s", a.status, a.body, tt.wantStatus, tt.wantCode)
			}
			if sim.Calls() != 1 {
				t.Errorf("calls %d", sim.Calls())
			}
			// A refused compensation leaves no tombstone.
			if s := callStep(t, sim, effectKey, "o1"); s.status != 200 {
				t.Errorf("step after a refused compensation: %+v", s)
			}
		})
	}
}

func TestCompensateAnotherStepsEffect(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	callStep(t, sim, effectKey, "o1")
	tests := []struct{ name, key, path, body string }{
		{"another step", "u1", "/v1/steps/charge-payment/compensate",
			fmt.Sprintf(`{"orderId":"o1","step":"charge-payment","effectKey":%q,"input":{}}`, effectKey)},
		{"another order", "u2", compensatePath, compBody("o2", effectKey)},
	}
	for _, tt := range tests {
		a := call(t, context.Background(), sim, tt.key, tt.path, tt.body)
		if a.status != 422 || code(t, a.body) != "effect_mismatch" {
			t.Errorf("%s: %+v", tt.name, a)
		}
	}
	if n := sim.CompensationCount(effectKey); n != 0 {
		t.Errorf("a mismatched compensation undid %d times", n)
	}
}

func TestEffectsEndpointShowsCompensations(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	get := func() (body struct {
		Effects       map[string]int `json:"effects"`
		Compensations map[string]int `json:"compensations"`
		Calls         int            `json:"calls"`
	}, raw string) {
		resp, err := http.Get(srv.URL + "/v1/effects")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		return body, string(b)
	}
	if _, raw := get(); !strings.Contains(raw, `"compensations":{}`) {
		t.Errorf("GET /v1/effects before any undo = %s, want an empty compensations object", raw)
	}
	callStep(t, sim, effectKey, "o1")
	callUndo(t, sim, undoKey, "o1", effectKey)
	callUndo(t, sim, undoKey, "o1", effectKey)
	callUndo(t, sim, "o9/undo", "o9", "o9/"+step) // nothing to undo
	body, raw := get()
	if body.Calls != 4 || len(body.Effects) != 1 || body.Effects[effectKey] != 1 ||
		len(body.Compensations) != 1 || body.Compensations[effectKey] != 1 {
		t.Errorf("GET /v1/effects = %s", raw)
	}
}
