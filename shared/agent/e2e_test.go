package agent_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
)

// simHarness is a harness whose service is the real HTTPService, calling
// sim as cfg's remote.
func simHarness(t *testing.T, sim *remotesim.Sim, cfg agent.Config) *harness {
	t.Helper()
	cfg.RemoteBaseURL = serveSim(t, sim)
	return newHarness(t, cfg, agent.NewHTTPService(cfg.RemoteBaseURL, agent.NewHTTPClient(time.Second)))
}

// TestEndToEndExactlyOnceEffect runs the Handler over the real HTTPService
// against the simulator with transient faults, including faults that apply
// the effect and then fail, and delivers requests twice: every key's effect
// must happen exactly once and every delivery must answer the same output.
func TestEndToEndExactlyOnceEffect(t *testing.T) {
	t.Parallel()
	sim := remotesim.New(remotesim.WithSeed(7), remotesim.WithClock(clock.NewFake(t0)),
		remotesim.WithFaults(remotesim.Faults{Transient: 0.3, ApplyThenFail: 0.2}))
	const orders = 6
	key := func(i int) string { return fmt.Sprintf("order-%d/%s", i, testStep) }
	// Order 0's first calls fail deterministically, one after applying.
	sim.Script(key(0), remotesim.Transient, remotesim.ApplyThenFail, remotesim.Transient)

	cfg := testConfig()
	cfg.BreakerFailures = 50
	hs := simHarness(t, sim, cfg)

	var first []events.SQSMessage
	for i := range orders {
		id := fmt.Sprintf("order-%d", i)
		first = append(first, record("m"+id, message.Encode(agentRequest(id, t0))))
	}
	// A duplicate delivery of order 0 within the same batch.
	first = append(first, record("dup-in-batch", message.Encode(agentRequest("order-0", t0))))

	if resp := hs.handle(t, first...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("first batch: failures %v", failedIDs(resp))
	}
	// A later redelivery of order 0, and a later attempt of order 1 (the
	// Supervisor's retry keeps the idempotency key).
	second := []events.SQSMessage{
		record("redelivered", message.Encode(agentRequest("order-0", hs.clk.Now()))),
		record("attempt-3", message.Encode(agentRequest("order-1", hs.clk.Now(), func(m *message.AgentRequest) { m.Attempt = 3 }))),
	}
	if resp := hs.handle(t, second...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("second batch: failures %v", failedIDs(resp))
	}

	for i := range orders {
		if n := sim.EffectCount(key(i)); n != 1 {
			t.Errorf("%s applied %d times, want exactly once", key(i), n)
		}
	}
	if len(sim.Effects()) != orders {
		t.Errorf("effects %v, want %d keys", sim.Effects(), orders)
	}
	deliveries := len(first) + len(second)
	if sim.Calls() <= deliveries {
		t.Errorf("%d calls for %d deliveries: the faults caused no retries", sim.Calls(), deliveries)
	}

	replies := hs.out.replies()
	if len(replies) != deliveries {
		t.Fatalf("%d replies for %d deliveries", len(replies), deliveries)
	}
	outputs := map[string]string{}
	for _, r := range replies {
		if r.Outcome != message.Succeeded {
			t.Errorf("reply %+v, want Succeeded", r)
			continue
		}
		var out remotesim.Output
		if err := json.Unmarshal(r.Output, &out); err != nil || out.OrderID != r.OrderID || out.Step != testStep {
			t.Errorf("output %s of %s: %v", r.Output, r.OrderID, err)
		}
		if prev, ok := outputs[r.OrderID]; ok && prev != string(r.Output) {
			t.Errorf("%s answered %s and %s", r.OrderID, prev, r.Output)
		}
		outputs[r.OrderID] = string(r.Output)
	}
	attempts := map[int]bool{}
	for _, r := range replies {
		if r.OrderID == "order-1" {
			attempts[r.Attempt] = true
		}
	}
	if !attempts[2] || !attempts[3] {
		t.Errorf("order-1 replies carry attempts %v, want 2 and 3", attempts)
	}
}

// TestEndToEndPermanentRejection: a rejected step answers Failed with the
// remote's code, after a single call.
func TestEndToEndPermanentRejection(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	sim.RejectStep(testStep)
	hs := simHarness(t, sim, testConfig())
	if resp := hs.handle(t, record("m1", message.Encode(agentRequest("order-1", t0)))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	r := hs.out.replies()
	if len(r) != 1 || r[0].Outcome != message.Failed || r[0].Fault.Code != "rejected" {
		t.Fatalf("replies %+v, want one Failed with code rejected", r)
	}
	if sim.Calls() != 1 || len(sim.Effects()) != 0 {
		t.Errorf("calls %d effects %v", sim.Calls(), sim.Effects())
	}
}

// TestEndToEndTryTimeout: the remote applies the effect and then hangs; the
// per-try timeout ends the call, the retry gets the stored result.
func TestEndToEndTryTimeout(t *testing.T) {
	t.Parallel()
	sim := remotesim.New()
	sim.Script("order-1/"+testStep, remotesim.ApplyThenHang, remotesim.Hang)
	cfg := testConfig()
	// Long enough for a call that does not hang, under the race detector
	// too; each hanging call costs one.
	cfg.RemoteTimeout = 250 * time.Millisecond
	hs := simHarness(t, sim, cfg)
	if resp := hs.handle(t, record("m1", message.Encode(agentRequest("order-1", t0)))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	if r := hs.out.replies(); len(r) != 1 || r[0].Outcome != message.Succeeded {
		t.Fatalf("replies %+v, want one Succeeded", r)
	}
	if sim.Calls() != 3 || sim.EffectCount("order-1/"+testStep) != 1 {
		t.Errorf("calls %d effects %d, want 3 calls and one effect", sim.Calls(), sim.EffectCount("order-1/"+testStep))
	}
}
