package wiring_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The promise these tests hold the system to: every accepted order runs
// exactly once, and every effect that may have been applied is undone or
// reported to a person.

// TestAKeyReusedAfterRetentionMakesANewOrderThatRuns: an order with an
// Idempotency-Key is compensated (its remote refuses its keys for good
// from then on) and expires; the same caller sends the key again once it
// is forgotten. It makes a new order that shares nothing with the old one:
// another ID, remote idempotency keys of its own, which the remote applies,
// and an event stream of its own that starts at 1.
func TestAKeyReusedAfterRetentionMakesANewOrderThatRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference(), streams: true})
	q := e.subscribe("shop")
	body := strings.Replace(orderBody, `{`, `{"clientId":"shop",`, 1)
	const key = "checkout-7731"

	first := accepted(t, e.post(body, key))
	e.sim.Script(workflow.IdempotencyKey(first, "charge-payment"), remotesim.Permanent)
	if st := e.runToTerminal(first, 5); st.ProcessState != workflow.Compensated {
		t.Fatalf("the first order: %s", brief(st))
	}
	e.assertRemote(first, "reserve-inventory", 1, 1)
	// Within its lifetime the key lands on the first order.
	replay := e.post(body, key)
	if id := accepted(t, replay); id != first || replay.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("a replay within the key's lifetime made %s (replayed %q), want %s", id, replay.Headers["Idempotent-Replayed"], first)
	}

	// The retention passes, and DynamoDB's TTL deletes what expired: the
	// order is gone, its key forgotten.
	e.clk.Advance(2*e.policy.Retention + time.Hour)
	if n := e.deleteExpired(); n == 0 {
		t.Fatal("nothing expired")
	}
	resp := e.post(body, key)
	second := accepted(t, resp)
	if second == first || resp.Headers["Idempotent-Replayed"] != "" {
		t.Fatalf("the key reused after the retention answered %s (replayed %q), want a new order", second, resp.Headers["Idempotent-Replayed"])
	}
	if st := e.runToTerminal(second, 5); st.ProcessState != workflow.Processed {
		t.Fatalf("the new order: %s", brief(st))
	}
	// Its effects happened under keys of its own; the first order's stay
	// as they were.
	e.assertEffectsOnce(second, "reserve-inventory", "charge-payment")
	e.assertRemote(first, "reserve-inventory", 1, 1)
	e.assertRemote(first, "charge-payment", 0, 0)

	// Its events are a stream of their own, numbered from 1.
	e.pumpEvents()
	seqs := map[string][]int{}
	for _, ev := range e.drain(q) {
		seqs[ev.OrderID] = append(seqs[ev.OrderID], ev.Seq)
	}
	if got := seqs[second]; len(got) == 0 || got[0] != 1 {
		t.Errorf("the new order's events are numbered %v, want a stream from 1", got)
	}
	if len(seqs[first]) == 0 {
		t.Errorf("the first order's events: none")
	}
}

// TestACompensationCanAlwaysBeResumed: an order whose undo failed waits for
// an operator however long it takes: past twice the retention after its
// creation, neither its record nor its orders item has expired, and an
// operator's retry resumes the undo, which completes the order; the orders
// item then outlives the record.
func TestACompensationCanAlwaysBeResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	e.sim.RejectUndo("reserve-inventory")
	id := e.submit("")
	e.sim.Script(workflow.IdempotencyKey(id, "charge-payment"), remotesim.Permanent)
	st := e.runToTerminal(id, 5)
	if st.ProcessState != workflow.CompensationFailed {
		t.Fatalf("want CompensationFailed: %s", brief(st))
	}
	if a := e.alertsReceived(1)[0]; a.MessageAttributes["kind"].Value != "compensation-failed" {
		t.Fatalf("alert %+v", a)
	}
	if st = e.state(id); st.AlertPending || !st.ExpiresAt.IsZero() {
		t.Fatalf("after its alert: %s, expires at %v; want it kept for good", brief(st), st.ExpiresAt)
	}

	// A refund service down for a long weekend, and then some.
	e.clk.Advance(2*e.policy.Retention + 72*time.Hour)
	e.supervise()
	if _, err := e.sys.Store.GetOrder(e.ctx, id); err != nil {
		t.Fatalf("the orders item of an order waiting for an operator: %v", err)
	}
	if err := e.sim.SetFaults(remotesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	if resp := e.operator("POST", "/orders/"+id+"/retry", id); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("retry = %d %s", resp.StatusCode, resp.Body)
	}
	final := e.runToTerminal(id, 5)
	if final.ProcessState != workflow.Compensated || final.Resubmits != 1 {
		t.Fatalf("after the retry: %s", brief(final))
	}
	e.assertNetZero(id, "reserve-inventory", "charge-payment")
	order, err := e.sys.Store.GetOrder(e.ctx, id)
	if err != nil || order.ExpiresAt.Before(final.ExpiresAt) {
		t.Fatalf("the orders item expires at %v (%v), before its record at %v", order.ExpiresAt, err, final.ExpiresAt)
	}
}

// TestAStepThatMayHaveBeenAppliedWithoutAnUndoIsNeverCompensated: in a
// workflow [reserve (undo), charge (no undo)], charge's remote applies it
// and its agent's reply is lost, MaxFailures times. The order cannot be
// undone whole, so nothing is: it waits in Error, with an alert naming
// charge-payment as maybe applied without an undo. An operator's retry
// finishes it (the remote replays its result under the same key); in a
// second order, an operator's cancel undoes the reservation instead, and
// the order ends Cancelled, never Compensated, naming the step again.
func TestAStepThatMayHaveBeenAppliedWithoutAnUndoIsNeverCompensated(t *testing.T) {
	t.Parallel()
	def := workflow.Reference()
	def.Steps[1].Compensable = false
	e := newEnv(t, envOptions{workflow: def})
	// toErrorWithChargeApplied runs an order to its charge, whose replies
	// are lost each time until the Supervisor gives up on it.
	toErrorWithChargeApplied := func() string {
		id := e.submit("")
		e.poll(2) // reserve-inventory's agent
		e.poll(1) // commit, claim and dispatch charge-payment
		for i := range e.policy.MaxFailures {
			if i > 0 {
				e.poll(0) // the Scheduler claims the retry and dispatches it
			}
			e.poll(3)                                                                          // the agent: the remote applies (or replays) the charge
			enginetest.ReceiveAll(e.ctx, t, e.sqs, e.sys.ResponseQueue.URL, 1, 10*time.Second) // its reply is lost
			e.expire(id)
			e.supervise()
		}
		st := e.state(id)
		if st.ProcessState != workflow.Error || !strings.HasPrefix(st.LastError, workflow.NotUndoablePrefix) ||
			!strings.Contains(st.LastError, "step charge-payment may have been applied and has no undo") {
			t.Fatalf("want Error naming charge-payment: %s", brief(st))
		}
		e.assertRemote(id, "charge-payment", 1, 0)
		e.assertRemote(id, "reserve-inventory", 1, 0) // nothing undone
		a := e.alertsReceived(1)[0]
		if a.MessageAttributes["kind"].Value != "not-undoable" || !strings.Contains(a.Message, "step charge-payment may have been applied and has no undo") ||
			!strings.Contains(a.Message, "retry "+id) || !strings.Contains(a.Message, "cancel "+id) {
			t.Fatalf("alert %+v", a)
		}
		return id
	}

	finished := toErrorWithChargeApplied()
	if resp := e.operator("POST", "/orders/"+finished+"/retry", finished); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("retry = %d %s", resp.StatusCode, resp.Body)
	}
	if st := e.runToTerminal(finished, 5); st.ProcessState != workflow.Processed {
		t.Fatalf("after the retry: %s", brief(st))
	}
	e.assertEffectsOnce(finished, "reserve-inventory", "charge-payment")

	cancelled := toErrorWithChargeApplied()
	if resp := e.operator("POST", "/orders/"+cancelled+"/cancel", cancelled); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel = %d %s", resp.StatusCode, resp.Body)
	}
	st := e.runToTerminal(cancelled, 5)
	if st.ProcessState != workflow.Cancelled || !strings.Contains(st.LastError, "step charge-payment may have been applied and has no undo") {
		t.Fatalf("after the cancel: %s", brief(st))
	}
	e.assertRemote(cancelled, "reserve-inventory", 1, 1)
	e.assertRemote(cancelled, "charge-payment", 1, 0)
	// The cancel told the operators at once what it leaves applied.
	if a := e.alertsReceived(1)[0]; a.MessageAttributes["kind"].Value != "not-undoable" || !strings.Contains(a.Message, cancelled) {
		t.Fatalf("notice %+v", a)
	}
}

// deleteExpired deletes the items of both tables whose ExpiresAt has come
// by the stack's clock, as DynamoDB's TTL does some time after it (DynamoDB
// Local does not, on a test's clock), and returns how many it deleted.
func (e *env) deleteExpired() int {
	e.t.Helper()
	db := enginetest.DynamoDB(e.t)
	n := 0
	for _, table := range []string{e.sys.Tables.Orders, e.sys.Tables.State} {
		out, err := db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String(table),
			FilterExpression:          aws.String("#e <= :now"),
			ExpressionAttributeNames:  map[string]string{"#e": statestore.ExpiresAtAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(e.clk.Now().Unix(), 10)}},
		})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, item := range out.Items {
			if _, err := db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
				Key: map[string]types.AttributeValue{statestore.KeyOrderID: item[statestore.KeyOrderID]}}); err != nil {
				e.t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// accepted reads the order ID of a 202.
func accepted(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var out struct{ OrderID string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &out) != nil || out.OrderID == "" {
		t.Fatalf("POST /orders = %d %s, want a 202 with an order ID", resp.StatusCode, resp.Body)
	}
	return out.OrderID
}
