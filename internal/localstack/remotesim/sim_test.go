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
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/remote"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	step           = "reserve-inventory"
	compensatePath = "/v1/steps/" + step + "/compensate"
)

// Keys as the Scheduler makes them (workflow.IdempotencyKey and
// CompensationKey), spelled out so these tests do not depend on the workflow.
const (
	effectKey = "o1/" + step
	undoKey   = "o1/" + step + "/undo"
)

func stepBody(orderID string) string {
	return fmt.Sprintf(`{"orderId":%q,"step":%q,"input":{"items":[]},"previous":{"a":{}}}`, orderID, step)
}

func compBody(orderID, effect string) string {
	return fmt.Sprintf(`{"orderId":%q,"step":%q,"effectKey":%q,"input":{"items":[]},"previous":{"a":{}}}`, orderID, step, effect)
}

type answer struct {
	status int
	body   string
}

// call serves one request directly, without a network.
func call(t *testing.T, ctx context.Context, sim http.Handler, key, path, body string) answer {
	t.Helper()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	sim.ServeHTTP(w, r)
	return answer{w.Code, w.Body.String()}
}

func callStep(t *testing.T, sim http.Handler, key, orderID string) answer {
	t.Helper()
	return call(t, context.Background(), sim, key, "/v1/steps/"+step, stepBody(orderID))
}

func callUndo(t *testing.T, sim http.Handler, key, orderID, effect string) answer {
	t.Helper()
	return call(t, context.Background(), sim, key, compensatePath, compBody(orderID, effect))
}

// post sends one request over a real server; a failed call is an error of
// the test and answers the zero answer.
func post(t *testing.T, srv *httptest.Server, key, path, body string) answer {
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

func code(t *testing.T, body string) string {
	t.Helper()
	var p remote.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	return p.Code
}

func decodeUndo(t *testing.T, body string) remotesim.Undo {
	t.Helper()
	var u remotesim.Undo
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatalf("undo body %q: %v", body, err)
	}
	return u
}

func mustSetFaults(t *testing.T, s *remotesim.Sim, f remotesim.Faults) {
	t.Helper()
	if err := s.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

// sleeps records the simulator's latency instead of waiting it out. The
// tests that use it call the simulator on their own goroutine.
type sleeps []time.Duration

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	*s = append(*s, d)
	return nil
}

// route is one of the two calls the simulator serves, for the tests that
// hold of both alike: the key its calls use, what must come before them,
// and how often it took effect (the step applied, the effect undone).
type route struct {
	name  string
	key   string
	setup func(t *testing.T, sim *remotesim.Sim)
	call  func(t *testing.T, ctx context.Context, sim http.Handler) answer
	done  func(sim *remotesim.Sim) int
}

var routes = []route{
	{
		name:  "step",
		key:   effectKey,
		setup: func(*testing.T, *remotesim.Sim) {},
		call: func(t *testing.T, ctx context.Context, sim http.Handler) answer {
			return call(t, ctx, sim, effectKey, "/v1/steps/"+step, stepBody("o1"))
		},
		done: func(sim *remotesim.Sim) int { return sim.EffectCount(effectKey) },
	},
	{
		name: "compensate",
		key:  undoKey,
		// The undo has an effect to undo; the step draws none of the
		// undo's faults, which are scripted on the undo's own key.
		setup: func(t *testing.T, sim *remotesim.Sim) {
			t.Helper()
			if a := callStep(t, sim, effectKey, "o1"); a.status != 200 {
				t.Fatalf("the step drew the compensation's faults: %+v", a)
			}
		},
		call: func(t *testing.T, ctx context.Context, sim http.Handler) answer {
			return call(t, ctx, sim, undoKey, compensatePath, compBody("o1", effectKey))
		},
		done: func(sim *remotesim.Sim) int { return sim.CompensationCount(effectKey) },
	},
}

func TestAppliesOncePerKey(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	first := callStep(t, sim, "o1/"+step, "o1")
	if first.status != 200 {
		t.Fatalf("first call %d %s", first.status, first.body)
	}
	var out remotesim.Output
	if err := json.Unmarshal([]byte(first.body), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Confirmation, step+"-") || len(out.Confirmation) != len(step)+9 || !out.AppliedAt.Equal(t0) || out.OrderID != "o1" {
		t.Errorf("output %+v", out)
	}
	again := callStep(t, sim, "o1/"+step, "o1")
	if again != first {
		t.Errorf("repeat %+v, want the stored %+v", again, first)
	}
	other := callStep(t, sim, "o2/"+step, "o2")
	if other.status != 200 || other.body == first.body {
		t.Errorf("other key %+v", other)
	}
	if got := sim.Effects(); len(got) != 2 || got["o1/"+step] != 1 || got["o2/"+step] != 1 {
		t.Errorf("effects %v", got)
	}
	if sim.EffectCount("o1/"+step) != 1 || sim.EffectCount("nope") != 0 || sim.Calls() != 3 {
		t.Errorf("EffectCount %d, Calls %d", sim.EffectCount("o1/"+step), sim.Calls())
	}
}

func TestRejectsBadRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, path, body string
		wantStatus            int
		wantCode              string
	}{
		{"no idempotency key", "", "/v1/steps/" + step, stepBody("o1"), 400, "missing_idempotency_key"},
		{"key too long", strings.Repeat("k", remotesim.MaxKeyBytes+1), "/v1/steps/" + step, stepBody("o1"), 400, "bad_idempotency_key"},
		{"not JSON", "k", "/v1/steps/" + step, `{`, 400, "bad_request"},
		{"unknown field", "k", "/v1/steps/" + step, `{"orderId":"o","step":"reserve-inventory","input":{},"x":1}`, 400, "bad_request"},
		{"step mismatch", "k", "/v1/steps/charge-payment", stepBody("o1"), 400, "bad_request"},
		{"no input", "k", "/v1/steps/" + step, `{"orderId":"o","step":"reserve-inventory"}`, 400, "bad_request"},
		{"no order", "k", "/v1/steps/" + step, `{"step":"reserve-inventory","input":{}}`, 400, "bad_request"},
		{"trailing data", "k", "/v1/steps/" + step, stepBody("o1") + `{}`, 400, "bad_request"},
		{"body too large", "k", "/v1/steps/" + step, `{"orderId":"o","step":"reserve-inventory","input":"` + strings.Repeat("x", remotesim.MaxRequestBytes) + `"}`, 400, "bad_request"},
		{"bad step name", "k", "/v1/steps/Bad_Step", stepBody("o1"), 404, "unknown_step"},
		{"undo: no idempotency key", "", compensatePath, compBody("o1", effectKey), 400, "missing_idempotency_key"},
		{"undo: key too long", strings.Repeat("k", remotesim.MaxKeyBytes+1), compensatePath, compBody("o1", effectKey), 400, "bad_idempotency_key"},
		{"undo: no effect key", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","input":{}}`, 400, "bad_request"},
		{"undo: effect key too long", undoKey, compensatePath, compBody("o1", strings.Repeat("e", remotesim.MaxKeyBytes+1)), 400, "bad_request"},
		{"undo: effect key is the key", effectKey, compensatePath, compBody("o1", effectKey), 400, "bad_request"},
		{"undo: no input", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","effectKey":"e"}`, 400, "bad_request"},
		{"undo: null input", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","effectKey":"e","input":null}`, 400, "bad_request"},
		{"undo: unknown field", undoKey, compensatePath, `{"orderId":"o1","step":"reserve-inventory","effectKey":"e","input":{},"x":1}`, 400, "bad_request"},
		{"undo: step mismatch", undoKey, "/v1/steps/charge-payment/compensate", compBody("o1", effectKey), 400, "bad_request"},
		{"undo: no order", undoKey, compensatePath, `{"step":"reserve-inventory","effectKey":"e","input":{}}`, 400, "bad_request"},
		{"undo: bad step name", undoKey, "/v1/steps/Bad_Step/compensate", compBody("o1", effectKey), 404, "unknown_step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			a := call(t, context.Background(), sim, tt.key, tt.path, tt.body)
			if a.status != tt.wantStatus || code(t, a.body) != tt.wantCode {
				t.Errorf("answer %d %s, want %d %s", a.status, a.body, tt.wantStatus, tt.wantCode)
			}
			if len(sim.Effects()) != 0 || sim.Calls() != 1 {
				t.Errorf("effects %v calls %d", sim.Effects(), sim.Calls())
			}
			// A refused call leaves nothing behind; a refused
			// compensation, no tombstone.
			if s := callStep(t, sim, effectKey, "o1"); s.status != 200 {
				t.Errorf("step after a refused call: %+v", s)
			}
		})
	}
}

func TestConflictingBodyForAKey(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	callStep(t, sim, "k", "o1")
	a := callStep(t, sim, "k", "o2")
	if a.status != 409 || code(t, a.body) != "idempotency_conflict" || sim.EffectCount("k") != 1 {
		t.Errorf("answer %+v effects %d", a, sim.EffectCount("k"))
	}
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/v1/steps/"+step, nil)
	w := httptest.NewRecorder()
	remotesim.New().ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET a step: %d", w.Code)
	}
}

// TestScriptedFaults: a call draws the faults scripted for its key, steps
// and compensations alike, and other keys draw none of them.
func TestScriptedFaults(t *testing.T) {
	t.Parallel()
	type want struct {
		status int
		code   string
		done   int // the route's effects: applied, or undone
	}
	tests := []struct {
		name   string
		script []remotesim.Fault
		want   []want
	}{
		{"transient then ok", []remotesim.Fault{remotesim.Transient, remotesim.Transient},
			[]want{{503, "unavailable", 0}, {503, "unavailable", 0}, {200, "", 1}, {200, "", 1}}},
		// A rejection is remembered under its key, for steps and undos
		// alike: a retry of the key is refused again, never applied.
		{"permanent", []remotesim.Fault{remotesim.Permanent},
			[]want{{422, "rejected", 0}, {422, "rejected", 0}}},
		{"apply then fail", []remotesim.Fault{remotesim.ApplyThenFail, remotesim.ApplyThenFail},
			[]want{{503, "unavailable", 1}, {503, "unavailable", 1}, {200, "", 1}}},
		{"none", []remotesim.Fault{remotesim.None}, []want{{200, "", 1}}},
	}
	for _, r := range routes {
		for _, tt := range tests {
			t.Run(r.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				sim := remotesim.New()
				sim.Script(r.key, tt.script...)
				r.setup(t, sim)
				for i, w := range tt.want {
					a := r.call(t, context.Background(), sim)
					if a.status != w.status || (w.code != "" && code(t, a.body) != w.code) || r.done(sim) != w.done {
						t.Errorf("call %d: %d %s done %d, want %+v", i, a.status, a.body, r.done(sim), w)
					}
				}
				if a := callStep(t, sim, "o2/"+step, "o2"); a.status != 200 {
					t.Errorf("a script for one key affected another: %+v", a)
				}
			})
		}
	}
}

func TestHangsUntilTheCallerGivesUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault    remotesim.Fault
		wantDone int
	}{
		{remotesim.Hang, 0},
		{remotesim.ApplyThenHang, 1},
	}
	for _, r := range routes {
		for _, tt := range tests {
			t.Run(r.name+"/"+tt.fault.String(), func(t *testing.T) {
				t.Parallel()
				sim := remotesim.New()
				sim.Script(r.key, tt.fault)
				r.setup(t, sim)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan answer)
				go func() { done <- r.call(t, ctx, sim) }()
				cancel()
				if a := <-done; a.status != 503 {
					t.Errorf("hung call answered %+v", a)
				}
				if got := r.done(sim); got != tt.wantDone {
					t.Errorf("done %d, want %d", got, tt.wantDone)
				}
			})
		}
	}
	t.Run("Close releases hanging calls", func(t *testing.T) {
		t.Parallel()
		sim := remotesim.New()
		sim.Script("k", remotesim.Hang)
		done := make(chan answer)
		go func() { done <- callStep(t, sim, "k", "o1") }()
		sim.Close()
		sim.Close() // idempotent
		if a := <-done; a.status != 503 {
			t.Errorf("released call answered %+v", a)
		}
	})
}

func TestRejectStep(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	sim.RejectStep(step)
	sim.RejectStep(step)
	for i := range 3 {
		if a := callStep(t, sim, fmt.Sprintf("k%d", i), "o1"); a.status != 422 || code(t, a.body) != "rejected" {
			t.Errorf("call %d: %+v", i, a)
		}
	}
	a := call(t, context.Background(), sim, "k", "/v1/steps/charge-payment", `{"orderId":"o1","step":"charge-payment","input":{}}`)
	if a.status != 200 {
		t.Errorf("another step: %+v", a)
	}
	if f := sim.Faults(); len(f.RejectSteps) != 1 {
		t.Errorf("RejectSteps %v", f.RejectSteps)
	}
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		faults remotesim.Faults
		check  func(t *testing.T, statuses []int)
	}{
		{"never", remotesim.Faults{}, func(t *testing.T, s []int) {
			for i, st := range s {
				if st != 200 {
					t.Errorf("call %d: %d", i, st)
				}
			}
		}},
		{"always transient", remotesim.Faults{Transient: 1}, func(t *testing.T, s []int) {
			for i, st := range s {
				if st != 503 {
					t.Errorf("call %d: %d", i, st)
				}
			}
		}},
		{"always permanent", remotesim.Faults{Permanent: 1}, func(t *testing.T, s []int) {
			for i, st := range s {
				if st != 422 {
					t.Errorf("call %d: %d", i, st)
				}
			}
		}},
		{"mixed", remotesim.Faults{Transient: 0.3, Permanent: 0.2, ApplyThenFail: 0.2}, func(t *testing.T, s []int) {
			seen := map[int]int{}
			for _, st := range s {
				seen[st]++
			}
			if seen[200] == 0 || seen[503] == 0 || seen[422] == 0 || seen[200]+seen[503]+seen[422] != len(s) {
				t.Errorf("statuses %v", seen)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := func() []int {
				sim := remotesim.New(remotesim.WithSeed(42), remotesim.WithFaults(tt.faults))
				var s []int
				for i := range 200 {
					s = append(s, callStep(t, sim, fmt.Sprintf("k%d", i), "o1").status)
				}
				return s
			}
			a, b := run(), run()
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("one seed gave two runs")
			}
			tt.check(t, a)
		})
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	t.Run("steps", func(t *testing.T) {
		t.Parallel()
		var slept sleeps
		lo, hi := 10*time.Millisecond, 50*time.Millisecond
		sim := remotesim.New(remotesim.WithSeed(1), remotesim.WithSleep(slept.sleep),
			remotesim.WithFaults(remotesim.Faults{Latency: 1, LatencyMin: remotesim.Duration(lo), LatencyMax: remotesim.Duration(hi)}))
		for i := range 50 {
			if a := callStep(t, sim, fmt.Sprintf("k%d", i), "o1"); a.status != 200 {
				t.Fatalf("call %d: %+v", i, a)
			}
		}
		if len(slept) != 50 {
			t.Fatalf("%d waits, want 50", len(slept))
		}
		for _, w := range slept {
			if w < lo || w > hi {
				t.Errorf("latency %v outside [%v, %v]", w, lo, hi)
			}
		}
	})
	// Compensation calls draw random faults and latency as step calls do.
	t.Run("compensations", func(t *testing.T) {
		t.Parallel()
		var slept sleeps
		sim := remotesim.New(remotesim.WithSleep(slept.sleep), remotesim.WithFaults(remotesim.Faults{
			Transient: 1, Latency: 1, LatencyMin: remotesim.Duration(time.Millisecond), LatencyMax: remotesim.Duration(time.Millisecond),
		}))
		if a := callUndo(t, sim, undoKey, "o1", effectKey); a.status != 503 {
			t.Errorf("compensation under Transient 1: %+v", a)
		}
		if len(slept) != 1 || slept[0] != time.Millisecond {
			t.Errorf("waits %v, want one of 1ms", slept)
		}
		// Faults come before the undo: no tombstone was left.
		mustSetFaults(t, sim, remotesim.Faults{})
		if a := callStep(t, sim, effectKey, "o1"); a.status != 200 {
			t.Errorf("step after a failed compensation: %+v", a)
		}
	})
}

func TestFaultsEndpoint(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/faults", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		body       string
		wantStatus int
	}{
		{`{"transient":0.5,"latency":0.1,"latencyMin":"1ms","latencyMax":"2ms","rejectSteps":["charge-payment"],"rejectUndo":["ship"],"seed":7}`, 200},
		{`{"transient":1.5}`, 400},
		{`{"transient":0.6,"permanent":0.6}`, 400},
		{`{"latencyMin":"2s","latencyMax":"1s"}`, 400},
		{`{"latencyMax":"1h"}`, 400},
		{`{"latencyMax":5}`, 400},
		{`{"rejectSteps":["Bad"]}`, 400},
		{`{"rejectUndo":["Bad"]}`, 400},
		{`{"unknown":1}`, 400},
		{`not json`, 400},
	}
	for _, tt := range tests {
		if st, b := post(tt.body); st != tt.wantStatus {
			t.Errorf("POST %s: %d %s, want %d", tt.body, st, b, tt.wantStatus)
		}
	}
	f := sim.Faults()
	if f.Transient != 0.5 || time.Duration(f.LatencyMax) != 2*time.Millisecond || len(f.RejectSteps) != 1 ||
		len(f.RejectUndo) != 1 || f.RejectUndo[0] != "ship" {
		t.Errorf("faults after the valid POST: %+v", f)
	}
	resp, err := http.Get(srv.URL + "/v1/faults")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got remotesim.Faults
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Transient != 0.5 || got.LatencyMin != remotesim.Duration(time.Millisecond) ||
		len(got.RejectUndo) != 1 {
		t.Errorf("GET /v1/faults = %+v, %v", got, err)
	}
}

func TestEffectsEndpoint(t *testing.T) {
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
	callStep(t, sim, effectKey, "o1")
	if body, raw := get(); body.Calls != 2 || len(body.Effects) != 1 || body.Effects[effectKey] != 1 {
		t.Errorf("GET /v1/effects = %s", raw)
	}
	callUndo(t, sim, undoKey, "o1", effectKey)
	callUndo(t, sim, undoKey, "o1", effectKey)
	callUndo(t, sim, "o9/undo", "o9", "o9/"+step) // nothing to undo
	body, raw := get()
	if body.Calls != 5 || len(body.Effects) != 1 || body.Effects[effectKey] != 1 ||
		len(body.Compensations) != 1 || body.Compensations[effectKey] != 1 {
		t.Errorf("GET /v1/effects = %s", raw)
	}
}

// TestConcurrentCallsApplyOnce hammers a few keys from many goroutines over
// a real server with faults on; run it with -race.
func TestConcurrentCallsApplyOnce(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithSeed(3),
		remotesim.WithFaults(remotesim.Faults{Transient: 0.2, ApplyThenFail: 0.2, Permanent: 0.1}))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	defer sim.Close()

	const keys, workers, perWorker = 5, 16, 20
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok = map[string]map[string]bool{} // key -> distinct 200 bodies
	)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("order-%d/%s", (w+i)%keys, step)
				order := fmt.Sprintf("order-%d", (w+i)%keys)
				if a := post(t, srv, key, "/v1/steps/"+step, stepBody(order)); a.status == 200 {
					mu.Lock()
					if ok[key] == nil {
						ok[key] = map[string]bool{}
					}
					ok[key][a.body] = true
					mu.Unlock()
				}
				if i%7 == 0 {
					_ = sim.Effects()
					_ = sim.Calls()
				}
			}
		})
	}
	// Faults change under load too.
	wg.Go(func() {
		for i := range 10 {
			if err := sim.SetFaults(remotesim.Faults{Transient: float64(i) / 20}); err != nil {
				t.Error(err)
			}
			sim.Script(fmt.Sprintf("order-%d/%s", i%keys, step), remotesim.ApplyThenFail)
		}
	})
	wg.Wait()

	if sim.Calls() != workers*perWorker {
		t.Errorf("Calls = %d, want %d", sim.Calls(), workers*perWorker)
	}
	for key, n := range sim.Effects() {
		if n != 1 {
			t.Errorf("key %s applied %d times", key, n)
		}
	}
	for key, bodies := range ok {
		if len(bodies) != 1 {
			t.Errorf("key %s answered %d different outputs", key, len(bodies))
		}
		if sim.EffectCount(key) != 1 {
			t.Errorf("key %s answered 200 but applied %d times", key, sim.EffectCount(key))
		}
	}
}

func TestFaultString(t *testing.T) {
	t.Parallel()
	if remotesim.ApplyThenFail.String() != "applyThenFail" || remotesim.Fault(99).String() != "Fault(99)" {
		t.Errorf("Fault.String")
	}
}

func TestWithFaultsPanicsOnInvalid(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Errorf("WithFaults accepted an invalid configuration")
		}
	}()
	remotesim.New(remotesim.WithFaults(remotesim.Faults{Hang: 2}))
}

// Oversize and Garbage apply the effect and answer 200 with a body an agent
// cannot use; the key keeps that answer, so a replay gets it too.
func TestUnusableSuccessfulAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fault remotesim.Fault
		check func(body string) bool
	}{
		{remotesim.Oversize, func(b string) bool { return len(b) > remotesim.OversizeBytes && json.Valid([]byte(b)) }},
		{remotesim.Garbage, func(b string) bool { return !json.Valid([]byte(b)) }},
	} {
		t.Run(tt.fault.String(), func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			sim.Script("k", tt.fault)
			for i := range 2 {
				a := callStep(t, sim, "k", "o1")
				if a.status != 200 || !tt.check(a.body) {
					t.Fatalf("call %d answered %d with %.80q", i+1, a.status, a.body)
				}
			}
			if got := sim.EffectCount("k"); got != 1 {
				t.Fatalf("effects %d, want 1", got)
			}
		})
	}
}

// HangThenApply keeps working after its caller gave up: meanwhile a retry
// under the key gets 409 in_progress and an undo 503; then the effect is
// applied, and the undo that comes after undoes it.
func TestHangThenApplyAppliesAfterTheCallerGaveUp(t *testing.T) {
	t.Parallel()
	late := 300 * time.Millisecond
	sim := remotesim.New(remotesim.WithFaults(remotesim.Faults{InProgressFor: remotesim.Duration(late)}))
	sim.Script("o1/"+step, remotesim.HangThenApply)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan answer)
	go func() { done <- call(t, ctx, sim, "o1/"+step, "/v1/steps/"+step, stepBody("o1")) }()
	// Wait until the first call holds the key.
	await.Until(t, 5*time.Second, "the key in progress", func() (bool, error) { return sim.InProgress("o1/" + step), nil })
	if a := callStep(t, sim, "o1/"+step, "o1"); a.status != 409 || code(t, a.body) != remote.CodeInProgress {
		t.Fatalf("a retry while in progress answered %+v", a)
	}
	cancel()
	if a := <-done; a.status != 503 {
		t.Fatalf("the abandoned call answered %+v", a)
	}
	// The caller gave up; the service is still at it.
	if a := callUndo(t, sim, "o1/"+step+"/undo", "o1", "o1/"+step); a.status != 503 || code(t, a.body) != remote.CodeInProgress {
		t.Fatalf("undo while in progress answered %+v", a)
	}
	if got := sim.EffectCount("o1/" + step); got != 0 {
		t.Fatalf("applied %d times before the work ended", got)
	}
	await.Until(t, 5*time.Second, "the late effect applied", func() (bool, error) { return sim.EffectCount("o1/"+step) > 0, nil })
	if a := callUndo(t, sim, "o1/"+step+"/undo", "o1", "o1/"+step); a.status != 200 || sim.CompensationCount("o1/"+step) != 1 {
		t.Fatalf("undo after the late apply answered %+v, undone %d", a, sim.CompensationCount("o1/"+step))
	}
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
		if s.status != 409 || code(t, s.body) != remote.CodeCompensated {
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
		var (
			wg    sync.WaitGroup
			undo  answer
			steps [4]answer
		)
		for i := range steps {
			wg.Go(func() { steps[i] = post(t, srv, effectKey, "/v1/steps/"+step, stepBody("o1")) })
		}
		wg.Go(func() { undo = post(t, srv, undoKey, compensatePath, compBody("o1", effectKey)) })
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
			case s.status == 409 && code(t, s.body) == remote.CodeCompensated && applied == 0:
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

func TestInjectionsRecordEveryFaultServed(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	sim := remotesim.New(remotesim.WithClock(clk))
	sim.Script(effectKey, remotesim.Transient, remotesim.None)
	sim.Script(undoKey, remotesim.ApplyThenFail)
	callStep(t, sim, effectKey, "o1")
	clk.Advance(time.Second)
	callStep(t, sim, effectKey, "o1") // None: no fault
	callUndo(t, sim, undoKey, "o1", effectKey)
	if err := sim.SetFaults(remotesim.Faults{HangSteps: []string{"charge-payment"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the hanging call's caller is gone already
	call(t, ctx, sim, "o2/charge-payment", "/v1/steps/charge-payment", `{"orderId":"o2","step":"charge-payment","input":{}}`)

	want := []remotesim.Injection{
		{At: t0, OrderID: "o1", Step: step, Fault: remotesim.Transient},
		{At: t0.Add(time.Second), OrderID: "o1", Step: step, Undo: true, Fault: remotesim.ApplyThenFail},
		{At: t0.Add(time.Second), OrderID: "o2", Step: "charge-payment", Fault: remotesim.Hang},
	}
	got := sim.Injections()
	if len(got) != len(want) {
		t.Fatalf("injections %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].At.Equal(want[i].At) || got[i].OrderID != want[i].OrderID || got[i].Step != want[i].Step ||
			got[i].Undo != want[i].Undo || got[i].Fault != want[i].Fault {
			t.Errorf("injection %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
