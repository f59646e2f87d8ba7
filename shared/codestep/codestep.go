// Package codestep runs a step written in Go (shared/step) as an Agent: it
// wraps the step and the idempotency ledger (statestore.LedgerPort) into the
// agent's Service, so the agent's Handler (retries until CompleteBy, the
// breaker, the reply, silence when late, BatchItemFailures) runs code steps
// as it runs remote ones. Main is a code step's Lambda.
//
// The ledger holds one entry per step and idempotency key. A try claims
// the key for a lease (its own deadline) before it runs the step, and
// records the outcome after: a later try replays a done step's output or a
// rejected step's fault without running it, a try that finds the key held
// by another live try answers "in progress", and a transient failure
// releases the key so the next try runs the step again. An undo marks the
// effect undone, so a late try of the step is refused for good.
//
// What the ledger cannot do is make an effect outside it exactly-once: a
// try that applied its effect and died (or lost the ledger's answer) before
// the ledger write leaves the key running, and once its lease ends the next
// try runs the step again. That window is why a step passes its
// IdempotencyKey to every callee that takes one.
package codestep

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/workflow"
)

// Service runs one code step under the ledger. It is the agent's Service
// and a step.Undoer; an undo of a step that has none is refused with
// agent.CodeNotCompensable.
type Service struct {
	name      string
	step      step.Step
	undoer    step.Undoer
	ledger    statestore.LedgerPort
	clk       clock.Clock
	maxOutput int
	faults    Faults
	owner     func() string
}

var (
	_ agent.Service = (*Service)(nil)
	_ step.Undoer   = (*Service)(nil)
)

// Option changes a Service built by New.
type Option func(*Service)

// WithMaxOutputBytes sets the step's output limit (workflow.Step.OutputLimit,
// the agent Config's MaxOutputBytes); the default is
// workflow.DefaultMaxOutputBytes.
func WithMaxOutputBytes(n int) Option { return func(s *Service) { s.maxOutput = n } }

// Faults are the fault points of a try, for chaos and tests: each, when set
// and true for the try's ledger key, ends the try there as if the Lambda
// had died: no reply, no ledger write after it, and the message delivered
// again (agent.ErrRedeliver). The key held stays running until its lease
// ends.
type Faults struct {
	// AfterEffect: the step (or its undo) has run; its outcome is not yet
	// in the ledger. The next try after the lease runs the step again: the
	// window the ledger cannot close.
	AfterEffect func(key string) bool
	// AfterLedger: the outcome is in the ledger, the reply not sent. The
	// next try replays it.
	AfterLedger func(key string) bool
}

// WithFaults sets the fault points.
func WithFaults(f Faults) Option { return func(s *Service) { s.faults = f } }

// WithOwners replaces the random token each try claims a key under, so a
// test can name the tries.
func WithOwners(next func() string) Option { return func(s *Service) { s.owner = next } }

// New wraps st, the code of step name, with ledger. The clock of deps is
// the ledger's time too: a lease is taken until the try's deadline read
// through it.
func New(name string, st step.Step, ledger statestore.LedgerPort, deps actor.Deps, opts ...Option) (*Service, error) {
	err := actor.Check("code step "+name, nil, actor.Port{Name: "step.Step", Value: st}, actor.Port{Name: "LedgerPort", Value: ledger})
	if err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	s := &Service{name: name, step: st, ledger: ledger, clk: deps.Clock,
		maxOutput: workflow.DefaultMaxOutputBytes, owner: newOwner}
	s.undoer, _ = st.(step.Undoer)
	for _, o := range opts {
		o(s)
	}
	if s.maxOutput <= 0 || s.maxOutput > statestore.MaxLedgerOutputBytes {
		return nil, fmt.Errorf("code step %s: output limit %d must be positive and at most %d",
			name, s.maxOutput, statestore.MaxLedgerOutputBytes)
	}
	return s, nil
}

// ClockSkew is how far apart two functions' clocks may be, which a lease
// allows for. Lambda's execution environment keeps its clock by NTP
// ("Defined runtime environment variables", TZ,
// https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars-runtime.html),
// with no bound stated; the system allows the 2 s its chaos suite runs
// its Schedulers and Supervisors apart.
const ClockSkew = 2 * time.Second

// try is what one try of the step or its undo works with.
type try struct {
	owner      string
	now        time.Time
	leaseUntil time.Time
	// stepDeadline is the step's own: the try's less step.Margin, kept
	// for the ledger write.
	stepDeadline time.Time
}

// begin plans a try from ctx's deadline, which the agent's Handler sets
// (CompleteBy, or the Lambda's end, less its SafetyMargin, and at most
// RemoteTimeout): the lease lasts until it, the step's own context ends
// step.Margin sooner. The deadline is wall-clock time and the ledger's
// times are the clock's, so it becomes a budget from now.
func (s *Service) begin(ctx context.Context) (try, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return try{}, errors.New("a try of a code step needs a deadline")
	}
	left := time.Until(dl)
	if left <= step.Margin {
		return try{}, fmt.Errorf("no time left for a try: %v, the ledger's margin is %v", left, step.Margin)
	}
	now := s.clk.Now()
	// The lease is written in this function's clock and judged by the next
	// try's, in another function: it holds ClockSkew longer than the try,
	// so a clock running behind cannot hand the key on while the step
	// still runs.
	return try{owner: s.owner(), now: now, leaseUntil: now.Add(left + ClockSkew), stepDeadline: dl.Add(-step.Margin)}, nil
}

// Do runs the step under its key: a replay when the ledger knows the
// outcome, in progress when another live try holds it, else the step
// itself, whose outcome the ledger then records.
//
// A try that took the key over from one that left no outcome (it died, or
// its ledger write failed, possibly after the step's effect) runs after an
// effect it cannot see: a permanent refusal then ("already shipped") is
// uncertain, so the order is never undone as if nothing had been applied.
func (s *Service) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
	key := statestore.LedgerKey(s.name, req.IdempotencyKey)
	t, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	held, claimed, err := s.ledger.Begin(ctx, key, t.owner, t.leaseUntil)
	if err != nil {
		return nil, fmt.Errorf("claim %s in the ledger: %w", key, err)
	}
	if !claimed {
		return replay(held, t.now)
	}
	sctx, cancel := context.WithDeadline(ctx, t.stepDeadline)
	out, err := s.step.Do(sctx, req)
	cancel()
	err = afterTakeover(held, err)
	if s.crash(s.faults.AfterEffect, key) {
		return nil, fmt.Errorf("%w: the try of %s died after the step ran", agent.ErrRedeliver, key)
	}
	if err == nil {
		out, err = s.checkOutput(req.Step, out)
	}
	switch {
	case err == nil:
		err = s.ledger.Finish(ctx, key, t.owner, statestore.Outcome{Output: out})
	case step.IsPermanent(err):
		fault := agent.FaultOf(err)
		if ferr := s.ledger.Finish(ctx, key, t.owner, statestore.Outcome{Fault: &fault}); ferr != nil {
			return nil, recordFailed(key, ferr)
		}
		if s.crash(s.faults.AfterLedger, key) {
			return nil, fmt.Errorf("%w: the try of %s died after the ledger write", agent.ErrRedeliver, key)
		}
		return nil, err
	default:
		return nil, s.release(ctx, key, t.owner, err)
	}
	if err != nil {
		return nil, recordFailed(key, err)
	}
	if s.crash(s.faults.AfterLedger, key) {
		return nil, fmt.Errorf("%w: the try of %s died after the ledger write", agent.ErrRedeliver, key)
	}
	return out, nil
}

// Undo undoes the effect recorded under req.EffectKey, once per
// req.IdempotencyKey, and marks the effect undone so a late try of the step
// is refused. The step's Undoer runs whenever the ledger cannot prove the
// effect never happened: a done effect (whose output it gets in
// req.Previous), but also an absent, rejected or abandoned one, since a try
// that failed transiently or died may have applied part of it; it answers
// success when there is nothing to undo (step.Undoer). A live try of the
// step makes the undo wait (in progress).
func (s *Service) Undo(ctx context.Context, req step.Request) (json.RawMessage, error) {
	if s.undoer == nil {
		return nil, step.Reject(agent.CodeNotCompensable, "the code step "+s.name+" has no undo")
	}
	if req.EffectKey == "" {
		return nil, step.Permanent(fmt.Errorf("undo of step %s: no effect key to undo", s.name))
	}
	undoKey := statestore.LedgerKey(s.name, req.IdempotencyKey)
	effectKey := statestore.LedgerKey(s.name, req.EffectKey)
	t, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	held, claimed, err := s.ledger.Begin(ctx, undoKey, t.owner, t.leaseUntil)
	if err != nil {
		return nil, fmt.Errorf("claim %s in the ledger: %w", undoKey, err)
	}
	if !claimed {
		return replay(held, t.now)
	}
	effect, err := s.ledger.Entry(ctx, effectKey)
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		effect = statestore.LedgerEntry{Key: effectKey}
	case err != nil:
		return nil, s.release(ctx, undoKey, t.owner, fmt.Errorf("read %s in the ledger: %w", effectKey, err))
	}
	switch {
	case effect.Live(t.now):
		return nil, s.release(ctx, undoKey, t.owner, inProgress(effect))
	case effect.State == statestore.LedgerDone:
		req.Previous = withOutput(req.Previous, req.Step, effect.Output)
	default:
		// Absent, rejected, abandoned or undone: refuse the step from now
		// on before undoing, so no try can apply it after the undo.
		if _, err := s.ledger.Tombstone(ctx, effectKey); err != nil {
			return nil, s.release(ctx, undoKey, t.owner, fmt.Errorf("refuse %s before its undo: %w", effectKey, err))
		}
	}
	sctx, cancel := context.WithDeadline(ctx, t.stepDeadline)
	out, err := s.undoer.Undo(sctx, req)
	cancel()
	err = afterTakeover(held, err)
	if s.crash(s.faults.AfterEffect, undoKey) {
		return nil, fmt.Errorf("%w: the undo %s died after it ran", agent.ErrRedeliver, undoKey)
	}
	switch {
	case err == nil:
		// An undo that happened is done whatever its output; one the
		// ledger and the reply cannot carry is dropped, as the agent does.
		if out, err = s.checkOutput(req.Step, out); err != nil {
			out = nil
		}
		err = s.ledger.FinishUndo(ctx, effectKey, undoKey, t.owner, out)
	case step.IsPermanent(err):
		fault := agent.FaultOf(err)
		if ferr := s.ledger.Finish(ctx, undoKey, t.owner, statestore.Outcome{Fault: &fault}); ferr != nil {
			return nil, recordFailed(undoKey, ferr)
		}
		if s.crash(s.faults.AfterLedger, undoKey) {
			return nil, fmt.Errorf("%w: the undo %s died after the ledger write", agent.ErrRedeliver, undoKey)
		}
		return nil, err
	default:
		return nil, s.release(ctx, undoKey, t.owner, err)
	}
	if err != nil {
		return nil, recordFailed(undoKey, err)
	}
	if s.crash(s.faults.AfterLedger, undoKey) {
		return nil, fmt.Errorf("%w: the undo %s died after the ledger write", agent.ErrRedeliver, undoKey)
	}
	return out, nil
}

// afterTakeover is the error of a try that claimed e: a permanent one
// after a takeover is uncertain (see Do).
func afterTakeover(e statestore.LedgerEntry, err error) error {
	if err != nil && e.TookOver && step.IsPermanent(err) && !step.IsUncertain(err) {
		return step.Uncertain(err)
	}
	return err
}

// replay answers a try that found the key taken: the recorded outcome, or
// in progress.
func replay(e statestore.LedgerEntry, now time.Time) (json.RawMessage, error) {
	switch e.State {
	case statestore.LedgerDone:
		return e.Output, nil
	case statestore.LedgerRejected:
		f := message.Fault{Code: agent.CodePermanent}
		if e.Fault != nil {
			f = *e.Fault
		}
		err := step.Permanent(&step.FaultError{Code: f.Code, Message: f.Message})
		if f.Uncertain {
			err = step.Uncertain(err)
		}
		return nil, err
	case statestore.LedgerUndone:
		return nil, step.Reject(remote.CodeCompensated, "the step was undone under its key; it is refused from now on")
	}
	return nil, inProgress(e)
}

// inProgress is the answer to a try that finds another holding the key:
// transient, and uncertain, since that other try may apply the step.
func inProgress(e statestore.LedgerEntry) error {
	return step.Uncertain(fmt.Errorf("%w: %s, leased until %s", agent.ErrInProgress, e.Key, e.LeaseUntil.Format(time.RFC3339Nano)))
}

// release gives the key back after a transient failure cause, so a later
// try runs the step again. Should the release fail, the lease ends the
// claim anyway.
func (s *Service) release(ctx context.Context, key, owner string, cause error) error {
	if err := s.ledger.Release(ctx, key, owner); err != nil {
		return fmt.Errorf("%w (and the release of %s failed: %v)", cause, key, err)
	}
	return cause
}

// recordFailed is the error of a try whose outcome the ledger did not take:
// the key stays running until its lease ends (or another try took it
// over), after which a try runs the step again. The effect may have
// happened, so it is uncertain, and transient: the next try finds out.
func recordFailed(key string, err error) error {
	return step.Uncertain(fmt.Errorf("record the outcome of %s in the ledger: %w", key, err))
}

// crash reports whether the fault point f ends the try of key there.
func (s *Service) crash(f func(key string) bool, key string) bool { return f != nil && f(key) }

// checkOutput compacts an output as it will travel and refuses one that is
// not JSON in UTF-8, or over the step's limit: permanently, and
// uncertainly, since the step did run. The ledger keeps the refusal, so
// every later try answers the same.
func (s *Service) checkOutput(stepName string, out json.RawMessage) (json.RawMessage, error) {
	if len(out) == 0 {
		return nil, nil
	}
	compact, err := jsonwire.Compact(out)
	if err != nil || !utf8.Valid(compact) {
		return nil, step.Permanent(step.Uncertain(&step.FaultError{Code: agent.CodeInvalidOutput, Message: "the step's output is not JSON in UTF-8"}))
	}
	if len(compact) > s.maxOutput {
		return nil, step.Permanent(step.Uncertain(&step.FaultError{Code: agent.CodeOutputTooLarge,
			Message: workflow.OutputTooLarge(stepName, len(compact), s.maxOutput)}))
	}
	return compact, nil
}

// withOutput is previous with the step's own output from the ledger, when
// the request carries none (the record may not have it: a step that timed
// out in the Scheduler's view may have finished in the ledger's).
func withOutput(previous map[string]json.RawMessage, stepName string, out json.RawMessage) map[string]json.RawMessage {
	if len(out) == 0 || len(previous[stepName]) > 0 {
		return previous
	}
	next := maps.Clone(previous)
	if next == nil {
		next = map[string]json.RawMessage{}
	}
	next[stepName] = out
	return next
}

// newOwner returns 64 random bits, a try's token: another try takes a
// key for its own once in 2^64 claims.
func newOwner() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("codestep: no randomness for an owner token: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
