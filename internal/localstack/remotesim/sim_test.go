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
	"github.com/sasflow/sas/shared/remote"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const step = "reserve-inventory"

func stepBody(orderID string) string {
	return fmt.Sprintf(`{"orderId":%q,"step":%q,"input":{"items":[]},"previous":{"a":{}}}`, orderID, step)
}

type answer struct {
	status int
	body   string
}

// call serves one step request directly, without a network.
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

func code(t *testing.T, body string) string {
	t.Helper()
	var p remote.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	return p.Code
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

func TestScriptedFaults(t *testing.T) {
	t.Parallel()
	type want struct {
		status  int
		code    string
		effects int
	}
	tests := []struct {
		name   string
		script []remotesim.Fault
		want   []want
	}{
		{"transient then ok", []remotesim.Fault{remotesim.Transient, remotesim.Transient},
			[]want{{503, "unavailable", 0}, {503, "unavailable", 0}, {200, "", 1}, {200, "", 1}}},
		{"permanent", []remotesim.Fault{remotesim.Permanent},
			[]want{{422, "rejected", 0}, {200, "", 1}}},
		{"apply then fail", []remotesim.Fault{remotesim.ApplyThenFail, remotesim.ApplyThenFail},
			[]want{{503, "unavailable", 1}, {503, "unavailable", 1}, {200, "", 1}}},
		{"none", []remotesim.Fault{remotesim.None}, []want{{200, "", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			sim.Script("k", tt.script...)
			for i, w := range tt.want {
				a := callStep(t, sim, "k", "o1")
				if a.status != w.status || (w.code != "" && code(t, a.body) != w.code) || sim.EffectCount("k") != w.effects {
					t.Errorf("call %d: %d %s effects %d, want %+v", i, a.status, a.body, sim.EffectCount("k"), w)
				}
			}
			if a := callStep(t, sim, "other", "o2"); a.status != 200 {
				t.Errorf("a script for one key affected another: %+v", a)
			}
		})
	}
}

func TestHangsUntilTheCallerGivesUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault       remotesim.Fault
		wantEffects int
	}{
		{remotesim.Hang, 0},
		{remotesim.ApplyThenHang, 1},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			t.Parallel()
			sim := remotesim.New()
			sim.Script("k", tt.fault)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan answer)
			go func() { done <- call(t, ctx, sim, "k", "/v1/steps/"+step, stepBody("o1")) }()
			cancel()
			if a := <-done; a.status != 503 {
				t.Errorf("hung call answered %+v", a)
			}
			if got := sim.EffectCount("k"); got != tt.wantEffects {
				t.Errorf("effects %d, want %d", got, tt.wantEffects)
			}
		})
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
	lo, hi := 10*time.Millisecond, 50*time.Millisecond
	sim := remotesim.New(remotesim.WithSeed(1), remotesim.WithSleep(sleep),
		remotesim.WithFaults(remotesim.Faults{Latency: 1, LatencyMin: remotesim.Duration(lo), LatencyMax: remotesim.Duration(hi)}))
	for i := range 50 {
		if a := callStep(t, sim, fmt.Sprintf("k%d", i), "o1"); a.status != 200 {
			t.Fatalf("call %d: %+v", i, a)
		}
	}
	if len(waits) != 50 {
		t.Fatalf("%d waits, want 50", len(waits))
	}
	for _, w := range waits {
		if w < lo || w > hi {
			t.Errorf("latency %v outside [%v, %v]", w, lo, hi)
		}
	}
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
	callStep(t, sim, "a", "o1")
	callStep(t, sim, "a", "o1")
	resp, err := http.Get(srv.URL + "/v1/effects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Effects map[string]int `json:"effects"`
		Calls   int            `json:"calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Calls != 2 || len(body.Effects) != 1 || body.Effects["a"] != 1 {
		t.Errorf("GET /v1/effects = %+v", body)
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
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/steps/"+step, strings.NewReader(stepBody(order)))
				req.Header.Set("Idempotency-Key", key)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Errorf("call: %v", err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					if ok[key] == nil {
						ok[key] = map[string]bool{}
					}
					ok[key][string(b)] = true
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
	for deadline := time.Now().Add(5 * time.Second); !sim.InProgress("o1/" + step); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the key was never in progress")
		}
	}
	if a := callStep(t, sim, "o1/"+step, "o1"); a.status != 409 || code(t, a.body) != "in_progress" {
		t.Fatalf("a retry while in progress answered %+v", a)
	}
	cancel()
	if a := <-done; a.status != 503 {
		t.Fatalf("the abandoned call answered %+v", a)
	}
	// The caller gave up; the service is still at it.
	if a := callUndo(t, sim, "o1/"+step+"/undo", "o1", "o1/"+step); a.status != 503 || code(t, a.body) != "in_progress" {
		t.Fatalf("undo while in progress answered %+v", a)
	}
	if got := sim.EffectCount("o1/" + step); got != 0 {
		t.Fatalf("applied %d times before the work ended", got)
	}
	for deadline := time.Now().Add(5 * time.Second); sim.EffectCount("o1/"+step) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("never applied")
		}
	}
	if a := callUndo(t, sim, "o1/"+step+"/undo", "o1", "o1/"+step); a.status != 200 || sim.CompensationCount("o1/"+step) != 1 {
		t.Fatalf("undo after the late apply answered %+v, undone %d", a, sim.CompensationCount("o1/"+step))
	}
}
