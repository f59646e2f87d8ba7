package codestep_test

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/codestep"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/workflow"
)

const responses = "https://sqs.example.com/123/responses"

// replies records the replies the Handler sends.
type replies struct {
	mu   sync.Mutex
	sent []message.AgentReply
	t    *testing.T
}

func (r *replies) Send(_ context.Context, _, body string, _ time.Duration) error {
	m, err := message.DecodeAgentReply(body)
	if err != nil {
		r.t.Errorf("an invalid reply %s: %v", body, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, m)
	return nil
}

func (r *replies) all() []message.AgentReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]message.AgentReply(nil), r.sent...)
}

// handler is the agent's Handler around a code step, as Main wires it,
// with sleep between tries.
func handler(t *testing.T, f fixture, sleep agent.SleepFunc) (*agent.Handler, *replies) {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.Step, cfg.Code, cfg.ResponseQueueURL, cfg.RequestQueueURL = stepName, true, responses, "https://sqs.example.com/123/steps-"+stepName
	out := &replies{t: t}
	h, err := agent.New(cfg, f.svc, out, actor.Deps{Clock: f.clk}, agent.WithSleep(sleep))
	if err != nil {
		t.Fatal(err)
	}
	return h, out
}

// record is an SQS record of the step's request for orderID.
func record(f fixture, orderID, messageID string) events.SQSMessage {
	r := request(orderID)
	m := message.AgentRequest{V: message.Version, Kind: message.KindAgentRequest, OrderID: orderID, Workflow: "order-v3",
		Step: stepName, StepIndex: r.StepIndex, Attempt: r.Attempt, CompleteBy: f.clk.Now().Add(20 * time.Second),
		IdempotencyKey: r.IdempotencyKey, Input: r.Input}
	return events.SQSMessage{MessageId: messageID, Body: message.Encode(m), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

// TestTwoDeliveriesInOneBatchRunTheEffectOnce: the Handler tries both
// copies at once; the one that finds the key held retries until the other
// recorded the outcome, and both reply with the same output.
func TestTwoDeliveriesInOneBatchRunTheEffectOnce(t *testing.T) {
	t.Parallel()
	waited := make(chan struct{})
	var once sync.Once
	st := &counted{do: func(ctx context.Context, _ int, _ step.Request) (json.RawMessage, error) {
		select {
		case <-waited: // the other copy found the key held
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(`{"shipment":"shipments/o-1.json"}`), nil
	}}
	f := newFixture(t, st)
	// The retry waits cost nothing and leave the clock alone, so the lease
	// holds while the first copy runs.
	h, out := handler(t, f, func(ctx context.Context, _ time.Duration) error {
		once.Do(func() { close(waited) })
		runtime.Gosched()
		return ctx.Err()
	})
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(f, "o-1", "m-1"), record(f, "o-1", "m-2")}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want every record done", resp, err)
	}
	got := out.all()
	if len(got) != 2 {
		t.Fatalf("%d replies, want one per copy", len(got))
	}
	for i, r := range got {
		if r.Outcome != message.Succeeded || string(r.Output) != `{"shipment":"shipments/o-1.json"}` {
			t.Errorf("reply %d: %+v, want the one output", i, r)
		}
	}
	if runs, _ := st.counts(); runs != 1 {
		t.Fatalf("the effect ran %d times, want once", runs)
	}
}

// TestACrashIsRedeliveredWithoutAReply: a try that dies (a fault point)
// sends nothing and leaves its message to come back; the redelivery, once
// the lease has ended, completes the step.
func TestACrashIsRedeliveredWithoutAReply(t *testing.T) {
	t.Parallel()
	st := &counted{}
	crashed := false
	f := newFixture(t, st, codestep.WithFaults(codestep.Faults{AfterEffect: func(string) bool {
		was := crashed
		crashed = true
		return !was
	}}))
	h, out := handler(t, f, func(ctx context.Context, _ time.Duration) error { return ctx.Err() })
	resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(f, "o-1", "m-1")}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-1" || len(out.all()) != 0 {
		t.Fatalf("the crashed try: failures %+v, replies %+v; want m-1 back and no reply", resp.BatchItemFailures, out.all())
	}
	// SQS brings it back after its visibility timeout, past the lease
	// and the clock skew it allows.
	f.clk.Advance(agent.DefaultRemoteTimeout + codestep.ClockSkew)
	resp, _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(f, "o-1", "m-1")}})
	if len(resp.BatchItemFailures) != 0 || len(out.all()) != 1 || out.all()[0].Outcome != message.Succeeded {
		t.Fatalf("the redelivery: failures %+v, replies %+v; want one success", resp.BatchItemFailures, out.all())
	}
	if runs, _ := st.counts(); runs != 2 {
		t.Fatalf("the step ran %d times, want twice (the window)", runs)
	}
}

// TestAnUndoThroughTheHandler: the Handler sends an undo to the code
// step's Undo, and a late copy of the step is refused with the fault the
// remote contract names.
func TestAnUndoThroughTheHandler(t *testing.T) {
	t.Parallel()
	st := &counted{}
	f := newFixture(t, st)
	h, out := handler(t, f, func(ctx context.Context, _ time.Duration) error { return ctx.Err() })
	undo := record(f, "o-1", "m-undo")
	m, err := message.DecodeAgentRequest(undo.Body)
	if err != nil {
		t.Fatal(err)
	}
	m.Action, m.EffectKey, m.IdempotencyKey = message.Compensate, m.IdempotencyKey, workflow.CompensationKey("o-1", stepName)
	undo.Body = message.Encode(m)
	for i, rec := range []events.SQSMessage{record(f, "o-1", "m-1"), undo, record(f, "o-1", "m-late")} {
		if resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}}); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("record %d came back: %+v", i, resp)
		}
	}
	got := out.all()
	if len(got) != 3 || got[0].Outcome != message.Succeeded || got[1].Outcome != message.Succeeded || got[1].Action != message.Compensate ||
		got[2].Outcome != message.Failed || got[2].Fault.Code != remote.CodeCompensated {
		t.Fatalf("replies %+v; want the step, its undo, and the late copy refused", got)
	}
	if runs, undos := st.counts(); runs != 1 || undos != 1 {
		t.Fatalf("ran %d, undid %d; want once each", runs, undos)
	}
}
