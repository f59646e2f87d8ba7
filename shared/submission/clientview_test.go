package submission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

// TestClientRoutesShowTheReasonNotTheCause: an order whose step could not
// be sent, with what SQS answers a role that lost its permission (its ARN,
// the queue's ARN and URL, so the account ID): the client's GET
// /orders/{id} and GET /orders show the reason dispatch-failed and our own
// words, the operators' GET /ops/orders/{id} the whole cause as well.
func TestClientRoutesShowTheReasonNotTheCause(t *testing.T) {
	t.Parallel()
	const cause = "send to https://sqs.eu-west-1.amazonaws.com/444455556666/agent-reserve-inventory: operation error SQS: SendMessage, " +
		"api error AccessDenied: User: arn:aws:sts::444455556666:assumed-role/scheduler/s is not authorized to perform: sqs:sendmessage " +
		"on resource: arn:aws:sqs:eu-west-1:444455556666:agent-reserve-inventory"
	f := newFixture(t, nil)
	id := readAccepted(t, f.do(t, postOrder(validBody))).OrderID
	m := workflow.Machine{Def: workflow.Reference(), Policy: workflow.Policy{MaxFailures: 1, ClaimTimeout: time.Minute, AlertTimeout: time.Minute, Retention: workflow.DefaultRetention}}
	if _, err := f.store.Apply(context.Background(), m.DispatchFailed(f.state(t, id), testNow, cause)); err != nil {
		t.Fatal(err)
	}
	if st := f.state(t, id); st.ProcessState != workflow.CompensationPending || !strings.Contains(st.Steps[0].Error, cause) {
		t.Fatalf("record %s, step %+v", st.ProcessState, st.Steps[0])
	}
	const reason = `"reason":"dispatch-failed","reasonText":"step reserve-inventory could not be sent for processing"`
	for _, tc := range []struct {
		route    string
		operator bool
	}{
		{"/orders/" + id, false},
		{"/orders", false},
		{"/ops/orders/" + id, true},
	} {
		resp := f.do(t, request("GET", tc.route, nil, ""))
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", tc.route, resp.StatusCode, resp.Body)
		}
		if !strings.Contains(resp.Body, reason) {
			t.Errorf("GET %s lacks %s: %s", tc.route, reason, resp.Body)
		}
		for _, leak := range []string{"444455556666", "arn:", "https://sqs", "AccessDenied", "lastError", `"error"`} {
			if got := strings.Contains(resp.Body, leak); got != tc.operator {
				t.Errorf("GET %s shows %q: %v; body %s", tc.route, leak, got, resp.Body)
			}
		}
	}
}
