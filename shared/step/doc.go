// Package step is the SDK of the steps a workflow runs: what a step is
// given (Request), what it answers (an output, or an error of a kind), and
// how an undo is written (Undoer). The Agent runs a step through it, whether
// the step calls a remote service over HTTP (shared/agent's HTTPService) or
// is Go code of its own (shared/codestep, which adds the idempotency
// ledger).
//
// # Writing a step
//
// A step is a Step: Do gets one try of the step and answers its output, a
// JSON value the later steps receive in Request.Previous under the step's
// name. Func turns a plain function into one.
//
//	func (s *shipper) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
//		var in order
//		if err := req.DecodeInput(&in); err != nil {
//			return nil, err // permanent: the same input fails every try
//		}
//		// The key is stable across every try: pass it on to whatever
//		// takes one, or derive the effect's name from it.
//		if err := s.put(ctx, "shipments/"+req.OrderID+".json", in); err != nil {
//			return nil, err // transient: tried again while time remains
//		}
//		return step.Output(shipment{Key: "shipments/" + req.OrderID + ".json"})
//	}
//
// # Errors
//
// An error is transient unless marked otherwise: the Agent tries the step
// again, with backoff, until the step's deadline. Permanent marks an error
// no retry can fix (the step fails, and the workflow compensates); Reject
// is a permanent error with a fault code of the step's choice, which the
// order's record and the operators see. Uncertain marks an error after
// which the effect may have been applied all the same, so the step is
// undone with the others. Transient only documents intent.
//
// # Deadlines
//
// The context carries the try's deadline: the step's CompleteBy less the
// Agent's margins (Margin, for a code step), and at most the Agent's
// timeout of one try. A step that ignores it keeps running in a Lambda
// whose reply nobody waits for. The order's trace is in it too
// (trace.FromContext), for a callee that joins it.
//
// # Undo
//
// A step that can be undone also implements Undoer. Undo gets a Request
// whose IdempotencyKey is the undo's own key and whose EffectKey is the key
// the effect was applied under; Request.Previous holds the outputs of the
// steps before it and its own. It must answer success when there is
// nothing to undo: an undo may come for an effect that was never applied,
// or whose try ended without an answer.
//
// # Idempotency
//
// A try can run more than once: SQS delivers at least once, and a try whose
// answer was lost is tried again. The IdempotencyKey is the same for every
// try of a step, so a step passes it to any callee that takes one (an
// Idempotency-Key header, a conditional write, an object name derived
// from the order). shared/codestep keeps a ledger under the key, so a code
// step that succeeded is not run again, but an effect whose ledger write
// never happened (the try crashed between the two) runs again: only the
// callee can make that second run harmless.
package step
