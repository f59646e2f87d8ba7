package remotesim

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/sasflow/sas/shared/remote"
)

// DecodeCompensateRequest reads a compensation request (shared/remote's
// contract) strictly, as DecodeStepRequest does, and checks it against the
// step named in the path; EffectKey is bounded like an Idempotency-Key.
func DecodeCompensateRequest(r io.Reader, step string) (remote.CompensateRequest, error) {
	return decodeRequest[remote.CompensateRequest](r, step)
}

// Undo is the body of a successful compensation. Undone is false when there
// was nothing to undo: the effect was never applied, and now never will be.
// Like Output it is this service's answer, not the contract's: the system
// keeps an undo's output for operators and reads nothing in it.
type Undo struct {
	Confirmation string    `json:"confirmation"`
	OrderID      string    `json:"orderId"`
	Step         string    `json:"step"`
	EffectKey    string    `json:"effectKey"`
	Undone       bool      `json:"undone"`
	UndoneAt     time.Time `json:"undoneAt,omitzero"`
}

func (s *Sim) serveCompensate(w http.ResponseWriter, r *http.Request) {
	step, key, req, ok := admit(s, w, r, DecodeCompensateRequest)
	if !ok {
		return
	}
	if req.EffectKey == key {
		// Sharing the effect's key would make the undo a replay of the step.
		writeProblem(w, http.StatusBadRequest, "bad_request", "the compensation needs an Idempotency-Key other than its effectKey")
		return
	}
	rejection := fmt.Sprintf("compensation of step %s of order %s rejected", step, req.OrderID)
	s.serve(w, r, key, Injection{OrderID: req.OrderID, Step: step, Undo: true}, func(f Faults) bool { return slices.Contains(f.RejectUndo, step) },
		func() outcome { return s.refuse(routeCompensate, key, req, rejection) },
		func() outcome { return s.undo(key, req) })
}

// undo undoes the effect under req.EffectKey unless the compensation key
// already has a result, which it replays. With nothing applied it leaves a
// tombstone instead, which apply honours. Check and undo happen under one
// lock, so concurrent compensations with one key cannot both undo, and a try
// of the step cannot slip in between the check and the tombstone.
func (s *Sim) undo(key string, req remote.CompensateRequest) outcome {
	return s.once(routeCompensate, key, req, func(hash string) outcome {
		if s.inProgress[req.EffectKey] > 0 {
			// The effect may be applied any moment: undoing it now could miss
			// it, so the undo is retried until it settles.
			return outcome{status: http.StatusServiceUnavailable, code: remote.CodeInProgress,
				msg: fmt.Sprintf("the effect %s is still in progress; try again", req.EffectKey)}
		}
		u := Undo{
			Confirmation: req.Step + "-undo-" + shortHash(key),
			OrderID:      req.OrderID,
			Step:         req.Step,
			EffectKey:    req.EffectKey,
		}
		if s.effects[req.EffectKey] > 0 {
			// Undoing another step's or order's effect is a caller's bug; a real
			// service would not refund a charge under the wrong order either.
			if eff := s.results[req.EffectKey]; eff.orderID != req.OrderID || eff.step != req.Step {
				return outcome{status: http.StatusUnprocessableEntity, code: "effect_mismatch",
					msg: fmt.Sprintf("effect %s belongs to step %s of order %s", req.EffectKey, eff.step, eff.orderID)}
			}
			s.compensations[req.EffectKey]++
			u.Undone, u.UndoneAt = true, s.clk.Now().UTC()
		} else {
			s.tombstones[req.EffectKey] = true
		}
		return s.store(key, hash, req.OrderID, req.Step, u)
	})
}
