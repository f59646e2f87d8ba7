package step

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/message"
)

// Request is one try of a step, or of its undo.
type Request struct {
	OrderID   string
	Step      string
	StepIndex int
	Attempt   int
	// Action is message.Compensate for an undo; Perform otherwise.
	Action message.Action
	// IdempotencyKey is stable across every try of the step; pass it to
	// any callee that takes one. An undo has a key of its own.
	IdempotencyKey string
	// EffectKey, for an undo, is the key the effect was applied under.
	EffectKey string
	// Input is the order's input.
	Input json.RawMessage
	// Previous holds the outputs of the steps before this one by step name,
	// and for an undo the step's own output too.
	Previous map[string]json.RawMessage
}

// DecodeInput decodes the order's input into v strictly: one JSON value,
// no member v's type lacks, nothing after it. A refusal is permanent, since
// every try gets the same input.
func (r Request) DecodeInput(v any) error {
	if err := jsonstrict.Decode(r.Input, v); err != nil {
		return Permanent(fmt.Errorf("decode the input of step %s of order %s: %w", r.Step, r.OrderID, err))
	}
	return nil
}

// Step performs one step of a workflow. Do answers the step's output, a
// JSON value (nil for none), or an error: transient unless marked
// Permanent (see the package doc).
type Step interface {
	Do(ctx context.Context, req Request) (json.RawMessage, error)
}

// Undoer is implemented by steps that can be undone. Undo undoes the
// effect applied under req.EffectKey, at most once per req.IdempotencyKey,
// and answers success when there was nothing to undo. Its errors are
// classified as Do's are.
type Undoer interface {
	Undo(ctx context.Context, req Request) (json.RawMessage, error)
}

// Func adapts a function to Step.
type Func func(ctx context.Context, req Request) (json.RawMessage, error)

// Do calls f.
func (f Func) Do(ctx context.Context, req Request) (json.RawMessage, error) { return f(ctx, req) }

var _ Step = Func(nil)

// Output marshals v as a step's output, as it travels (no HTML escaping, so
// the output has one size in every message and in the record). A value
// that does not marshal is a permanent error: it would not on any try.
func Output(v any) (json.RawMessage, error) {
	b, err := jsonwire.Marshal(v)
	if err != nil {
		return nil, Permanent(fmt.Errorf("marshal the step's output: %w", err))
	}
	return b, nil
}

// Margin is what a code step's try keeps back from its deadline after the
// step's Do returns: the ledger write that records its outcome (one
// conditional write, or one transaction for an undo, a few tens of
// milliseconds, with room for an SDK retry) must land while the try still
// holds the key. The Agent keeps its own SafetyMargin for the reply on top.
const Margin = 250 * time.Millisecond

// Env is what a code step's constructor is given: its environment (the
// variables its manifest declares) and the AWS configuration its clients
// are built from (in the local stack, pointed at the local engines).
type Env struct {
	// Getenv reads a variable: os.Getenv in Lambda, a map locally.
	Getenv func(name string) string
	// AWS is the configuration of the step's AWS clients.
	AWS aws.Config
}

// New builds a code step once per Lambda container (or local stack):
// clients and configuration, read from env. An error stops the function at
// its cold start.
type New func(ctx context.Context, env Env) (Step, error)
