package wiring_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/workflow"
)

// asClient calls a client route as API Gateway would, as the IAM principal
// that submitted the tests' orders.
func (e *env) asClient(path string) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	req := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: path, RouteKey: "GET /orders"}
	if id, ok := strings.CutPrefix(path, "/orders/"); ok {
		req.RouteKey, req.PathParameters = "GET /orders/{id}", map[string]string{"id": id}
	}
	req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path = "GET", path
	req.RequestContext.RequestID = "req-client"
	req.RequestContext.Authorizer = testClient()
	resp, err := e.sys.Submission.Handle(e.ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// TestClientsSeeTheirOrderNotOurInfrastructure: every SendMessage of the
// payment step's request fails with what SQS answers a role that lost its
// permission, an AccessDenied naming the role's ARN, the queue's ARN and
// so the account ID ("Troubleshooting access denied error messages", IAM
// User Guide,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_access-denied.html),
// wrapped with the queue URL, which holds the account ID too ("Amazon SQS
// queue and message identifiers", SQS Developer Guide,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-queue-message-identifiers.html).
// The order gives the step up and is undone. The client's GET
// /orders/{id}, its listing and its status events carry none of that, only
// the reason dispatch-failed and our own words; the operators' GET
// /ops/orders/{id} still shows the whole cause.
func TestClientsSeeTheirOrderNotOurInfrastructure(t *testing.T) {
	t.Parallel()
	const (
		account  = "444455556666"
		awsQueue = "https://sqs.eu-west-1.amazonaws.com/" + account + "/sasflow-prod-agent-charge-payment"
		role     = "arn:aws:sts::" + account + ":assumed-role/sasflow-prod-SchedulerRole-1A2B3C4D/sasflow-prod-Scheduler"
	)
	var queue string
	var refusing *failingSender
	e := newEnv(t, envOptions{workflow: workflow.Reference(), streams: true, wrapSender: func(r string, s wiring.Sender) wiring.Sender {
		if r != "scheduler" {
			return s
		}
		refusing = &failingSender{next: s, fail: func(url, body string) bool { return url == queue && isForward(body) }}
		return refusing
	}})
	queue = e.sys.AgentQueues["charge-payment"].URL
	refusing.err = errors.New("send to " + awsQueue + " (" + queue + "): operation error SQS: SendMessage, https response error StatusCode: 403, " +
		"RequestID: 0f4c6e7a-2b1d-5e3f-9a8b-7c6d5e4f3a2b, api error AccessDenied: User: " + role +
		" is not authorized to perform: sqs:sendmessage on resource: arn:aws:sqs:eu-west-1:" + account +
		":sasflow-prod-agent-charge-payment because no identity-based policy allows the sqs:sendmessage action")
	mine := e.subscribe("client-a")
	resp := e.post(strings.Replace(orderBody, `{"customerId"`, `{"clientId":"client-a","customerId"`, 1), "")
	var accepted struct{ OrderID string }
	if resp.StatusCode != 202 || json.Unmarshal([]byte(resp.Body), &accepted) != nil {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	id := accepted.OrderID
	st := e.runToTerminal(id, 3*e.policy.MaxFailures)
	if st.ProcessState != workflow.Compensated || !strings.Contains(st.LastError, role) {
		t.Fatalf("final %s", brief(st))
	}
	e.pumpEvents()

	leaks := []string{account, awsQueue, queue, "arn:", "AccessDenied"}
	noLeak := func(what, body string) {
		t.Helper()
		for _, l := range leaks {
			if i := strings.Index(body, l); i >= 0 {
				t.Errorf("%s shows %q: …%s…", what, l, body[max(i-80, 0):min(i+len(l)+20, len(body))])
			}
		}
	}
	get := e.asClient("/orders/" + id)
	if get.StatusCode != 200 {
		t.Fatalf("GET /orders/%s = %d %s", id, get.StatusCode, get.Body)
	}
	noLeak("GET /orders/{id}", get.Body)
	var order struct {
		Reason, ReasonText string
		Steps              []map[string]any
	}
	if err := json.Unmarshal([]byte(get.Body), &order); err != nil {
		t.Fatal(err)
	}
	if order.Reason != "dispatch-failed" || !strings.Contains(order.ReasonText, "charge-payment") {
		t.Errorf("GET /orders/{id}: reason %q %q, want dispatch-failed naming charge-payment", order.Reason, order.ReasonText)
	}
	if r := order.Steps[1]["reason"]; r != "dispatch-failed" {
		t.Errorf("GET /orders/{id}: step charge-payment's reason %v, want dispatch-failed", r)
	}

	list := e.asClient("/orders")
	if list.StatusCode != 200 || !strings.Contains(list.Body, id) || !strings.Contains(list.Body, `"reason":"dispatch-failed"`) {
		t.Errorf("GET /orders = %d %s, want the order with reason dispatch-failed", list.StatusCode, list.Body)
	}
	noLeak("GET /orders", list.Body)

	msgs := enginetest.ReceiveAll(e.ctx, t, e.sqs, mine.URL, int(st.EventSeq), 10*time.Second)
	withReason := 0
	for _, m := range msgs {
		body := aws.ToString(m.Body)
		noLeak("status event", body)
		if strings.Contains(body, `"reason":"dispatch-failed"`) {
			withReason++
		}
	}
	if withReason == 0 {
		t.Errorf("no status event carries reason dispatch-failed among %d", len(msgs))
	}

	ops := e.operator("GET", "/ops/orders/"+id, id)
	for _, want := range []string{role, awsQueue, `"reason":"dispatch-failed"`} {
		if ops.StatusCode != 200 || !strings.Contains(ops.Body, want) {
			t.Errorf("GET /ops/orders/{id} = %d, lacks %q: %s", ops.StatusCode, want, ops.Body)
		}
	}
}
