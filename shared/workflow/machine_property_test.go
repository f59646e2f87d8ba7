package workflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/workflow"
)

// The property test of the Machine: a script of events (every actor's, an
// operator's, the clock's, late and stale ones, two Schedulers) is played
// against one order's record as a store plays it (Fence.Admits, then
// Patch.Apply), and every committed change is checked against the rules
// every transition keeps (sim.commit). FuzzMachine decodes the script from
// the fuzzer's bytes; TestMachineProperties plays many seeded random ones.
//
// A script is bytes: the first picks the definition and the policy, then
// each event is two bytes, its kind (kind % eventKinds) and its parameters
// (param's bits). A parameter byte of zero is the event as the system raises
// it on time: on the current record, by Scheduler A, certain, for the
// record's own step and attempt, the Supervisor running once the record is
// due.

// The kinds of events of a script.
const (
	evClaim = iota
	evStepCompleted
	evStepRejected
	evUndoCompleted
	evUndoRejected
	evAlertSent
	evExpired
	evDispatchFailed
	evCancel
	evResubmit
	evStranded
	evTick
	eventKinds
)

// The bits of an event's parameter byte.
const (
	// paramStale: the actor acts on an older record than the current one
	// (the snapshot param>>5 back), as a slow Supervisor or a late reply
	// does.
	paramStale = 1 << iota
	// paramOwnerB: Scheduler B acts, not A.
	paramOwnerB
	// paramUncertain: a rejection whose fault does not prove nothing was
	// applied.
	paramUncertain
	// paramOldAttempt: a reply or confirmation of the attempt before.
	paramOldAttempt
	// paramOtherStep: a claim or reply for the next step, not the record's.
	paramOtherStep
)

// paramEarly: an event that waits for the record to be due (Expired,
// Stranded) runs at the current time instead, due or not. It shares its
// bit with paramOtherStep, which those events do not read.
const paramEarly = paramOtherStep

// propertyDefinitions are the definitions a script runs on: the deployed
// catalog's, and the tests' own with every mix of undoable steps. Read
// once: a fuzzing run plays thousands of scripts a second.
var propertyDefinitions = sync.OnceValue(func() []workflow.Definition {
	defs := slices.Clone(catalog.MustDeployed().Definitions)
	defs = append(defs,
		workflow.ThreeSteps(),                 // a undoable, b not, c undoable; one-second leases
		workflow.TwoVersions().Definitions[1], // the first step has no undo
		workflow.Reference(),
		workflow.Definition{Name: "no-undo", Version: 1, Steps: []workflow.Step{
			{Name: "x", Budget: 10 * time.Second}, {Name: "y", Budget: 10 * time.Second}}},
		workflow.Definition{Name: "last-no-undo", Version: 1, Steps: []workflow.Step{
			{Name: "x", Budget: 10 * time.Second, Compensable: true}, {Name: "y", Budget: 10 * time.Second}}},
		// Steps with their own retry policies: x waits twice (30 minutes,
		// past an SQS delay) after two failures, y waits once without an
		// undo of its own, z gives up after four.
		workflow.Definition{Name: "waits", Version: 1, Steps: []workflow.Step{
			{Name: "x", Budget: 10 * time.Second, Compensable: true, Retry: &workflow.Retry{MaxFailures: ptr(2), OnExhausted: workflow.ExhaustedWait, Wait: 30 * time.Minute, WaitRounds: 2}},
			{Name: "y", Budget: 10 * time.Second, Retry: &workflow.Retry{OnExhausted: workflow.ExhaustedWait, Wait: 20 * time.Second, WaitRounds: 1, BackoffBase: ptr(time.Duration(0))}},
			{Name: "z", Budget: 10 * time.Second, Compensable: true, Retry: &workflow.Retry{MaxFailures: ptr(4), BackoffMax: ptr(time.Second)}}}},
	)
	return defs
})

// coverage counts what the scripts reached, so the deterministic test can
// check that its scripts exercise every transition.
type coverage struct {
	transitions map[workflow.Transition]int
	states      map[workflow.ProcessState]int
	refused     int
}

func newCoverage() *coverage {
	return &coverage{transitions: map[workflow.Transition]int{}, states: map[workflow.ProcessState]int{}}
}

// sim is one order's record under a script.
type sim struct {
	t   testing.TB
	m   workflow.Machine
	rec workflow.State
	// history holds every record written, oldest first: what a slow actor
	// may still hold.
	history []workflow.State
	now     time.Time
	cov     *coverage
	// events describes the script so far, for a failure's message.
	events []string
	// kind is the event being played, and uncertain its paramUncertain.
	kind      int
	uncertain bool
	// roundBase is each step's Attempts at the last operator's action:
	// what its retry policy bounds is the attempts since.
	roundBase []int
}

func ptr[T any](v T) *T { return &v }

// attemptBound is the most attempts step k may get between two operator
// actions: its threshold for each wait, and once more after the last.
func (s *sim) attemptBound(k int) int { return s.m.MaxFailuresOf(k) * (s.roundsOf(k) + 1) }

// roundsOf is how many extended waits step k gets.
func (s *sim) roundsOf(k int) int {
	if r := s.m.Def.Steps[k].Retry; r != nil && r.OnExhausted == workflow.ExhaustedWait {
		return r.WaitRounds
	}
	return 0
}

const (
	owner      = "scheduler/a"
	otherOwner = "scheduler/b"
)

var simStart = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// runScript plays script and checks every committed change.
func runScript(t testing.TB, script []byte, cov *coverage) {
	if len(script) == 0 {
		return
	}
	defs := propertyDefinitions()
	pol := workflow.TestPolicy
	if script[0]&0x80 != 0 {
		// Every failure is the last: give-ups at the first timeout.
		pol.MaxFailures = 1
	}
	m := workflow.Machine{Def: defs[int(script[0]&0x7f)%len(defs)], Policy: pol}
	s := &sim{t: t, m: m, now: simStart, cov: cov}
	s.rec = m.Accept("o-1", json.RawMessage(`{"orderId":"o-1"}`), "submission/1", s.now)
	s.history = []workflow.State{s.rec}
	s.roundBase = make([]int, len(m.Def.Steps))
	s.events = []string{fmt.Sprintf("accept on %s (max failures %d)", m.Def.ID(), pol.MaxFailures)}
	s.checkRecord(s.rec)
	for i := 1; i+1 < len(script); i += 2 {
		s.play(int(script[i])%eventKinds, script[i+1])
	}
}

// play raises one event.
func (s *sim) play(kind int, param byte) {
	seen := s.rec
	if param&paramStale != 0 {
		seen = s.history[len(s.history)-1-int(param>>5)%len(s.history)]
	}
	who := owner
	if param&paramOwnerB != 0 {
		who = otherOwner
	}
	k, attempt := seen.StepIndex, seen.Attempt
	if param&paramOldAttempt != 0 {
		attempt--
	}
	if param&paramOtherStep != 0 {
		k = (k + 1) % len(s.m.Def.Steps)
	}
	s.kind, s.uncertain = kind, param&paramUncertain != 0
	out := json.RawMessage(`{"ok":true}`)
	s.events = append(s.events, fmt.Sprintf("%s(param %#02x) at %s on %s step %d attempt %d",
		kindNames[kind], param, s.now.Sub(simStart), seen.ProcessState, seen.StepIndex, seen.Attempt))
	rec := s.rec
	switch kind {
	case evClaim:
		undo := seen.ProcessState.Undoing()
		c := s.m.Claim(seen.OrderID, k, undo, who, s.now)
		want := workflow.Pending
		if undo {
			want = workflow.CompensationPending
		}
		s.commit(c, rec.ProcessState == want && rec.StepIndex == k)
	case evStepCompleted:
		s.commit(s.m.StepCompleted(seen.OrderID, k, attempt, out, who, s.now), s.takesReply(workflow.Processing, k, attempt))
	case evStepRejected:
		c := s.m.StepRejected(seen.OrderID, k, attempt, "rejected: no", param&paramUncertain != 0, who, s.now)
		s.commit(c, s.takesReply(workflow.Processing, k, attempt))
	case evUndoCompleted:
		// The Scheduler reads the record for Cancelled (LastUndo).
		c := s.m.UndoCompleted(seen.OrderID, k, attempt, out, rec, who, s.now)
		s.commit(c, s.takesReply(workflow.Compensating, k, attempt))
	case evUndoRejected:
		c := s.m.UndoRejected(seen.OrderID, k, attempt, workflow.UndoRejectedPrefix+"no", param&paramUncertain != 0, rec, s.now)
		s.commit(c, s.takesReply(workflow.Compensating, k, attempt))
	case evAlertSent:
		c := alertSent(seen.OrderID, attempt, seen.ProcessState, s.now)
		if c.Fence.Workflow != "" {
			s.fail("an alert's confirmation is fenced on version %q: the deliverer confirms alerts of every version", c.Fence.Workflow)
		}
		s.commit(c, rec.AlertPending && attempt == rec.Attempt && seen.ProcessState == rec.ProcessState)
	case evExpired:
		s.due(seen, param)
		c, ok := s.m.Expired(seen, s.now)
		due := !s.now.Before(seen.CompleteBy) && (seen.ProcessState.InFlight() || seen.AlertPending)
		if ok != due {
			s.fail("Expired of %s (due %v, alert pending %v) = %v", seen.ProcessState, !s.now.Before(seen.CompleteBy), seen.AlertPending, ok)
		}
		if ok {
			s.commit(c, s.stillAsSeen(seen))
		}
	case evDispatchFailed:
		// A Scheduler reports a failed send of the record its claim wrote.
		if seen.ProcessState.Claimed() {
			s.commit(s.m.DispatchFailed(seen, s.now, "AccessDenied"), s.stillAsSeen(seen))
		}
	case evCancel:
		c, err := s.m.Cancel(seen, s.now, s.now.Add(s.m.Policy.ClaimTimeout))
		if s.refusal("cancel", err, workflow.ErrNotCancellable, workflow.CanCancel(seen)) {
			s.commit(c, seen.ProcessState == rec.ProcessState && seen.Attempt == rec.Attempt)
		}
	case evResubmit:
		c, err := s.m.Resubmit(seen, s.now)
		if s.refusal("resubmit", err, workflow.ErrNotResubmittable, seen.ProcessState.NeedsOperator() || seen.ProcessState == workflow.Waiting) {
			s.commit(c, seen.ProcessState == rec.ProcessState && seen.Attempt == rec.Attempt)
		}
	case evStranded:
		s.due(seen, param)
		c, ok := stranded(s.m.Policy, seen, s.now)
		due := !s.now.Before(seen.CompleteBy) && (seen.ProcessState.InFlight() || seen.AlertPending && seen.ProcessState.NeedsOperator())
		if ok != due {
			s.fail("Stranded of %s (due %v, alert pending %v) = %v", seen.ProcessState, !s.now.Before(seen.CompleteBy), seen.AlertPending, ok)
		}
		if ok {
			s.commit(c, s.stillAsSeen(seen))
		}
	case evTick:
		s.tick(param)
	}
}

var kindNames = [eventKinds]string{"claim", "step-completed", "step-rejected", "undo-completed", "undo-rejected", "alert-sent",
	"expired", "dispatch-failed", "cancel", "resubmit", "stranded", "tick"}

// The two events the Machine decides without a definition of the order's
// version, spelled once.
func alertSent(orderID string, attempt int, state workflow.ProcessState, now time.Time) workflow.Change {
	return workflow.Machine{}.AlertSent(orderID, attempt, state, now)
}
func stranded(p workflow.Policy, seen workflow.State, now time.Time) (workflow.Change, bool) {
	return workflow.Machine{Policy: p}.Stranded(seen, now)
}

// takesReply reports whether the record takes a reply of attempt of step
// k (or its undo, in Compensating): the claim it answers is the record's,
// and its CompleteBy is still ahead.
func (s *sim) takesReply(state workflow.ProcessState, k, attempt int) bool {
	r := s.rec
	return r.ProcessState == state && r.StepIndex == k && r.Attempt == attempt && s.now.Before(r.CompleteBy)
}

// stillAsSeen reports whether the record is still as a Supervisor (or a
// Scheduler whose send failed) saw it: the same state, Attempt and
// CompleteBy, and the alert still owed if it waits for an operator.
func (s *sim) stillAsSeen(seen workflow.State) bool {
	r := s.rec
	return r.ProcessState == seen.ProcessState && r.Attempt == seen.Attempt && r.CompleteBy.Equal(seen.CompleteBy) &&
		(!r.ProcessState.Terminal() || r.AlertPending)
}

// due moves the clock to seen's CompleteBy, as a Supervisor that runs on a
// schedule finds the record due, unless param says it runs now.
func (s *sim) due(seen workflow.State, param byte) {
	if param&paramEarly == 0 && s.now.Before(seen.CompleteBy) {
		s.now = seen.CompleteBy
	}
}

// tick advances the clock.
func (s *sim) tick(param byte) {
	switch param % 8 {
	case 0:
		s.now = s.now.Add(time.Second)
	case 1:
		s.now = s.now.Add(10 * time.Second)
	case 2:
		s.now = maxTime(s.now, s.rec.CompleteBy.Add(-time.Millisecond))
	case 3:
		s.now = maxTime(s.now, s.rec.CompleteBy)
	case 4:
		s.now = s.now.Add(time.Minute)
	case 5:
		s.now = s.now.Add(10 * time.Minute)
	case 6:
		// Past the record's OpenUntil, and the retention.
		s.now = s.now.Add(s.m.Policy.Retention + 24*time.Hour)
	case 7:
		s.now = s.now.Add(time.Duration(param>>3) * time.Second)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// refusal checks an operator's request's answer: refused (with want)
// exactly when allowed is false. It reports whether there is a change to
// commit.
func (s *sim) refusal(what string, err, want error, allowed bool) bool {
	switch {
	case err == nil && !allowed:
		s.fail("%s accepted", what)
	case err != nil && allowed:
		s.fail("%s refused: %v", what, err)
	case err != nil && (!errors.Is(err, want) || !errors.Is(err, workflow.ErrConflict)):
		s.fail("%s refused with %v, want %v", what, err, want)
	}
	return err == nil
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nafter events:\n  %s\nrecord %+v", fmt.Sprintf(format, args...), strings.Join(s.events, "\n  "), s.rec)
}

// commit carries c out on the record as a store does and checks the rules
// every transition keeps. admit says whether the record, as it is, takes
// the event: its fence must admit it exactly then.
func (s *sim) commit(c workflow.Change, admit bool) {
	s.t.Helper()
	before := s.rec
	// What a store checks before it writes anything.
	if c.OrderID != before.OrderID {
		s.fail("a change of order %q", c.OrderID)
	}
	if err := c.Patch.CheckSteps(len(before.Steps)); err != nil {
		s.fail("%s: %v", c.Transition, err)
	}
	moves, err := c.Moves()
	if err != nil {
		s.fail("%s: %v", c.Transition, err)
	}
	// Every change but an alert's confirmation is pinned to the version
	// that decided it.
	if s.kind != evAlertSent && c.Fence.Workflow != before.Workflow {
		s.fail("%s fenced on version %q of a %q record", c.Transition, c.Fence.Workflow, before.Workflow)
	}
	if c.Fence.Admits(before) != admit {
		s.fail("%s: its fence %+v admits the record %v, want %v", c.Transition, c.Fence, !admit, admit)
	}
	if !admit {
		s.cov.refused++
		return
	}
	after := c.Patch.Apply(before)
	// Terminal states absorb: an order that ended for good admits nothing
	// but the delivery of an alert it still owes (a cancel's).
	if before.ProcessState.Ended() && !reflect.DeepEqual(alertless(after), alertless(before)) {
		s.fail("%s admitted by a %s record beyond its alert", c.Transition, before.ProcessState)
	}
	s.events = append(s.events, fmt.Sprintf("  => %s: %s step %d attempt %d", c.Transition, after.ProcessState, after.StepIndex, after.Attempt))
	s.cov.transitions[c.Transition]++
	s.cov.states[after.ProcessState]++

	if c.Fence.Admits(after) {
		s.fail("%s: its fence admits the record its patch wrote, so a replay would apply twice", c.Transition)
	}
	if moves != (after.ProcessState != before.ProcessState) {
		s.fail("%s: Moves = %v, but it takes %s to %s", c.Transition, moves, before.ProcessState, after.ProcessState)
	}
	s.checkStep(before, after, c)
	s.checkRecord(after)
	s.rec = after
	s.history = append(s.history, after)
}

// checkStep checks what one committed change may do to a record.
func (s *sim) checkStep(before, after workflow.State, c workflow.Change) {
	s.t.Helper()
	// Counters and fencing tokens only grow.
	if after.Attempt < before.Attempt || after.EventSeq < before.EventSeq || after.Requeues < before.Requeues ||
		after.Resubmits < before.Resubmits || before.Cancelled && !after.Cancelled {
		s.fail("%s: a counter went back: %+v -> %+v", c.Transition, before, after)
	}
	for i := range after.Steps {
		b, a := before.Steps[i], after.Steps[i]
		if a.Attempts < b.Attempts || a.Failures < b.Failures || a.CompensationAttempts < b.CompensationAttempts ||
			a.CompensationFailures < b.CompensationFailures {
			s.fail("%s: step %d's counters went back: %+v -> %+v", c.Transition, i, b, a)
		}
	}
	s.checkKeys(before, after, c)
	if workflow.StatusOf(after) != workflow.StatusOf(before) && after.EventSeq == before.EventSeq {
		s.fail("%s: the status went from %s to %s without an event", c.Transition, workflow.StatusOf(before), workflow.StatusOf(after))
	}
	// A record that waits for an operator moves only by an operator's
	// Resubmit or Cancel; what else is admitted (an alert sent, or owed
	// again) touches only the alert's bookkeeping and the TTLs.
	if before.ProcessState.NeedsOperator() {
		if after.ProcessState != before.ProcessState {
			if c.Transition != workflow.TransitionResubmitted && c.Transition != workflow.TransitionCancelled {
				s.fail("%s moved a %s record to %s", c.Transition, before.ProcessState, after.ProcessState)
			}
		} else if a, b := alertless(after), alertless(before); !reflect.DeepEqual(a, b) {
			s.fail("%s changed a %s record beyond its alert:\n%+v\n%+v", c.Transition, before.ProcessState, b, a)
		}
	}
	// A step's attempts are bounded by its retry policy between two
	// operator actions, waits included.
	if c.Transition == workflow.TransitionResubmitted || c.Transition == workflow.TransitionCancelled {
		for i, st := range after.Steps {
			s.roundBase[i] = st.Attempts
		}
	}
	for i, st := range after.Steps {
		if n := st.Attempts - s.roundBase[i]; n > s.attemptBound(i) {
			s.fail("%s: step %d attempted %d times since the last operator action, over its policy's %d", c.Transition, i, n, s.attemptBound(i))
		}
	}
	if after.ProcessState == workflow.Waiting && before.ProcessState != workflow.Waiting &&
		(c.Transition != workflow.TransitionWaiting || c.Notice != workflow.AlertWaiting || !after.CompleteBy.After(s.now)) {
		s.fail("%s into Waiting: notice %q, until %v at %v", c.Transition, c.Notice, after.CompleteBy, s.now)
	}
	forward := before.ProcessState == workflow.Pending || before.ProcessState == workflow.Processing || before.ProcessState == workflow.Waiting ||
		before.ProcessState == workflow.Error
	if forward && after.ProcessState != before.ProcessState && c.Transition != workflow.TransitionStranded {
		s.checkStop(before, after, c)
	}
	if after.ProcessState == workflow.Processed {
		for i, st := range after.Steps {
			if st.State != workflow.StepSucceeded {
				s.fail("processed with step %d %s", i, st.State)
			}
		}
	}
	if after.ProcessState == workflow.Compensated || after.ProcessState == workflow.Cancelled {
		// Every step that may have been applied and has an undo was undone.
		for i, st := range after.Steps {
			if s.m.Def.Steps[i].Compensable && st.Attempts > 0 && st.Compensation != workflow.StepSucceeded {
				s.fail("%s with step %d claimed %d times and its undo %q", after.ProcessState, i, st.Attempts, st.Compensation)
			}
		}
	}
}

// checkKeys checks the rounds of the steps' idempotency keys: a rejection
// says whether it was certain, and only an operator's retry of a step (or
// undo) whose last outcome was a certain rejection moves its key to the
// next round; every other outcome keeps the key.
func (s *sim) checkKeys(before, after workflow.State, c workflow.Change) {
	s.t.Helper()
	k := before.StepIndex
	switch c.Transition {
	case workflow.TransitionFailed, workflow.TransitionCompensating, workflow.TransitionCompensationFailed:
		if s.kind == evStepRejected && after.Steps[k].Refused == s.uncertain {
			s.fail("%s: a rejection (uncertain %v) left Refused %v", c.Transition, s.uncertain, after.Steps[k].Refused)
		}
		if s.kind == evUndoRejected && after.Steps[k].UndoRefused == s.uncertain {
			s.fail("%s: an undo's rejection (uncertain %v) left UndoRefused %v", c.Transition, s.uncertain, after.Steps[k].UndoRefused)
		}
	}
	for i := range after.Steps {
		b, a := before.Steps[i], after.Steps[i]
		step, undo := b.KeyRound, b.UndoKeyRound
		if c.Transition == workflow.TransitionResubmitted && i == k {
			switch {
			case before.ProcessState == workflow.CompensationFailed && b.UndoRefused:
				undo++
			case before.ProcessState != workflow.CompensationFailed && b.Refused:
				step++
			}
		}
		if a.KeyRound != step || a.UndoKeyRound != undo {
			s.fail("%s from %s: step %d's key rounds %d/%d, want %d/%d (refused %v, undo refused %v)",
				c.Transition, before.ProcessState, i, a.KeyRound, a.UndoKeyRound, step, undo, b.Refused, b.UndoRefused)
		}
	}
}

// checkStop checks an order's stop on its forward path (or a cancel of
// one in Error), as Definition.StopAt decides it: the undo plan holds
// every step that may have been applied and has an undo, and no other; an
// order with a step that may have been applied and has none (its residue)
// is undone only by a cancel, which tells the operators, and otherwise
// waits in Error with nothing undone and the step named; with nothing to
// undo, it is in Error or Cancelled.
func (s *sim) checkStop(before, after workflow.State, c workflow.Change) {
	s.t.Helper()
	k, d := before.StepIndex, s.m.Def
	var need []int
	var residue []string
	for j := 0; j <= k; j++ {
		// A step before k succeeded; k may have been applied once claimed,
		// unless the event is a rejection that proves it was not.
		applied := j < k || before.Steps[j].Attempts > 0 && (s.kind != evStepRejected || s.uncertain)
		switch {
		case d.Steps[j].Compensable && (j < k || before.Steps[j].Attempts > 0):
			// A rejected step with an undo is undone too: a copy of its
			// request may still reach the remote.
			need = append(need, j)
		case !d.Steps[j].Compensable && applied:
			residue = append(residue, d.Steps[j].Name)
		}
	}
	cancel := c.Transition == workflow.TransitionCancelled
	if cancel && (len(residue) > 0) != (c.Alert == workflow.AlertNotUndoable && after.AlertPending) {
		// The operators are told through the outbox, at least once.
		s.fail("cancelled at step %d with %v not undoable: alert %q, pending %v", k, residue, c.Alert, after.AlertPending)
	}
	switch {
	case after.ProcessState.Undoing():
		var plan []int
		for j := after.StepIndex; j >= 0; j = d.NextCompensation(j) {
			plan = append(plan, j)
		}
		slices.Reverse(plan)
		if !slices.Equal(plan, need) {
			s.fail("%s stopped at step %d: undo plan %v, but the steps that may have been applied and have an undo are %v", c.Transition, k, plan, need)
		}
		if len(residue) > 0 && !cancel {
			s.fail("%s undoes an order stopped at step %d past %v, which has no undo", c.Transition, k, residue)
		}
	case after.ProcessState == workflow.Cancelled:
		if len(need) > 0 {
			s.fail("cancelled at step %d without undoing %v", k, need)
		}
	case after.ProcessState == workflow.Error:
		switch {
		case len(residue) > 0 && (!strings.HasPrefix(after.LastError, workflow.NotUndoablePrefix) || c.Alert != workflow.AlertNotUndoable):
			s.fail("%s stopped in Error at step %d past %v without naming it: %q, alert %q", c.Transition, k, residue, after.LastError, c.Alert)
		case len(residue) == 0 && len(need) > 0:
			s.fail("%s stopped in Error at step %d without undoing %v", c.Transition, k, need)
		}
	}
}

// alertless is s without what confirming or re-sending its alert changes.
func alertless(s workflow.State) workflow.State {
	s.AlertPending, s.InFlight, s.CompleteBy, s.UpdatedAt, s.OpenUntil = false, false, time.Time{}, time.Time{}, time.Time{}
	return s
}

// checkRecord checks what every record keeps.
func (s *sim) checkRecord(r workflow.State) {
	s.t.Helper()
	st := r.ProcessState
	switch {
	case r.InFlight != (st.InFlight() || r.AlertPending):
		s.fail("InFlight %v in %s with AlertPending %v", r.InFlight, st, r.AlertPending)
	case r.AlertPending && !st.NeedsOperator() && !(r.Cancelled && strings.HasPrefix(r.LastError, workflow.NotUndoablePrefix)):
		// Outside the states that wait for a person, only a cancel past a
		// step without an undo owes an alert.
		s.fail("AlertPending in %s", st)
	case (r.LockedBy != "") != st.Claimed():
		s.fail("locked by %q in %s", r.LockedBy, st)
	case st.Ended() == r.ExpiresAt.IsZero():
		s.fail("ExpiresAt %v in %s", r.ExpiresAt, st)
	case st.Ended() && !r.OpenUntil.IsZero():
		s.fail("OpenUntil %v in %s", r.OpenUntil, st)
	case r.Step != s.m.Def.Steps[r.StepIndex].Name:
		s.fail("step %d named %q", r.StepIndex, r.Step)
	case r.InFlight && r.CompleteBy.IsZero():
		// No order is lost: the Supervisor finds every one it watches by
		// its CompleteBy.
		s.fail("in flight in %s without a CompleteBy", st)
	case st == workflow.Waiting && (r.WaitRound < 1 || r.FailureCount != 0 || !r.InFlight):
		s.fail("Waiting with WaitRound %d, FailureCount %d, in flight %v", r.WaitRound, r.FailureCount, r.InFlight)
	case r.WaitRound > s.roundsOf(r.StepIndex):
		s.fail("WaitRound %d of step %d", r.WaitRound, r.StepIndex)
	}
}

// FuzzMachine plays the fuzzer's scripts (see runScript).
func FuzzMachine(f *testing.F) {
	f.Add([]byte{0, evStepCompleted, 0, evStepCompleted, 0})
	f.Add([]byte{2, evClaim, 0, evStepRejected, paramUncertain, evUndoCompleted, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		runScript(t, script, newCoverage())
	})
}

// TestMachineProperties plays seeded random scripts, and checks that
// together they reach every state and every transition the Machine
// decides, so the properties are checked on all of them.
func TestMachineProperties(t *testing.T) {
	t.Parallel()
	cov := newCoverage()
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 0x5a5))
		script := make([]byte, 1+2*(8+rng.IntN(60)))
		for i := range script {
			script[i] = byte(rng.UintN(256))
		}
		// Half the parameters are the event as raised on time, so the
		// scripts go on rather than pile up refusals.
		for i := 2; i < len(script); i += 2 {
			if rng.IntN(2) == 0 {
				script[i] &= paramOwnerB | paramUncertain
			}
		}
		runScript(t, script, cov)
	}
	for _, tr := range workflow.Transitions() {
		if tr != workflow.TransitionAccepted && tr != workflow.TransitionStaleReply && cov.transitions[tr] == 0 {
			t.Errorf("no script reached %s", tr)
		}
	}
	if cov.transitions[""] == 0 {
		t.Error("no script confirmed an alert")
	}
	for _, st := range workflow.ProcessStates() {
		if cov.states[st] == 0 {
			t.Errorf("no script reached %s", st)
		}
	}
	if cov.refused == 0 {
		t.Error("no script raised a stale event")
	}
	t.Logf("transitions %v, states %v, refused %d", cov.transitions, cov.states, cov.refused)
}
