package remotesim_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/clock"
)

// postTo sends one step call to a replica's base URL; err is the client's
// (a refused connection).
func postTo(t *testing.T, base, key, path, body string) (answer, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}, nil
}

func startReplicas(t *testing.T, sim *remotesim.Sim, n int) []*remotesim.Replica {
	t.Helper()
	var out []*remotesim.Replica
	for range n {
		r, err := remotesim.StartReplica(sim, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		out = append(out, r)
	}
	t.Cleanup(sim.Close)
	return out
}

// Replicas share the simulator's idempotency state: a key applied through
// one is replayed by the other, applied once.
func TestReplicasShareOneState(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	rs := startReplicas(t, sim, 2)
	a, err := postTo(t, rs[0].URL(), effectKey, "/v1/steps/"+step, stepBody("o1"))
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("through A: %+v, %v", a, err)
	}
	b, err := postTo(t, rs[1].URL(), effectKey, "/v1/steps/"+step, stepBody("o1"))
	if err != nil || b != a {
		t.Fatalf("through B: %+v, %v; want A's answer %+v", b, err, a)
	}
	if n := sim.EffectCount(effectKey); n != 1 {
		t.Errorf("applied %d times, want once", n)
	}
	if rs[0].Calls() != 1 || rs[1].Calls() != 1 {
		t.Errorf("calls %d and %d, want one each", rs[0].Calls(), rs[1].Calls())
	}
}

// Each replica has faults of its own: down answers 503 without reaching the
// state, refusing fails to connect until it listens again on the same
// address, slow delays its calls, and a fault may be limited to one step.
func TestReplicaFaults(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithClock(clock.NewFake(t0)))
	rs := startReplicas(t, sim, 2)
	path := "/v1/steps/" + step

	if err := rs[0].SetFault(remotesim.ReplicaFault{Down: true}); err != nil {
		t.Fatal(err)
	}
	if a, err := postTo(t, rs[0].URL(), "k-down", path, stepBody("o1")); err != nil || a.status != http.StatusServiceUnavailable || code(t, a.body) != "replica_down" {
		t.Errorf("down replica answered %+v, %v; want 503 replica_down", a, err)
	}
	if sim.EffectCount("k-down") != 0 || sim.Calls() != 0 {
		t.Errorf("a call to a down replica reached the state")
	}
	if a, err := postTo(t, rs[1].URL(), "k-down", path, stepBody("o1")); err != nil || a.status != http.StatusOK {
		t.Errorf("the other replica answered %+v, %v; want 200", a, err)
	}

	// Down for another step only: this step's calls go through.
	if err := rs[0].SetFault(remotesim.ReplicaFault{Down: true, Step: "charge-payment"}); err != nil {
		t.Fatal(err)
	}
	if a, err := postTo(t, rs[0].URL(), "k-other", path, stepBody("o1")); err != nil || a.status != http.StatusOK {
		t.Errorf("a fault of another step: %+v, %v; want 200", a, err)
	}

	if err := rs[0].SetFault(remotesim.ReplicaFault{Refuse: true}); err != nil {
		t.Fatal(err)
	}
	if a, err := postTo(t, rs[0].URL(), "k-refused", path, stepBody("o1")); err == nil {
		t.Errorf("a refusing replica answered %+v", a)
	}
	if err := rs[0].SetFault(remotesim.ReplicaFault{}); err != nil {
		t.Fatal(err)
	}
	if a, err := postTo(t, rs[0].URL(), "k-back", path, stepBody("o1")); err != nil || a.status != http.StatusOK {
		t.Errorf("back from refusing: %+v, %v; want 200", a, err)
	}

	// A caller that gives up on a slow replica leaves nothing applied.
	if err := rs[0].SetFault(remotesim.ReplicaFault{Slow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rs[0].URL()+path, strings.NewReader(stepBody("o1")))
	req.Header.Set("Idempotency-Key", "k-slow")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a slow replica answered %d before a minute", resp.StatusCode)
	}
	if got := rs[0].Fault().String(); got != "slow (+1m0s)" {
		t.Errorf("fault %q", got)
	}
	if sim.EffectCount("k-slow") != 0 {
		t.Errorf("a call given up on at a slow replica was applied")
	}
}
