package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The operators' fix (Fix): long after the faults stopped, past the
// retention, they lift every hold and retry each order that waits for one,
// as the runbook says ("fix the cause, retry"). Then the order must go on:
// a certain refusal runs again under a new key, an uncertain outcome keeps
// its key and is replayed by its service, and no ledger entry the order
// may still need has expired meanwhile.

// fixAfter is when the operators fix, after the faults stop: past a
// retention of a day, so entries and records that should not outlive it
// are gone by then.
const fixAfter = 36 * time.Hour

// fixRounds are the operators' retries, an hour apart: a refusal replayed
// under an uncertain outcome's key is certain the second time, and the
// retry after it runs under a new key.
const fixRounds = 2

// fixEnd is the last moment of the fix: the run then settles.
func fixEnd(at time.Time) time.Time { return at.Add(fixRounds * time.Hour) }

// fix schedules the operators' fix at at.
func (r *run) fix(at time.Time) {
	for round := range fixRounds {
		r.w.at(at.Add(time.Duration(round)*time.Hour), func() {
			if round == 0 {
				r.f.lifted = true
				r.w.log.add(r.w.now, "operator", "holds lifted", "")
			}
			for _, id := range slices.Sorted(mapsKeys(r.sys.store.last)) {
				if r.sys.store.last[id].state().ProcessState.NeedsOperator() {
					r.fixed[id] = true
					r.act(id, "retry", 0)
				}
			}
			r.sys.resweep()
		})
	}
}

// stuck reports the orders the fix should have moved on and did not: in
// Error or CompensationFailed at the end, though their cause was lifted
// and they were retried, unless the key they stopped on holds an uncertain
// refusal in a code step's ledger (the step may have applied its effect
// and refused after it: only a person can tell, and the retry keeps that
// key and its answer).
func (r *run) stuck(s workflow.State, bad func(string, ...any)) {
	if !r.fixed[s.OrderID] || !s.ProcessState.NeedsOperator() {
		return
	}
	k := s.StepIndex
	if k >= 0 && k < len(s.Steps) {
		name := s.Steps[k].Name
		if _, code := codeSteps[name]; code {
			stepKey, undoKey := s.Keys(k)
			key := stepKey
			if s.ProcessState == workflow.CompensationFailed {
				key = undoKey
			}
			e, err := r.sys.store.truth.Entry(context.Background(), statestore.LedgerKey(name, key))
			if err == nil && e.State == statestore.LedgerRejected && e.Fault != nil && e.Fault.Uncertain {
				return
			}
		}
	}
	bad("fixed: order %s still %s at step %d after its cause was lifted and it was retried %d times (last error %q)",
		s.OrderID, s.ProcessState, s.StepIndex, fixRounds, s.LastError)
}

// forgedMark is in the output of every forged reply, so a commit of one
// shows in the record.
const forgedMark = `{"forged":true}`

// forge has a compromised Agent (any role allowed to send to the response
// queue) send, a while after order id was accepted, a reply of success for
// whatever step or undo the order then runs, under its current Attempt:
// the reply its own Agent would send, but from another Agent's role.
func (r *run) forge(id string) {
	r.w.after(r.w.delay(0, 30*time.Second), func() {
		st := r.sys.store.last[id].state()
		if !st.ProcessState.Claimed() {
			return
		}
		var other string
		for _, name := range slices.Sorted(mapsKeys(r.sys.agentQ)) {
			if name != st.Step {
				other = name
				break
			}
		}
		reply := message.AgentReply{V: message.Version, Kind: message.KindAgentReply, OrderID: st.OrderID, Workflow: st.Workflow,
			Step: st.Step, StepIndex: st.StepIndex, Attempt: st.Attempt, Outcome: message.Succeeded, Output: json.RawMessage(forgedMark)}
		if st.ProcessState.Undoing() {
			reply.Action = message.Compensate
		}
		r.f.counts["forged-replies"]++
		r.w.log.add(r.w.now, "forger", "reply forged as agent-"+other, id+" "+st.Step)
		_ = queue.NewSender(r.sys.sqs.As(roleID("agent-"+other), "sas-agent-"+other)).Send(context.Background(), r.sys.responseQ.url, message.Encode(reply), 0)
	})
}

// forged reports the commits of a forged reply (its mark in a step's
// output or undo output).
func forged(c workflow.Change) string {
	for _, sp := range c.Patch.Steps {
		if string(sp.Output) == forgedMark || string(sp.UndoOutput) == forgedMark {
			return fmt.Sprintf("%s step %d by %s", c.OrderID, sp.Index, c.Transition)
		}
	}
	return ""
}

// cancelAlerted checks that an order cancelled past a step without an
// undo had its not-undoable alert delivered to the operators.
func (r *run) cancelAlerted(s workflow.State, bad func(string, ...any)) {
	if !s.Cancelled || !strings.HasPrefix(s.LastError, workflow.NotUndoablePrefix) {
		return
	}
	for _, d := range r.sys.operators.Got {
		if d.Attrs["orderId"] == s.OrderID && d.Attrs["kind"] == string(workflow.AlertNotUndoable) {
			return
		}
	}
	bad("alert: order %s was cancelled past a step without an undo (%q), and no not-undoable alert reached the operators", s.OrderID, s.LastError)
}

// act is an operator's action on order id through the API: a refusal (409)
// is an answer, a 5xx is tried again.
func (r *run) act(id, action string, tries int) {
	req := r.request(http.MethodPost, "/orders/"+id+"/"+action, operatorCaller, nil, nil)
	r.w.log.add(r.w.now, "operator", action, id)
	r.api(req, func(resp events.APIGatewayV2HTTPResponse, killed bool) {
		if (killed || resp.StatusCode >= 500) && tries < 5 {
			r.w.after(r.w.delay(time.Millisecond, 5*time.Second), func() { r.act(id, action, tries+1) })
			return
		}
		if !killed && resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict && (resp.StatusCode < 200 || resp.StatusCode > 299) {
			r.violations = append(r.violations, fmt.Sprintf("operator %s of %s: %d %s", action, id, resp.StatusCode, resp.Body))
		}
	})
}
