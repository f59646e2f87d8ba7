package localstack

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/sasflow/sas/shared/step"
)

// CodeEffects counts what the code steps did, by idempotency key, as the
// remote simulator counts a remote service's effects: the runs of a step's
// Do that succeeded (its effect), the undos that removed one, and runs of
// one key at the same time, which the ledger must never allow. A key run
// twice one after the other is the ledger's named window: an effect whose
// ledger write never happened (a crash, or a write that failed) runs again
// once its lease ends.
type CodeEffects struct {
	mu         sync.Mutex
	runs       map[string]int
	undos      map[string]int
	present    map[string]bool
	running    map[string]int
	concurrent []string
}

// NewCodeEffects returns an empty count.
func NewCodeEffects() *CodeEffects {
	return &CodeEffects{runs: map[string]int{}, undos: map[string]int{}, present: map[string]bool{}, running: map[string]int{}}
}

// Wrap counts s's runs (wiring.Options.WrapStep); it keeps s's undo, if it
// has one.
func (c *CodeEffects) Wrap(_ string, s step.Step) step.Step {
	if u, ok := s.(step.Undoer); ok {
		return &countedUndoer{countedStep{c, s}, u}
	}
	return &countedStep{c, s}
}

// Snapshot returns the counts: runs and undos by key, the keys whose effect
// is in place, and the keys run twice at once.
func (c *CodeEffects) Snapshot() (runs, undos map[string]int, present map[string]bool, concurrent []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	runs, undos, present = map[string]int{}, map[string]int{}, map[string]bool{}
	for k, v := range c.runs {
		runs[k] = v
	}
	for k, v := range c.undos {
		undos[k] = v
	}
	for k, v := range c.present {
		present[k] = v
	}
	return runs, undos, present, append([]string(nil), c.concurrent...)
}

type countedStep struct {
	c *CodeEffects
	s step.Step
}

func (w *countedStep) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
	key := req.IdempotencyKey
	w.c.mu.Lock()
	w.c.running[key]++
	if w.c.running[key] > 1 {
		w.c.concurrent = append(w.c.concurrent, key)
	}
	w.c.mu.Unlock()
	out, err := w.s.Do(ctx, req)
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.running[key]--
	if err == nil {
		w.c.runs[key]++
		w.c.present[key] = true
	}
	return out, err
}

type countedUndoer struct {
	countedStep
	u step.Undoer
}

func (w *countedUndoer) Undo(ctx context.Context, req step.Request) (json.RawMessage, error) {
	out, err := w.u.Undo(ctx, req)
	if err == nil {
		w.c.mu.Lock()
		defer w.c.mu.Unlock()
		// An undo of an effect never applied succeeds with nothing to do.
		if w.c.present[req.EffectKey] {
			w.c.undos[req.EffectKey]++
			w.c.present[req.EffectKey] = false
		}
	}
	return out, err
}
