package wiring_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/workflow"
)

// threeSteps is the default workflow plus a last step, so a failure late in
// the workflow has two completed steps to undo.
func threeSteps() workflow.Definition {
	d := workflow.Reference()
	d.Name = "order-v1-ship"
	d.Steps = append(d.Steps, workflow.Step{Name: "ship-order", Budget: 30 * time.Second, Compensable: true})
	return d
}

func TestLateStepFailureUndoesCompletedStepsInReverse(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var undos []string
	e := newEnv(t, envOptions{workflow: threeSteps(), onRemote: func(r *http.Request) {
		if step, ok := strings.CutSuffix(r.URL.Path, "/compensate"); ok {
			mu.Lock()
			undos = append(undos, strings.TrimPrefix(step, "/v1/steps/"))
			mu.Unlock()
		}
	}})
	e.sim.RejectStep("ship-order")
	id, st := e.run()
	if st.ProcessState != workflow.Compensated || st.Step != "reserve-inventory" || !strings.Contains(st.LastError, "rejected") || st.AlertPending {
		t.Fatalf("final %+v", st)
	}
	for i, want := range []struct{ state, undo workflow.StepState }{
		{workflow.StepSucceeded, workflow.StepSucceeded},
		{workflow.StepSucceeded, workflow.StepSucceeded},
		// A rejection does not prove nothing was applied (a copy of the
		// request may still arrive), so the rejected step is undone too:
		// the remote finds nothing and refuses the key from then on.
		{workflow.StepFailed, workflow.StepSucceeded},
	} {
		if got := st.Steps[i]; got.State != want.state || got.Compensation != want.undo {
			t.Errorf("step %d: %+v, want state %s compensation %q", i, got, want.state, want.undo)
		}
	}
	mu.Lock()
	got := strings.Join(undos, ",")
	mu.Unlock()
	if got != "ship-order,charge-payment,reserve-inventory" {
		t.Fatalf("compensations called in order %q, want the last step first", got)
	}
	if !st.Steps[1].CompensatedAt.Before(*st.Steps[0].CompensatedAt) && !st.Steps[1].CompensatedAt.Equal(*st.Steps[0].CompensatedAt) {
		t.Fatalf("recorded undo times out of order: %v then %v", st.Steps[1].CompensatedAt, st.Steps[0].CompensatedAt)
	}
	e.assertRemote(id, "reserve-inventory", 1, 1)
	e.assertRemote(id, "charge-payment", 1, 1)
	if key := workflow.IdempotencyKey(id, "ship-order"); e.sim.EffectCount(key) != 0 || !strings.Contains(string(st.Steps[2].CompensationOutput), `"undone":false`) {
		t.Errorf("ship-order: effects %d, undo %s; want nothing applied and nothing undone", e.sim.EffectCount(key), st.Steps[2].CompensationOutput)
	}
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted: 1, workflow.TransitionStepCompleted: 2,
		workflow.TransitionCompensating: 1, workflow.TransitionUndone: 2, workflow.TransitionCompensated: 1,
	})
	// Compensated needs nobody: no alert.
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.alerts.URL, 300*time.Millisecond)
}

// failAtCharge runs an order until the Scheduler has committed the permanent
// failure of charge-payment, undone charge-payment itself (the remote found
// nothing to undo), and dispatched the compensation of reserve-inventory,
// which the test then controls.
func failAtCharge(t *testing.T, e *env) string {
	t.Helper()
	e.sim.RejectStep("charge-payment")
	id := e.submit("")
	e.poll(0) // claim reserve-inventory
	e.poll(2) // its agent
	e.poll(1) // commit, claim charge-payment
	e.poll(3) // its agent: rejected
	e.poll(1) // commit the failure, claim the compensation of charge-payment
	e.poll(3) // its agent: nothing to undo
	e.poll(1) // commit it, claim the compensation of reserve-inventory
	if st := e.state(id); st.ProcessState != workflow.Compensating || st.StepIndex != 0 {
		t.Fatalf("after the failure: %s", brief(st))
	}
	return id
}

func TestCompensationThatTimesOutIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	id := failAtCharge(t, e)
	// The agent dies with the compensation request.
	e.dropAgentRequests("reserve-inventory", 1)
	e.expire(id)
	e.supervise()
	if st := e.state(id); st.ProcessState != workflow.CompensationPending || st.FailureCount != 1 || st.Steps[0].CompensationFailures != 1 {
		t.Fatalf("after the timeout: %+v", st)
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Compensated || st.Steps[0].CompensationAttempts != 2 || st.Steps[0].Compensation != workflow.StepSucceeded {
		t.Fatalf("final %+v", st)
	}
	e.assertRemote(id, "reserve-inventory", 1, 1)
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted: 1, workflow.TransitionClaimed: 1, workflow.TransitionStepCompleted: 1,
		workflow.TransitionCompensating: 1, workflow.TransitionUndone: 1, workflow.TransitionRetried: 1, workflow.TransitionCompensated: 1,
	})
}

func TestCompensationThatKeepsTimingOutAlertsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	id := failAtCharge(t, e)
	for i := range e.policy.MaxFailures {
		if i > 0 {
			e.poll(0)
		}
		e.dropAgentRequests("reserve-inventory", 1)
		e.expire(id)
		e.supervise()
	}
	st := e.state(id)
	if st.ProcessState != workflow.CompensationFailed || st.AlertPending || st.Steps[0].Compensation != workflow.StepFailed ||
		st.Steps[0].CompensationFailures != e.policy.MaxFailures {
		t.Fatalf("final %+v", st)
	}
	a := e.alertsReceived(1)[0]
	if a.MessageAttributes["kind"].Value != "compensation-failed" || !strings.Contains(a.Message, "sasctl retry "+id) ||
		!strings.Contains(a.Message, "sasctl show "+id) {
		t.Fatalf("alert %+v", a)
	}
	e.clk.Advance(time.Hour)
	e.supervise()
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.alerts.URL, 300*time.Millisecond)
}

func TestCompensationThatFailsPermanentlyWaitsForAnOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	e.sim.RejectUndo("reserve-inventory")
	id := failAtCharge(t, e)
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.CompensationFailed || !strings.Contains(st.Steps[0].CompensationError, "rejected") {
		t.Fatalf("final %+v", st)
	}
	a := e.alertsReceived(1)[0]
	if a.MessageAttributes["kind"].Value != "compensation-failed" || !strings.Contains(a.Message, "sasctl retry "+id) {
		t.Fatalf("alert %+v", a)
	}
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted: 1, workflow.TransitionStepCompleted: 1,
		workflow.TransitionCompensating: 1, workflow.TransitionUndone: 1, workflow.TransitionCompensationFailed: 1,
	})
}

func TestStepGivenUpOnIsUndoneItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	id := e.submit("")
	for range e.policy.MaxFailures {
		e.poll(0)
		e.dropAgentRequests("reserve-inventory", 1)
		e.expire(id)
		e.supervise()
	}
	// Whether the lost tries applied anything is unknown, so the step's own
	// compensation runs: the remote finds nothing to undo and from then on
	// refuses the effect, should a lost try still arrive.
	if st := e.state(id); st.ProcessState != workflow.CompensationPending || st.StepIndex != 0 || st.Steps[0].Failures != e.policy.MaxFailures {
		t.Fatalf("after giving up: %+v", st)
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Compensated || st.Steps[0].Compensation != workflow.StepSucceeded ||
		!strings.Contains(string(st.Steps[0].CompensationOutput), `"undone":false`) {
		t.Fatalf("final %+v", st)
	}
	e.assertRemote(id, "reserve-inventory", 0, 0)
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted: 1, workflow.TransitionClaimed: 3, workflow.TransitionRetried: 2,
		workflow.TransitionCompensating: 1, workflow.TransitionCompensated: 1,
	})
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.alerts.URL, 300*time.Millisecond)
}
