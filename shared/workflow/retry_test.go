package workflow

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// waitingMachine runs a two-step definition whose first step has its own
// retry policy: two failures, a backoff of 2s..4s, then up to two waits
// of 30 minutes; its second step keeps the global policy.
func waitingMachine() Machine {
	return Machine{Policy: testPol, Def: Definition{Name: "w", Version: 1, Steps: []Step{
		{Name: "a", Budget: 30 * time.Second, Compensable: true, Retry: &Retry{MaxFailures: ptr(2), BackoffBase: ptr(2 * time.Second),
			BackoffMax: ptr(4 * time.Second), OnExhausted: ExhaustedWait, Wait: 30 * time.Minute, WaitRounds: 2}},
		{Name: "b", Budget: 30 * time.Second, Compensable: true},
	}}}
}

// TestStepRetryPolicy plays a step with its own policy through its
// threshold, its waits and their end, as the Supervisor and the
// Scheduler raise the events, and checks each record.
func TestStepRetryPolicy(t *testing.T) {
	t.Parallel()
	m := waitingMachine()
	s := m.Accept("o-1", json.RawMessage(`{}`), "sched", mt0)
	timeout := func(s State) (State, Change) {
		c, ok := m.Expired(s, s.CompleteBy)
		if !ok {
			t.Fatalf("%s record not due at its CompleteBy", s.ProcessState)
		}
		return apply(t, s, c), c
	}
	claimIt := func(s State) State {
		return apply(t, s, m.Claim(s.OrderID, s.StepIndex, false, "sched", s.CompleteBy.Add(-time.Second)))
	}
	for round := 1; round <= 2; round++ {
		var c Change
		s, c = timeout(s)
		if s.ProcessState != Pending || c.Transition != TransitionRetried || c.Handback.Delay != 2*time.Second || s.FailureCount != 1 {
			t.Fatalf("round %d, first timeout: %s, %s, handback %+v, failures %d; want a retry after the step's 2s backoff",
				round, s.ProcessState, c.Transition, c.Handback, s.FailureCount)
		}
		s = claimIt(s)
		at := s.CompleteBy
		s, c = timeout(s)
		if s.ProcessState != Waiting || c.Transition != TransitionWaiting || c.Notice != AlertWaiting || c.Alert != "" ||
			s.FailureCount != 0 || s.WaitRound != round || !s.CompleteBy.Equal(at.Add(30*time.Minute)) || !s.InFlight ||
			StatusOf(s) != StatusWaiting || c.Handback != nil || c.MaxFailures != 2 {
			t.Fatalf("round %d, second timeout: %+v\nchange %+v; want Waiting for 30m, round %d, with a notice", round, s, c, round)
		}
		if c.Notice.Severity() != SeverityWarning {
			t.Fatalf("a waiting notice has severity %s", c.Notice.Severity())
		}
		if _, ok := m.Expired(s, s.CompleteBy.Add(-time.Millisecond)); ok {
			t.Fatal("a wait ended before its CompleteBy")
		}
		s, c = timeout(s)
		if s.ProcessState != Pending || c.Handback == nil || c.Handback.Reason != "wait-over" || c.Handback.Delay != 0 ||
			s.WaitRound != round || s.Steps[0].State != StepPending {
			t.Fatalf("round %d, wait over: %+v\nchange %+v; want Pending, handed back at once", round, s, c)
		}
		s = claimIt(s)
	}
	// The waits are used up: the step gives up as any other, into its
	// compensation (it may have been applied).
	s, _ = timeout(s)
	s = claimIt(s)
	s, c := timeout(s)
	if s.ProcessState != CompensationPending || c.Transition != TransitionCompensating || s.WaitRound != 0 || s.Steps[0].Attempts != 6 {
		t.Fatalf("after the last wait: %+v\nchange %+v; want the compensation after 6 attempts", s, c)
	}
	// The undo keeps the step's threshold but never waits.
	s = apply(t, s, m.Claim(s.OrderID, 0, true, "sched", s.CompleteBy.Add(-time.Second)))
	s, _ = timeout(s)
	s = apply(t, s, m.Claim(s.OrderID, 0, true, "sched", s.CompleteBy.Add(-time.Second)))
	s, c = timeout(s)
	if s.ProcessState != CompensationFailed || c.Alert != AlertCompensationFailed || c.Alert.Severity() != SeverityError {
		t.Fatalf("the undo's second timeout: %s, alert %q; want CompensationFailed", s.ProcessState, c.Alert)
	}
}

// TestWaitingOrderOperators: an operator retries a waiting order at once,
// with its whole policy again, or cancels it into its compensation.
func TestWaitingOrderOperators(t *testing.T) {
	t.Parallel()
	m := waitingMachine()
	s := m.Accept("o-1", json.RawMessage(`{}`), "sched", mt0)
	for s.ProcessState != Waiting {
		c, _ := m.Expired(s, s.CompleteBy)
		s = apply(t, s, c)
		if s.ProcessState == Pending {
			s = apply(t, s, m.Claim(s.OrderID, 0, false, "sched", s.CompleteBy.Add(-time.Second)))
		}
	}
	now := s.UpdatedAt.Add(time.Minute)
	r := apply(t, s, mustChange(m.Resubmit(s, now)))
	if r.ProcessState != Pending || r.WaitRound != 0 || r.FailureCount != 0 || r.Resubmits != 1 || !r.CompleteBy.Equal(now.Add(testPol.ClaimTimeout)) {
		t.Fatalf("resubmitted waiting order: %+v", r)
	}
	if !CanCancel(s) {
		t.Fatal("a waiting order cannot be cancelled")
	}
	c := apply(t, s, mustChange(m.Cancel(s, now, now.Add(time.Minute))))
	if c.ProcessState != CompensationPending || !c.Cancelled || c.WaitRound != 0 || c.Steps[0].State != StepCancelled {
		t.Fatalf("cancelled waiting order: %+v", c)
	}
	// The Supervisor ending the wait first: the operator's change is stale.
	over, _ := m.Expired(s, s.CompleteBy)
	moved := apply(t, s, over)
	if res := mustChange(m.Resubmit(s, now)); res.Fence.Admits(moved) {
		t.Fatal("a resubmission decided on the waiting record applies after the wait ended")
	}
}

// TestAlertOfUsesTheStepsThreshold: an order in Error after as many
// timeouts as the global threshold, on a step allowed more, stopped on a
// permanent fault, not on its retries; and one at the step's own
// threshold exhausted them.
func TestAlertOfUsesTheStepsThreshold(t *testing.T) {
	t.Parallel()
	m := Machine{Policy: testPol, Def: Definition{Name: "w", Version: 1, Steps: []Step{
		{Name: "a", Budget: time.Minute, Retry: &Retry{MaxFailures: ptr(5)}}}}}
	for _, tc := range []struct {
		failures int
		want     AlertKind
	}{{3, AlertPermanentFailure}, {5, AlertRetriesExhausted}} {
		s := State{ProcessState: Error, FailureCount: tc.failures, AlertPending: true}
		if got := m.alertOf(s); got != tc.want {
			t.Errorf("%d failures of 5 allowed: %s, want %s", tc.failures, got, tc.want)
		}
	}
}

// TestRetryValidation: a step's policy is refused where definitions
// enter, with every problem named.
func TestRetryValidation(t *testing.T) {
	t.Parallel()
	def := func(r Retry) Definition {
		return Definition{Name: "w", Version: 1, Steps: []Step{{Name: "a", Budget: time.Second, Retry: &r}}}
	}
	if err := def(Retry{MaxFailures: ptr(100), BackoffBase: ptr(time.Duration(0)), BackoffMax: ptr(15 * time.Minute), OnExhausted: ExhaustedWait,
		Wait: MaxRetryWait, WaitRounds: 100}).Validate(); err != nil {
		t.Fatalf("the bounds themselves: %v", err)
	}
	for name, tc := range map[string]struct {
		r    Retry
		want string
	}{
		"no failures":         {Retry{MaxFailures: ptr(0)}, "maxFailures 0"},
		"too many failures":   {Retry{MaxFailures: ptr(101)}, "maxFailures 101"},
		"backoff over sqs":    {Retry{BackoffBase: ptr(16 * time.Minute)}, "backoffBase 16m0s"},
		"negative backoff":    {Retry{BackoffMax: ptr(-time.Second)}, "backoffMax -1s"},
		"max under base":      {Retry{BackoffBase: ptr(time.Minute), BackoffMax: ptr(time.Second)}, "at least retry.backoffBase"},
		"unknown exhausted":   {Retry{OnExhausted: "sleep"}, `onExhausted "sleep"`},
		"wait without wait":   {Retry{Wait: time.Minute}, "only with onExhausted"},
		"rounds with compens": {Retry{OnExhausted: ExhaustedCompensate, WaitRounds: 1}, "only with onExhausted"},
		"no wait":             {Retry{OnExhausted: ExhaustedWait, WaitRounds: 1}, "retry.wait 0s"},
		"wait too long":       {Retry{OnExhausted: ExhaustedWait, Wait: 13 * time.Hour, WaitRounds: 1}, "retry.wait 13h0m0s"},
		"no rounds":           {Retry{OnExhausted: ExhaustedWait, Wait: time.Minute}, "waitRounds 0"},
		"too many rounds":     {Retry{OnExhausted: ExhaustedWait, Wait: time.Minute, WaitRounds: 101}, "waitRounds 101"},
	} {
		if err := def(tc.r).Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

// TestPolicyForMerges: what a step leaves out is the global policy's.
func TestPolicyForMerges(t *testing.T) {
	t.Parallel()
	m := waitingMachine()
	if p := m.policyFor(0); p.MaxFailures != 2 || p.BackoffBase != 2*time.Second || p.BackoffMax != 4*time.Second ||
		p.ClaimTimeout != testPol.ClaimTimeout || p.wait != 30*time.Minute || p.rounds != 2 {
		t.Fatalf("step a: %+v", p)
	}
	for _, k := range []int{1, -1, 7} {
		if p := m.policyFor(k); p.Policy != testPol || p.wait != 0 {
			t.Fatalf("step %d: %+v, want the global policy", k, p)
		}
	}
	m.Def.Steps[0].Retry = &Retry{BackoffMax: ptr(time.Minute)}
	if p := m.policyFor(0); p.MaxFailures != testPol.MaxFailures || p.BackoffBase != testPol.BackoffBase || p.BackoffMax != time.Minute || p.wait != 0 {
		t.Fatalf("step a with only a backoffMax: %+v", p)
	}
}
