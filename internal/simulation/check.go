package simulation

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/workflow"
)

// check reads the end of a run against every invariant: those of the chaos
// suite on the real engines, and liveness.
func (r *run) check(end time.Time) Result {
	res := Result{States: map[workflow.ProcessState]int{}}
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	res.Violations = append(res.Violations, r.violations...)
	ctx := context.Background()
	st := r.sys.store
	rm := r.sys.remote

	// Every order the store holds: those clients were told of, and those
	// whose answer never reached them.
	ids := map[string]bool{}
	classes := map[string]workflow.Priority{}
	for _, cl := range r.clients {
		if cl.id != "" {
			res.Accepted++
			ids[cl.id] = true
			classes[cl.id] = cl.priority.Or()
		}
	}
	for id := range st.last {
		ids[id] = true
	}
	r.called = map[string][]string{}
	for key := range rm.keyOrders {
		if order, step, ok := strings.Cut(key, "/"); ok {
			r.called[order] = append(r.called[order], step)
		}
	}
	code := r.sys.code
	code.finish()
	for order, steps := range code.ran {
		r.called[order] = append(r.called[order], steps...)
	}
	res.Violations = append(res.Violations, code.violations...)
	res.CodeStep = code.report
	res.Sweeps = r.sys.store.sweeps
	states := map[string]workflow.State{}
	for _, id := range slices.Sorted(mapsKeys(ids)) {
		s, err := st.truth.GetState(ctx, id)
		if last := st.last[id].state(); err != nil && last.ProcessState.Ended() && last.Expired(end) {
			// Ended for good more than the retention ago: gone as it
			// should be; its last write is what it was.
			states[id] = last
			continue
		}
		if err != nil {
			bad("lost: order %s has no state record (%v)", id, err)
			continue
		}
		if _, err := st.truth.GetOrder(ctx, id); err != nil {
			bad("lost: order %s has no order item (%v)", id, err)
		}
		states[id] = s
		if want, ok := classes[id]; ok && s.Priority.Or() != want {
			bad("priority: order %s was submitted %s, its record says %s", id, want, s.Priority.Or())
		}
	}
	for _, id := range slices.Sorted(mapsKeys(states)) {
		s := states[id]
		res.States[s.ProcessState]++
		if !s.ProcessState.Terminal() {
			bad("liveness: order %s still %s at step %d attempt %d, %v after the faults stopped", id, s.ProcessState, s.StepIndex, s.Attempt, r.cfg.Settle)
		}
		if s.AlertPending {
			bad("alert: order %s still owes its alert", id)
		}
		if s.ProcessState.NeedsOperator() && !r.alerted(id, s.Attempt) {
			bad("alert: order %s in %s at attempt %d, and no alert reached the operators", id, s.ProcessState, s.Attempt)
		}
		mach, err := r.next.Machine(s.Workflow, r.sys.policy)
		if err != nil {
			bad("unknown: order %s pinned to %s: %v", id, s.Workflow, err)
			continue
		}
		if most := mach.MaxFailuresOf(s.StepIndex); s.FailureCount > most {
			bad("unbounded: order %s has %d failures, over %d", id, s.FailureCount, most)
		}
		// Each step is claimed at most its threshold times per wait and
		// once more, and its undo its threshold times, per operator round.
		bound := 1
		for k, step := range mach.Def.Steps {
			rounds := 0
			if rt := step.Retry; rt != nil && rt.OnExhausted == workflow.ExhaustedWait {
				rounds = rt.WaitRounds
				if s.StepIndex == k && s.WaitRound > rounds {
					bad("unbounded: order %s waited %d times at step %d, over %d", id, s.WaitRound, k, rounds)
				}
			}
			bound += (1 + s.Resubmits) * mach.MaxFailuresOf(k) * (rounds + 2)
		}
		// Each operator's retry takes an Attempt of its own.
		bound += s.Resubmits
		if s.Attempt > bound {
			bad("unbounded: order %s at attempt %d, over %d", id, s.Attempt, bound)
		}
		r.checkEffects(s, bad)
		r.checkEvents(s, bad)
		r.cancelAlerted(s, bad)
		r.stuck(s, bad)
	}
	for key, n := range rm.effects {
		if n > 1 {
			bad("effects: %s applied %d times", key, n)
		}
	}
	for key, n := range rm.undos {
		if n > 1 {
			bad("effects: %s undone %d times", key, n)
		}
	}
	for _, reuse := range rm.reused {
		bad("key reused across orders: %s", reuse)
	}
	for _, id := range st.staleCommits {
		bad("stale commit: a reply of a superseded attempt of order %s was committed", id)
	}
	for _, v := range st.lateCommits {
		bad("late commit: a reply committed after its deadline: %s", v)
	}
	for _, v := range st.earlyRecoveries {
		bad("early recovery: the Supervisor recovered a record whose deadline had not passed: %s", v)
	}
	for _, v := range st.ignored {
		bad("sweep: %s", v)
	}
	for _, v := range st.notOwnWrites {
		bad("own write: %s", v)
	}
	for _, v := range st.forgedCommits {
		bad("forged: a reply its step's Agent did not send was committed: %s", v)
	}
	r.checkDeadlines(bad)
	slices.Sort(res.Violations)
	res.Violations = slices.Compact(res.Violations)
	return res
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// alerted reports whether the operators got the alert of an order's
// attempt.
func (r *run) alerted(id string, attempt int) bool {
	want := id + "/" + strconv.Itoa(attempt)
	for _, d := range r.sys.operators.Got {
		if d.Attrs["alertId"] == want {
			return true
		}
	}
	return false
}

// checkEffects holds an order's record to the remote's effects: a step
// done was applied; an order that ended nets nothing it could undo; a
// processed order undid nothing; an effect without an undo in an order
// that did not complete is owned up to; only the order's own version's
// steps were called.
func (r *run) checkEffects(s workflow.State, bad func(string, ...any)) {
	rm := r.sys.remote
	def, err := r.next.Resolve(s.Workflow)
	if err != nil {
		bad("version: order %s runs %s: %v", s.OrderID, s.Workflow, err)
		return
	}
	stopped := s.ProcessState == workflow.Compensated || s.ProcessState == workflow.Cancelled
	for i, step := range s.Steps {
		key := workflow.IdempotencyKey(s.OrderID, step.Name)
		applied, undone := 0, 0
		keys, _ := workflow.StepKeys(s, i)
		for _, k := range keys {
			applied, undone = applied+rm.effects[k], undone+rm.undos[k]
		}
		compensable := i < len(def.Steps) && def.Steps[i].Compensable
		if _, ok := codeSteps[step.Name]; ok {
			r.sys.code.check(s, i, compensable, bad)
			continue
		}
		switch {
		case step.State == workflow.StepSucceeded && applied == 0:
			bad("effects: step %s of order %s succeeded without its effect", step.Name, s.OrderID)
		case s.ProcessState == workflow.Processed && undone > 0:
			bad("effects: step %s of processed order %s undone", step.Name, s.OrderID)
		case stopped && compensable && applied > undone:
			bad("left applied: %s (applied %d, undone %d, order %s)", key, applied, undone, s.ProcessState)
		case !compensable && applied > 0 && s.ProcessState != workflow.Processed && s.ProcessState != workflow.CompensationFailed:
			named := strings.HasPrefix(s.LastError, workflow.NotUndoablePrefix) && strings.Contains(s.LastError, "step "+step.Name+" ")
			if s.ProcessState == workflow.Compensated || !named {
				bad("unreported: %s applied without an undo, order %s, last error %q", key, s.ProcessState, s.LastError)
			}
		}
	}
	for _, step := range r.called[s.OrderID] {
		if !slices.ContainsFunc(def.Steps, func(d workflow.Step) bool { return d.Name == step }) {
			bad("version: order %s on %s had step %s called", s.OrderID, s.Workflow, step)
		}
	}
}

// checkEvents holds an order's status events to its record: numbered
// 1..EventSeq without a gap, one state per number, the last the record's.
func (r *run) checkEvents(s workflow.State, bad func(string, ...any)) {
	if r.events == nil {
		r.events = map[string][]Delivery{}
		for _, sub := range r.sys.clients {
			for _, d := range sub.Got {
				id := d.Attrs[notifier.AttrOrderID]
				r.events[id] = append(r.events[id], d)
			}
		}
	}
	got := map[int]workflow.ProcessState{}
	for _, d := range r.events[s.OrderID] {
		if d.Attrs[notifier.AttrClientID] != s.ClientID {
			bad("events: order %s of client %s: an event reached client %s", s.OrderID, s.ClientID, d.Attrs[notifier.AttrClientID])
		}
		ev, err := notifier.DecodeEvent(d.Body)
		if err != nil {
			bad("events: order %s: undecodable event: %v", s.OrderID, err)
			continue
		}
		if ev.Priority != s.Priority.Or() {
			bad("events: order %s of priority %s: event %d says %s", s.OrderID, s.Priority.Or(), ev.Seq, ev.Priority)
		}
		if old, ok := got[ev.Seq]; ok && old != ev.State {
			bad("events: order %s: event %d is both %s and %s", s.OrderID, ev.Seq, old, ev.State)
		}
		got[ev.Seq] = ev.State
	}
	for seq := 1; seq <= s.EventSeq; seq++ {
		if _, ok := got[seq]; !ok {
			bad("events: order %s: no event %d of %d", s.OrderID, seq, s.EventSeq)
			return
		}
	}
	if len(got) > s.EventSeq {
		bad("events: order %s: %d events for EventSeq %d", s.OrderID, len(got), s.EventSeq)
	}
	if last, ok := got[s.EventSeq]; ok && last != s.ProcessState {
		bad("events: order %s: the last event says %s, the record %s", s.OrderID, last, s.ProcessState)
	}
}

// checkDeadlines holds the Timer to the fast path: every write that began
// a new phase of a record the Supervisor watches (in flight, with a new
// Attempt or CompleteBy) due within SQS's longest delay had its Deadline
// sent, once at least. The sweep recovers a phase whose Deadline was lost
// within its minute, so no other invariant tells a Timer that drops
// Deadlines from one that sends them. The phase's due time is measured from
// its UpdatedAt, stamped by the writer's clock, which the Timer's may trail
// by up to the store's tolerance.
func (r *run) checkDeadlines(bad func(string, ...any)) {
	sent := map[string]bool{}
	for _, body := range r.sys.deadlineQ.sent {
		d, err := message.DecodeDeadline(body)
		if err != nil {
			bad("deadline: a message on the deadline queue is no Deadline: %v", err)
			continue
		}
		sent[phaseKey(d.OrderID, d.Attempt, d.CompleteBy)] = true
	}
	within := queue.MaxDelay - r.sys.store.tolerance
	missed := map[string]string{}
	for _, st := range r.sys.stream.phases {
		if st.completeBy.IsZero() || st.completeBy.UnixMilli() == 0 || st.completeBy.Sub(st.updated) > within {
			continue
		}
		if k := phaseKey(st.orderID, st.attempt, st.completeBy); !sent[k] && missed[st.orderID] == "" {
			missed[st.orderID] = fmt.Sprintf("attempt %d, %s, CompleteBy %s", st.attempt, st.state, st.completeBy.Format(time.TimeOnly))
		}
	}
	for _, id := range slices.Sorted(mapsKeys(missed)) {
		bad("deadline: order %s began a phase (%s) and no Deadline of it was sent", id, missed[id])
	}
}

// phaseKey names a phase of an order as its Deadline does.
func phaseKey(orderID string, attempt int, completeBy time.Time) string {
	return orderID + "/" + strconv.Itoa(attempt) + "/" + strconv.FormatInt(completeBy.UnixMilli(), 10)
}
