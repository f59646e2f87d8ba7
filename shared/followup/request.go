package followup

import (
	"encoding/json"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Request is the agent request of the step, or the undo, a record has
// claimed: what the Scheduler dispatches after a claim, and the Submission
// after it claimed an order's first step in its own write. An undo gets the
// outputs of its own step and of those before it: the per-step results kept
// in the record say what to undo (the reservation to release, the charge
// to refund).
func Request(st workflow.State) message.AgentRequest {
	undo := st.ProcessState.Undoing()
	upTo := st.StepIndex
	if undo {
		upTo++
	}
	previous := map[string]json.RawMessage{}
	for _, s := range st.Steps[:min(upTo, len(st.Steps))] {
		if len(s.Output) > 0 {
			previous[s.Name] = s.Output
		}
	}
	req := message.AgentRequest{
		V: message.Version, Kind: message.KindAgentRequest,
		OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex, Attempt: st.Attempt,
		CompleteBy:     st.CompleteBy,
		IdempotencyKey: workflow.IdempotencyKey(st.OrderID, st.Step),
		Input:          st.Input,
		Previous:       previous,
	}
	if undo {
		req.Action = message.Compensate
		req.EffectKey = req.IdempotencyKey
		req.IdempotencyKey = workflow.CompensationKey(st.OrderID, st.Step)
	}
	return req
}
