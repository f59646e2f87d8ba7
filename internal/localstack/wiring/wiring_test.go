package wiring_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/localstack/streambridge"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/internal/testkit/reqcount"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

type env struct {
	t      *testing.T
	ctx    context.Context
	sys    *wiring.System
	sim    *remotesim.Sim
	clk    *clock.Offset
	sqs    *sqs.Client
	alerts enginetest.Queue
	policy workflow.Policy
	logs   *logtest.Buffer
}

// transitions counts the log lines carrying each workflow.Transition, as the
// stack's metric filters ({ $.transition = "..." }) do in CloudWatch.
func (e *env) transitions() map[workflow.Transition]int {
	e.t.Helper()
	counts := map[workflow.Transition]int{}
	for _, rec := range e.logs.Records(e.t) {
		if v, ok := rec[workflow.TransitionKey].(string); ok {
			counts[workflow.Transition(v)]++
		}
	}
	return counts
}

func (e *env) assertTransitions(want map[workflow.Transition]int) {
	e.t.Helper()
	if got := e.transitions(); !maps.Equal(got, want) {
		e.t.Fatalf("transitions logged %v, want %v", got, want)
	}
}

// forwardOnly is the default workflow with no step declaring a compensation.
func forwardOnly() workflow.Definition {
	d := workflow.Reference()
	for i := range d.Steps {
		d.Steps[i].Compensable = false
	}
	return d
}

type envOptions struct {
	// counter counts the handlers' AWS requests when it is not nil; the
	// pollers' requests are not counted.
	counter *reqcount.Counter
	// workflow is forwardOnly when unset: an order that fails ends in
	// Error, as the tests of the core's recovery, which predate
	// compensation, expect. compensation_test.go runs the compensable one.
	workflow workflow.Definition
	// onRemote sees every call to the remote service before the simulator.
	onRemote func(r *http.Request)
	// streams wires the state table's stream to the Notifier (PumpEvents).
	streams    bool
	wrapEvents func(notifier.Sender) notifier.Sender
	// wrapDeadlines wraps what the Timer sends Deadlines with.
	wrapDeadlines func(timer.Sender) timer.Sender
	// remote wraps the simulator, to answer in ways it does not.
	remote func(sim *remotesim.Sim) http.Handler
	// agent tunes the agents' configuration.
	agent func(*agent.Config)
	// visibility of every queue; 1 s when zero.
	visibility time.Duration
	// wrapStore and wrapSender wrap what each role's handler is given.
	wrapStore  func(role string, s wiring.Store) wiring.Store
	wrapSender func(role string, s wiring.Sender) wiring.Sender
	// ddbTransport carries the handlers' DynamoDB requests.
	ddbTransport http.RoundTripper
}

// newEnv builds a System on the test engines, as o says, and the remote
// simulator it calls.
func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.workflow.Name == "" {
		o.workflow = forwardOnly()
	}
	counter := o.counter
	ctx := context.Background()
	sim := remotesim.New(remotesim.WithSeed(1))
	var remote http.Handler = sim
	if o.remote != nil {
		remote = o.remote(sim)
	}
	if o.onRemote != nil {
		next := remote
		remote = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { o.onRemote(r); next.ServeHTTP(w, r) })
	}
	srv := httptest.NewServer(remote)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	sqsc, snsc, ddb, handlerSQS := enginetest.SQS(t), enginetest.SNS(t), enginetest.DynamoDB(t), enginetest.SQS(t)
	if o.ddbTransport != nil {
		ddb = enginetest.DynamoDB(t, func(d *dynamodb.Options) { d.HTTPClient = &http.Client{Transport: o.ddbTransport} })
	}
	if counter != nil {
		ddb = enginetest.DynamoDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, counter.Add) })
		handlerSQS = enginetest.SQS(t, func(o *sqs.Options) { o.APIOptions = append(o.APIOptions, counter.Add) })
		snsc = enginetest.SNS(t, func(o *sns.Options) { o.APIOptions = append(o.APIOptions, counter.Add) })
	}
	clk := &clock.Offset{}
	logs := &logtest.Buffer{}
	// No backoff, so a retried step is visible on the next poll.
	policy := workflow.Policy{MaxFailures: 3, ClaimTimeout: time.Minute, AlertTimeout: time.Minute, Retention: workflow.DefaultRetention}
	agentCfg := agent.DefaultConfig()
	agentCfg.RetryBase, agentCfg.RetryMax = time.Millisecond, 5*time.Millisecond
	if o.agent != nil {
		o.agent(&agentCfg)
	}
	visibility := o.visibility
	if visibility == 0 {
		visibility = time.Second
	}
	var streams *dynamodbstreams.Client
	if o.streams {
		streams = enginetest.Streams(t, streambridge.ForDynamoDBLocal)
	}
	sys, err := wiring.Build(ctx, wiring.Options{
		Streams: streams, WrapEvents: o.wrapEvents, WrapDeadlines: o.wrapDeadlines,
		DynamoDB: ddb, SQS: handlerSQS, PollSQS: sqsc, SNS: snsc,
		Prefix: enginetest.UniqueName(t, "sys"), Region: enginetest.Region,
		Workflows: workflow.Single(o.workflow), Policy: policy, RemoteBaseURL: srv.URL, Agent: agentCfg,
		MaxReceiveCount: 2, VisibilityTimeout: visibility,
		Clock: clk, Log: slog.New(slog.NewJSONHandler(logs, nil)),
		WrapStore: o.wrapStore, WrapSender: o.wrapSender, OperatorPrincipals: []string{testOperator},
	})
	if err != nil {
		t.Fatal(err)
	}
	alerts := enginetest.CreateQueue(t, sqsc, enginetest.UniqueName(t, "alerts"), enginetest.QueueOptions{})
	if _, err := snsc.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(sys.AlertTopicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(alerts.ARN)}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, sys: sys, sim: sim, clk: clk, sqs: sqsc, alerts: alerts, policy: policy, logs: logs}
}

const orderBody = `{"customerId":"c-42","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2,"unitPriceCents":1250}]}`

// post submits an order through the Submission handler as API Gateway would.
func (e *env) post(body, key string) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	req := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /orders", RawPath: "/orders", Body: body,
		Headers: map[string]string{"content-type": "application/json"},
	}
	req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path = "POST", "/orders"
	req.RequestContext.RequestID = "req-" + key
	req.RequestContext.Authorizer = testClient()
	if key != "" {
		req.Headers["idempotency-key"] = key
	}
	resp, err := e.sys.Submission.Handle(e.ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// testClient is the IAM identity API Gateway passes for the tests' client.
func testClient() *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			AccessKey: "AKIATESTCLIENT", AccountID: "111122223333", CallerID: "AIDAZ3EXAMPLETCLIENT1",
			UserARN: "arn:aws:iam::111122223333:user/test-client", UserID: "AIDAZ3EXAMPLETCLIENT1",
		},
	}
}

// submit posts an order and returns its ID.
func (e *env) submit(key string) string {
	e.t.Helper()
	resp := e.post(orderBody, key)
	if resp.StatusCode != 202 {
		e.t.Fatalf("POST /orders = %d %s", resp.StatusCode, resp.Body)
	}
	var out struct{ OrderID string }
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || out.OrderID == "" {
		e.t.Fatalf("POST body %s: %v", resp.Body, err)
	}
	return out.OrderID
}

func (e *env) settle() {
	e.t.Helper()
	if _, err := e.sys.Settle(e.ctx, 50); err != nil {
		e.t.Fatal(err)
	}
}

// run submits an order and delivers every message until the queues are
// quiet; it returns the order's ID and its record then.
func (e *env) run() (string, workflow.State) {
	e.t.Helper()
	id := e.submit("")
	e.settle()
	return id, e.state(id)
}

func (e *env) state(id string) workflow.State {
	e.t.Helper()
	st, err := e.sys.Store.GetState(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// supervise runs the Supervisor once, as the EventBridge rule does.
func (e *env) supervise() {
	e.t.Helper()
	if err := e.sys.Supervisor.Handle(e.ctx, events.EventBridgeEvent{DetailType: "Scheduled Event", Source: "aws.events"}); err != nil {
		e.t.Fatal(err)
	}
}

// dropAgentRequests receives and deletes the pending requests of an agent,
// as if its Lambda had crashed with them; it returns the bodies.
func (e *env) dropAgentRequests(step string, want int) []string {
	e.t.Helper()
	msgs := enginetest.ReceiveAll(e.ctx, e.t, e.sqs, e.sys.AgentQueues[step].URL, want, 10*time.Second)
	bodies := make([]string, len(msgs))
	for i, m := range msgs {
		bodies[i] = aws.ToString(m.Body)
	}
	return bodies
}

// expire jumps every actor's clock past the current CompleteBy of id.
func (e *env) expire(id string) {
	e.t.Helper()
	e.clk.Advance(e.state(id).CompleteBy.Sub(e.clk.Now()) + time.Second)
}

func (e *env) assertEffectsOnce(id string, steps ...string) {
	e.t.Helper()
	for _, step := range steps {
		if n := e.sim.EffectCount(workflow.IdempotencyKey(id, step)); n != 1 {
			e.t.Errorf("effects of %s/%s = %d, want exactly 1", id, step, n)
		}
	}
}

// assertRemote checks how often the remote applied step of order id, and
// how often it undid it.
func (e *env) assertRemote(id, step string, applied, undone int) {
	e.t.Helper()
	key := workflow.IdempotencyKey(id, step)
	if a, u := e.sim.EffectCount(key), e.sim.CompensationCount(key); a != applied || u != undone {
		e.t.Errorf("%s of %s: applied %d times, undone %d; want %d and %d", step, id, a, u, applied, undone)
	}
}

func (e *env) alertsReceived(want int) []enginetest.Notification {
	e.t.Helper()
	msgs := enginetest.ReceiveAll(e.ctx, e.t, e.sqs, e.alerts.URL, want, 10*time.Second)
	out := make([]enginetest.Notification, len(msgs))
	for i, m := range msgs {
		out[i] = enginetest.DecodeNotification(e.t, aws.ToString(m.Body))
	}
	return out
}

func TestHappyPathThroughAllSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id, st := e.run()
	if st.ProcessState != workflow.Processed || st.Attempt != 2 || st.FailureCount != 0 || st.LockedBy != "" {
		t.Fatalf("final state %+v", st)
	}
	for _, s := range st.Steps {
		if s.State != workflow.StepSucceeded || s.Attempts != 1 || len(s.Output) == 0 || s.FinishedAt == nil {
			t.Fatalf("step %+v", s)
		}
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted:      1,
		workflow.TransitionStepCompleted: 1, workflow.TransitionProcessed: 1,
	})
	// No handler logs the order's contents: customer, items, prices stay in
	// the tables and message.
	// As JSON values and keys: bare "c-42" or "1250" can turn up inside a
	// random order ID or a Unix-millisecond time.
	for _, secret := range []string{`"c-42"`, `"BOOK-1"`, `:1250`, `"unitPriceCents"`, `"customerId"`} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the logs carry the order's %q", secret)
		}
	}
	// The status API reports it.
	req := events.APIGatewayV2HTTPRequest{RawPath: "/orders/" + id, RouteKey: "GET /orders/{id}", PathParameters: map[string]string{"id": id}}
	req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path = "GET", "/orders/"+id
	req.RequestContext.Authorizer = testClient()
	resp, _ := e.sys.Submission.Handle(e.ctx, req)
	if resp.StatusCode != 200 || !strings.Contains(resp.Body, `"Processed"`) {
		t.Fatalf("GET = %d %s", resp.StatusCode, resp.Body)
	}
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.alerts.URL, 200*time.Millisecond)
}

func TestAgentTimeoutIsRetriedBySupervisor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.submit("")
	// The Scheduler claims and dispatches; the agent dies with the request.
	e.poll(0)
	e.dropAgentRequests("reserve-inventory", 1)
	// Nothing happens until CompleteBy passes.
	e.supervise()
	if st := e.state(id); st.ProcessState != workflow.Processing || st.FailureCount != 0 {
		t.Fatalf("before expiry %+v", st)
	}
	e.expire(id)
	e.supervise()
	if st := e.state(id); st.ProcessState != workflow.Pending || st.FailureCount != 1 || st.LockedBy != "" {
		t.Fatalf("after supervisor %+v", st)
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Processed || st.Attempt != 3 || st.Steps[0].Attempts != 2 || st.Steps[0].Failures != 1 {
		t.Fatalf("final %+v", st)
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted: 1, workflow.TransitionClaimed: 1, workflow.TransitionRetried: 1,
		workflow.TransitionStepCompleted: 1, workflow.TransitionProcessed: 1,
	})
}

func TestRepeatedTimeoutsEndInErrorWithOneAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.submit("")
	for i := range e.policy.MaxFailures {
		e.poll(0)
		e.dropAgentRequests("reserve-inventory", 1)
		e.expire(id)
		e.supervise()
		if st := e.state(id); st.FailureCount != i+1 {
			t.Fatalf("after timeout %d: %+v", i+1, st)
		}
	}
	st := e.state(id)
	if st.ProcessState != workflow.Error || st.FailureCount != e.policy.MaxFailures || st.AlertPending {
		t.Fatalf("final %+v", st)
	}
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted: 1, workflow.TransitionClaimed: 2,
		workflow.TransitionRetried: 2, workflow.TransitionGaveUp: 1,
	})
	got := e.alertsReceived(1)
	a := got[0]
	// Its step has no undo and may have been applied: nothing is undone,
	// and the alert says so.
	if !strings.Contains(a.Subject, "without undo") || !strings.Contains(a.Message, "reserve-inventory may have been applied") ||
		!strings.Contains(a.Message, "did not complete by") || !strings.Contains(a.Message, id) || a.MessageAttributes["kind"].Value != "not-undoable" {
		t.Fatalf("alert %+v", a)
	}
	// Later runs neither count further nor alert again.
	e.clk.Advance(time.Hour)
	e.supervise()
	if st := e.state(id); st.FailureCount != e.policy.MaxFailures {
		t.Fatalf("FailureCount grew past the threshold: %+v", st)
	}
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.alerts.URL, 300*time.Millisecond)
}

func TestPermanentFailureStopsTheOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sim.RejectStep("charge-payment")
	id, st := e.run()
	if st.ProcessState != workflow.Error || st.Step != "charge-payment" || !strings.Contains(st.LastError, "rejected") || st.AlertPending {
		t.Fatalf("final %+v", st)
	}
	if st.Steps[0].State != workflow.StepSucceeded || st.Steps[1].State != workflow.StepFailed {
		t.Fatalf("steps %+v", st.Steps)
	}
	e.assertEffectsOnce(id, "reserve-inventory")
	e.assertRemote(id, "charge-payment", 0, 0) // rejected
	e.assertTransitions(map[workflow.Transition]int{
		workflow.TransitionAccepted:      1,
		workflow.TransitionStepCompleted: 1, workflow.TransitionFailed: 1,
	})
	a := e.alertsReceived(1)[0]
	// reserve-inventory has no undo and was applied: the order cannot be
	// undone whole, so nothing is, and the alert names it.
	if a.MessageAttributes["kind"].Value != "not-undoable" || !strings.Contains(a.Message, "step reserve-inventory was applied and has no undo; rejected") {
		t.Fatalf("alert %+v", a)
	}
}

func TestLateReplyFromOldAttemptIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.submit("")
	e.poll(0)
	old := e.dropAgentRequests("reserve-inventory", 1)[0]
	e.expire(id)
	e.supervise()
	// Attempt 2 is claimed and its request waits for the agent.
	e.poll(0)
	if st := e.state(id); st.Attempt != 2 || st.ProcessState != workflow.Processing {
		t.Fatalf("after reclaim %+v", st)
	}
	// A zombie agent of attempt 1, whose clock runs behind, replies now.
	req, err := message.DecodeAgentRequest(old)
	if err != nil {
		t.Fatal(err)
	}
	zombie := message.AgentReply{V: 1, Kind: message.KindAgentReply, OrderID: id, Step: req.Step, StepIndex: req.StepIndex,
		Attempt: req.Attempt, Outcome: message.Succeeded, Output: json.RawMessage(`{"zombie":true}`)}
	e.sendRaw(e.sys.ResponseQueue.URL, message.Encode(zombie))
	e.poll(1)
	if st := e.state(id); st.Attempt != 2 || st.StepIndex != 0 || st.ProcessState != workflow.Processing || len(st.Steps[0].Output) != 0 {
		t.Fatalf("zombie reply committed: %+v", st)
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Processed || strings.Contains(string(st.Steps[0].Output), "zombie") {
		t.Fatalf("final %+v", st)
	}
	if n := e.transitions()[workflow.TransitionStaleReply]; n != 1 {
		t.Fatalf("stale replies logged %d, want 1", n)
	}
}

func TestDuplicateDeliveriesChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.submit("")
	// The schedule message is delivered twice: one claim, one dispatch.
	sched := message.Encode(message.NewSchedule(id, "order-v1", 0, "duplicate"))
	e.sendRaw(e.sys.SchedulerQueue.URL, sched)
	for range 2 {
		e.poll(0)
	}
	reqs := e.dropAgentRequests("reserve-inventory", 1)
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.sys.AgentQueues["reserve-inventory"].URL, 200*time.Millisecond)
	// The agent request is delivered twice, so the agent replies twice; the
	// remote applies the effect once, and the second reply is stale.
	for range 2 {
		e.sendRaw(e.sys.AgentQueues["reserve-inventory"].URL, reqs[0])
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Processed || st.Attempt != 2 || st.Steps[0].Attempts != 1 {
		t.Fatalf("final %+v", st)
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
}

func TestConcurrentSchedulersClaimOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.submit("")
	// The first step comes claimed; its request is lost and the Supervisor
	// hands the step back. Drain that schedule message, then hand the same
	// message to eight Scheduler invocations at once.
	e.dropAgentRequests("reserve-inventory", 1)
	e.expire(id)
	e.supervise()
	enginetest.ReceiveAll(e.ctx, t, e.sqs, e.sys.SchedulerQueue.URL, 1, 10*time.Second)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: message.Encode(message.NewSchedule(id, "order-v1", 0, "race"))}}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := e.sys.Scheduler.Handle(e.ctx, ev)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("Handle = %+v, %v", resp, err)
			}
		})
	}
	wg.Wait()
	e.dropAgentRequests("reserve-inventory", 1)
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.sys.AgentQueues["reserve-inventory"].URL, 200*time.Millisecond)
	if st := e.state(id); st.Attempt != 2 || st.ProcessState != workflow.Processing {
		t.Fatalf("attempt %d (%s) after racing claims, want 2", st.Attempt, st.ProcessState)
	}
}

func TestTwoSupervisorsRecoverEachRecordOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.submit("")
	}
	for range 3 {
		e.poll(0)
	}
	e.dropAgentRequests("reserve-inventory", n)
	e.clk.Advance(2 * time.Minute)
	// Two Supervisors fire at once over the same expired records.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { e.supervise() })
	}
	wg.Wait()
	for _, id := range ids {
		if st := e.state(id); st.FailureCount != 1 || st.ProcessState != workflow.Pending {
			t.Fatalf("%s after two supervisors: %+v", id, st)
		}
	}
	// Exactly one re-enqueue per record.
	msgs := enginetest.ReceiveAll(e.ctx, t, e.sqs, e.sys.SchedulerQueue.URL, n, 10*time.Second)
	seen := map[string]bool{}
	for _, m := range msgs {
		s, err := message.DecodeSchedule(aws.ToString(m.Body))
		if err != nil || seen[s.OrderID] {
			t.Fatalf("re-enqueue %v duplicate=%v", err, seen[s.OrderID])
		}
		seen[s.OrderID] = true
	}
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.sys.SchedulerQueue.URL, 300*time.Millisecond)
}

func TestIdempotentSubmission(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	first := e.submit("checkout-77")
	again := e.post(orderBody, "checkout-77")
	if again.StatusCode != 202 || !strings.Contains(again.Body, first) {
		t.Fatalf("replay = %d %s", again.StatusCode, again.Body)
	}
	other := e.post(strings.Replace(orderBody, `"quantity":2`, `"quantity":3`, 1), "checkout-77")
	if other.StatusCode != 422 || !strings.Contains(other.Headers["Content-Type"], "problem+json") {
		t.Fatalf("reuse with another body = %d %v %s", other.StatusCode, other.Headers, other.Body)
	}
	// One dispatch of the first step only, and nothing for the Scheduler.
	e.dropAgentRequests("reserve-inventory", 1)
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.sys.AgentQueues["reserve-inventory"].URL, 300*time.Millisecond)
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.sys.SchedulerQueue.URL, 300*time.Millisecond)
}

// TestLostFirstDispatchIsRetriedAndLostHandbackRequeued: the first step's
// request is lost (as if the Submission's send after the transaction had
// failed), so the Supervisor retries the step at its CompleteBy; the
// schedule message of that retry is lost too, so the Supervisor requeues
// the unclaimed record once its claim timeout passes.
func TestLostFirstDispatchIsRetriedAndLostHandbackRequeued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.submit("")
	e.dropAgentRequests("reserve-inventory", 1)
	e.expire(id)
	e.supervise()
	if st := e.state(id); st.FailureCount != 1 || st.ProcessState != workflow.Pending {
		t.Fatalf("after the retry %+v", st)
	}
	enginetest.ReceiveAll(e.ctx, t, e.sqs, e.sys.SchedulerQueue.URL, 1, 10*time.Second)
	e.expire(id)
	e.supervise()
	if st := e.state(id); st.Requeues != 1 || st.FailureCount != 1 || st.ProcessState != workflow.Pending {
		t.Fatalf("after requeue %+v", st)
	}
	e.settle()
	if st := e.state(id); st.ProcessState != workflow.Processed {
		t.Fatalf("final %+v", st)
	}
}

func TestPoisonMessageGoesToDLQWithoutBlockingTheBatch(t *testing.T) {
	t.Parallel()
	// A request for reserve-inventory that lands on charge-payment's queue:
	// well-formed, but poison to that Agent.
	misrouted := message.Encode(message.AgentRequest{V: message.Version, Kind: message.KindAgentRequest,
		OrderID: "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", Step: "reserve-inventory", Attempt: 1,
		CompleteBy: time.Now().Add(time.Hour), IdempotencyKey: "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11/reserve-inventory", Input: json.RawMessage(`{}`)})
	tests := []struct {
		name, body, orderID string
		queue               func(*wiring.System) wiring.Queue
	}{
		{"unknown version on the scheduler queue", `{"v":99}`, "", func(s *wiring.System) wiring.Queue { return s.SchedulerQueue }},
		{"wrong step on an agent queue", misrouted, "0b7f3c9e-6a52-4c1e-9d55-5b1e0f4a2c11", func(s *wiring.System) wiring.Queue { return s.AgentQueues["charge-payment"] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			id := e.submit("")
			q := tc.queue(e.sys)
			e.sendRaw(q.URL, tc.body)
			// Poll until the poison has been received MaxReceiveCount times
			// and the next receive moves it to the DLQ, while the order
			// runs on.
			var dead []sqstypes.Message
			await.Until(t, 20*time.Second, "the poison message on the DLQ", func() (bool, error) {
				if _, err := e.sys.PumpOnce(e.ctx); err != nil && !errors.Is(err, sqsbridge.ErrBatchFailed) {
					t.Fatal(err)
				}
				out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.DLQURL), MaxNumberOfMessages: 10})
				if err != nil {
					t.Fatal(err)
				}
				dead = out.Messages
				return len(dead) > 0, fmt.Errorf("the DLQ is empty; order %+v", e.state(id))
			})
			if body := aws.ToString(dead[0].Body); len(dead) != 1 || body != tc.body {
				t.Fatalf("DLQ holds %s", body)
			}
			if st := e.state(id); st.ProcessState != workflow.Processed {
				t.Fatalf("order blocked by poison: %+v", st)
			}
			// The last receive raised one alert naming the message.
			a := e.alertsReceived(1)[0]
			if a.MessageAttributes["kind"].Value != "poison-message" || a.MessageAttributes["alertId"].Value != "poison/"+aws.ToString(dead[0].MessageId) ||
				!strings.Contains(a.Message, "dead-letter queue") || (tc.orderID != "" && a.MessageAttributes["orderId"].Value != tc.orderID) {
				t.Fatalf("alert %+v", a)
			}
		})
	}
}

// TestRequestsPerOrder pins the AWS requests the handlers make for a
// two-step order on the happy path (docs/cost-and-limits.md quotes these numbers).
func TestRequestsPerOrder(t *testing.T) {
	t.Parallel()
	var counter reqcount.Counter
	e := newEnv(t, envOptions{counter: &counter})
	counter.Reset()
	if _, st := e.run(); st.ProcessState != workflow.Processed {
		t.Fatalf("final %+v", st)
	}
	got := counter.Snapshot()
	delete(got, "DynamoDB GetItem") // the test's own state read above
	want := map[string]int{
		"DynamoDB TransactWriteItems": 1, // submission: order + state record, step 1 claimed
		"DynamoDB UpdateItem":         2, // commit step 1 + claim step 2; commit step 2
		"SQS SendMessage":             4, // 2 agent requests (the first from the submission); 2 agent replies
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests per order = %v, want %v", got, want)
	}
}
