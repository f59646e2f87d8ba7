package localstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/workflow"
)

// DemoRetryWait is the extended wait of the wait demo's waiting step.
const DemoRetryWait = 20 * time.Second

// WithRetryWait is cat with every step whose retry policy waits waiting
// wait instead (the wait demo's DemoRetryWait), as often as the same step
// of the same version of orig says (Scaled allows one wait).
func WithRetryWait(cat, orig workflow.Catalog, wait time.Duration) workflow.Catalog {
	out := cat
	out.Definitions = make([]workflow.Definition, len(cat.Definitions))
	for i, d := range cat.Definitions {
		steps := make([]workflow.Step, len(d.Steps))
		for j, s := range d.Steps {
			if r := s.Retry; r != nil && r.OnExhausted == workflow.ExhaustedWait {
				short := *r
				short.Wait = wait
				if o, err := orig.Resolve(d.ID()); err == nil && j < len(o.Steps) && o.Steps[j].Retry != nil {
					short.WaitRounds = o.Steps[j].Retry.WaitRounds
				}
				s.Retry = &short
			}
			steps[j] = s
		}
		d.Steps = steps
		out.Definitions[i] = d
	}
	return out
}

// WaitDemo shows a step's extended wait (make demo WAIT=1): one order on
// the default workflow's current version, whose waiting step's remote is
// down (every call hangs) until the order waits; then the remote heals,
// and the Supervisor hands the step back at the end of the wait, and the
// order finishes.
type WaitDemo struct {
	Stack    *Stack
	Progress io.Writer
	RunID    string
	Timeout  time.Duration
}

// Run runs the demo; it fails unless the order waited and then was
// processed.
func (w WaitDemo) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	def, err := w.Stack.workflows.ForNew("")
	if err != nil {
		return err
	}
	m := workflow.Machine{Def: def, Policy: w.Stack.policy}
	step, k := "", -1
	for i, s := range def.Steps {
		if r := s.Retry; r != nil && r.OnExhausted == workflow.ExhaustedWait {
			step, k = s.Name, i
			break
		}
	}
	if step == "" {
		return fmt.Errorf("wait demo: %s has no step whose retry policy waits (shared/catalog/workflows.json, \"onExhausted\": \"wait\")", def.ID())
	}
	r := def.Steps[k].Retry
	fmt.Fprintf(w.Progress, "wait demo: %s, step %s fails %d times, then waits %v (up to %d times) before it is tried again\n",
		def.ID(), step, m.MaxFailuresOf(k), r.Wait, r.WaitRounds)
	if err := w.Stack.Sim.SetFaults(remotesim.Faults{HangSteps: []string{step}}); err != nil {
		return err
	}
	fmt.Fprintf(w.Progress, "the remote's %s is down: every call hangs\n", step)
	d := Demo{Stack: w.Stack, RunID: w.RunID}
	id, status, err := d.post(ctx, &http.Client{Timeout: 10 * time.Second}, 0)
	if err != nil {
		return err
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("wait demo: POST /orders answered %d", status)
	}
	fmt.Fprintf(w.Progress, "order %s accepted\n", id)
	var seen workflow.ProcessState
	st, err := w.await(ctx, id, &seen, func(s workflow.State) bool { return s.ProcessState == workflow.Waiting || s.ProcessState.Terminal() })
	if err != nil {
		return err
	}
	if st.ProcessState != workflow.Waiting {
		return fmt.Errorf("wait demo: order %s is %s, not waiting", id, st.ProcessState)
	}
	fmt.Fprintf(w.Progress, "order %s is %s (client status %s): step %s failed %d times; wait %d of %d, tried again at %s (in %v)\n",
		id, st.ProcessState, workflow.StatusOf(st), st.Step, st.Steps[k].Failures, st.WaitRound, r.WaitRounds,
		st.CompleteBy.Format(time.RFC3339), time.Until(st.CompleteBy).Round(time.Second))
	if err := w.Stack.Sim.SetFaults(remotesim.Faults{}); err != nil {
		return err
	}
	fmt.Fprintf(w.Progress, "the remote's %s is back; nothing runs until the wait is over\n", step)
	st, err = w.await(ctx, id, &seen, func(s workflow.State) bool { return s.ProcessState.Terminal() })
	if err != nil {
		return err
	}
	fmt.Fprintf(w.Progress, "order %s is %s: step %s took %d attempts, %d of them failed\n",
		id, st.ProcessState, step, st.Steps[k].Attempts, st.Steps[k].Failures)
	if st.ProcessState != workflow.Processed {
		return fmt.Errorf("wait demo: order %s ended %s, want Processed", id, st.ProcessState)
	}
	return nil
}

// await polls the order's record until done says so, printing each state
// it sees the order in after last, the one seen before.
func (w WaitDemo) await(ctx context.Context, id string, last *workflow.ProcessState, done func(workflow.State) bool) (workflow.State, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := w.Stack.Direct.GetState(ctx, id)
		if err != nil && !errors.Is(err, workflow.ErrNotFound) {
			return st, err
		}
		if err == nil {
			if st.ProcessState != *last {
				fmt.Fprintf(w.Progress, "  %s  %s at step %s, attempt %d\n", time.Now().Format(time.TimeOnly), st.ProcessState, st.Step, st.Attempt)
				*last = st.ProcessState
			}
			if done(st) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("wait demo: order %s: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}
