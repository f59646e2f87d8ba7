package wiring_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/localstack/lossy"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/workflow"
)

// The tests of issue 11: places where "nothing lost, nothing done twice, and
// everything that may have been applied is undone" leaked.

// bigOutput answers every successful call of step with a body of size
// bytes, as a remote that applied the step and returned a large result
// does (and keeps doing for every replay under the key).
func bigOutput(step string, size int) func(*remotesim.Sim) http.Handler {
	return func(sim *remotesim.Sim) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, r)
			if r.URL.Path != "/v1/steps/"+step || rec.Code != http.StatusOK {
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"receipt":%q}`, strings.Repeat("x", size))
		})
	}
}

// runToTerminal drives an order until its record is terminal: deliver every
// message, then let the Supervisor act on whatever expired. It fails the test
// after rounds rounds.
func (e *env) runToTerminal(id string, rounds int) workflow.State {
	e.t.Helper()
	for range rounds {
		if _, err := e.sys.Settle(e.ctx, 50); err != nil {
			e.t.Fatal(err)
		}
		if st := e.state(id); st.ProcessState.Terminal() {
			return st
		}
		e.expire(id)
		e.supervise()
	}
	e.t.Fatalf("order %s not terminal after %d rounds: %s", id, rounds, brief(e.state(id)))
	return workflow.State{}
}

// assertNetZero checks that the remote holds nothing of steps: each applied
// effect was undone exactly once.
func (e *env) assertNetZero(id string, steps ...string) {
	e.t.Helper()
	for _, step := range steps {
		key := workflow.IdempotencyKey(id, step)
		if applied, undone := e.sim.EffectCount(key), e.sim.CompensationCount(key); applied != undone || undone > 1 {
			e.t.Errorf("%s: applied %d times, undone %d times; a stopped order must net nothing", step, applied, undone)
		}
	}
}

// TestUncertainOutcomeOfAnOversizedReplyIsUndone: the remote applies the
// step and answers 2xx with a body the agent cannot use. Whether anything
// was applied is unknown to the system, so the step is undone with the
// others; before, the order ended Compensated (or in Error on the first
// step) with the effect left applied.
func TestUncertainOutcomeOfAnOversizedReplyIsUndone(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"reserve-inventory", "charge-payment"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{workflow: workflow.Reference(), remote: bigOutput(step, 300<<10)})
			id := e.submit("")
			st := e.runToTerminal(id, 5)
			if st.ProcessState != workflow.Compensated {
				t.Fatalf("final %s, want Compensated: %s", st.ProcessState, brief(st))
			}
			if !strings.Contains(st.LastError, "uncertain") {
				t.Errorf("LastError %q does not say the outcome is uncertain", st.LastError)
			}
			if e.sim.EffectCount(workflow.IdempotencyKey(id, step)) != 1 {
				t.Fatalf("the remote did not apply %s: the test is broken", step)
			}
			e.assertNetZero(id, "reserve-inventory", "charge-payment")
		})
	}
}

// TestUncertainOutcomeOfAnAmbiguousTryThenRejectionIsUndone: a try times out
// after the remote applied it, and the next try of the same attempt is
// refused with a 4xx (a real idempotent API answers 409 for a key still in
// progress). The rejection does not prove nothing was applied.
func TestUncertainOutcomeOfAnAmbiguousTryThenRejectionIsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference(), agent: func(c *agent.Config) {
		c.RemoteTimeout = 200 * time.Millisecond
	}})
	id := e.submit("")
	key := workflow.IdempotencyKey(id, "charge-payment")
	e.sim.Script(key, remotesim.ApplyThenHang, remotesim.Permanent)
	st := e.runToTerminal(id, 5)
	if st.ProcessState != workflow.Compensated || !strings.Contains(st.LastError, "uncertain") {
		t.Fatalf("final %s", brief(st))
	}
	if e.sim.EffectCount(key) != 1 {
		t.Fatalf("charge-payment applied %d times; the script should have applied it once", e.sim.EffectCount(key))
	}
	e.assertNetZero(id, "reserve-inventory", "charge-payment")
}

// TestUncertainOutcomeOfACertainRejectionIsVoidedAgainstADuplicate is the
// chaos seed 115673927 case: the remote rejects charge-payment (nothing
// applied), the order stops, and then a duplicate delivery of the same agent
// request (same attempt, still before CompleteBy) reaches the remote, which
// applies it: a real service does not always remember a rejection under its
// key. The step that stopped the order is undone too, which either undoes
// the duplicate's effect or, coming first, makes the remote refuse it.
func TestUncertainOutcomeOfACertainRejectionIsVoidedAgainstADuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	id := e.submit("")
	key := workflow.IdempotencyKey(id, "charge-payment")
	e.sim.Script(key, remotesim.Permanent)
	e.poll(0) // claim reserve-inventory
	e.poll(2) // its agent
	e.poll(1) // commit, claim and dispatch charge-payment
	request := e.dropAgentRequests("charge-payment", 1)[0]
	e.sendRaw(e.sys.AgentQueues["charge-payment"].URL, request)
	e.poll(3) // the agent: 422 rejected
	e.poll(1) // commit the failure and start the compensation
	// The duplicate of the request arrives now.
	e.sendRaw(e.sys.AgentQueues["charge-payment"].URL, request)
	st := e.runToTerminal(id, 5)
	if st.ProcessState != workflow.Compensated {
		t.Fatalf("final %s", brief(st))
	}
	e.assertNetZero(id, "reserve-inventory", "charge-payment")
	if e.sim.CompensationCount(workflow.IdempotencyKey(id, "reserve-inventory")) != 1 {
		t.Fatalf("reserve-inventory not undone")
	}
}

// poll has the i-th queue's bridge deliver one batch.
func (e *env) poll(i int) {
	e.t.Helper()
	if _, err := e.sys.Bridges[i].PollOnce(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// brief is what a failure message shows of a record: no input, no outputs.
func brief(st workflow.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %s (step %d) attempt %d failures %d lastError %q alertPending %v cancelled %v",
		st.ProcessState, st.Step, st.StepIndex, st.Attempt, st.FailureCount, st.LastError, st.AlertPending, st.Cancelled)
	for _, s := range st.Steps {
		fmt.Fprintf(&b, "; %s %s attempts %d failures %d error %q undo %q/%d", s.Name, s.State, s.Attempts, s.Failures, s.Error, s.Compensation, s.CompensationAttempts)
	}
	return b.String()
}

func (e *env) sendRaw(queueURL, body string) {
	e.t.Helper()
	if _, err := e.sqs.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
		e.t.Fatal(err)
	}
}

// TestUncertainOutcomeOperatorCancelsAnOrderInError: an order in Error may
// hold applied effects (an order stopped before this release, or one whose
// step cannot be undone); an operator's cancel undoes whatever may have been
// applied. Before, cancel answered 409 for an order in Error.
func TestUncertainOutcomeOperatorCancelsAnOrderInError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: workflow.Reference()})
	id := e.submit("")
	e.poll(0) // claim reserve-inventory
	e.poll(2) // its agent
	e.poll(1) // commit, claim and dispatch charge-payment
	st := e.state(id)
	// The record goes to Error the way releases before this one left it:
	// nothing undone. A workflow whose steps have no undo rejects the step
	// so; the order itself runs the default workflow, whose steps do.
	noUndo := workflow.Machine{Def: forwardOnly(), Policy: e.policy}
	if failed, err := e.sys.Store.Apply(e.ctx, noUndo.StepRejected(id, 1, st.Attempt, "rejected", false, "scheduler-test", e.clk.Now())); err != nil ||
		failed.ProcessState != workflow.Error || !failed.AlertPending {
		t.Fatalf("rejecting step 1: %s, %v", brief(failed), err)
	}
	e.dropAgentRequests("charge-payment", 1)
	resp := e.operator("POST", "/orders/"+id+"/cancel", id)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel of an order in Error = %d %s", resp.StatusCode, resp.Body)
	}
	final := e.runToTerminal(id, 5)
	// A compensation a cancel started ends Cancelled.
	if final.ProcessState != workflow.Cancelled || !final.Cancelled || final.AlertPending {
		t.Fatalf("final %s", brief(final))
	}
	e.assertNetZero(id, "reserve-inventory", "charge-payment")
	if e.sim.CompensationCount(workflow.IdempotencyKey(id, "reserve-inventory")) != 1 {
		t.Fatal("the reservation was not released")
	}
}

// testOperator is the operator the tests' operator requests come from: an
// IAM user the wired Submission lists as an operator.
const testOperator = "arn:aws:iam::111122223333:user/operator"

// operator calls an operator route as API Gateway would, as an IAM
// principal with the operator policy.
func (e *env) operator(method, path, id string) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	route := strings.Replace(path, id, "{id}", 1)
	req := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: method + " " + route, RawPath: path,
		PathParameters: map[string]string{"id": id}}
	req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path = method, path
	req.RequestContext.RequestID = "req-operator"
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			AccessKey: "AKIAOPERATOR", AccountID: "111122223333", CallerID: "AIDAZ3EXAMPLEOPERATOR",
			UserARN: testOperator, UserID: "AIDAZ3EXAMPLEOPERATOR",
		},
	}
	resp, err := e.sys.Submission.Handle(e.ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// threeBigSteps is a three-step workflow, for outputs that add up.
func threeBigSteps() workflow.Definition { return threeSteps() }

// TestStepOutputOverItsLimitIsAnUncertainFailure: two outputs of 130 KiB
// each fit their own replies, but each is over its step's limit (32 KiB by
// default), which is what the definition's worst case was validated with:
// let in, outputs past their limits could take a later request past the SQS
// message limit or the record past the DynamoDB item limit. The output is
// refused where it enters the system, with an error naming the limit, and
// the step is undone.
func TestStepOutputOverItsLimitIsAnUncertainFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{workflow: threeBigSteps(), remote: func(sim *remotesim.Sim) http.Handler {
		inner := bigOutput("reserve-inventory", 130<<10)(sim)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/steps/charge-payment" {
				bigOutput("charge-payment", 130<<10)(sim).ServeHTTP(w, r)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}})
	id := e.submit("")
	st := e.runToTerminal(id, 8)
	if st.ProcessState != workflow.Compensated {
		t.Fatalf("final %s", brief(st))
	}
	if !strings.Contains(st.Steps[0].Error, "limit") || !strings.Contains(st.LastError, "uncertain") {
		t.Fatalf("the error does not name the limit: step %q, last %q", st.Steps[0].Error, st.LastError)
	}
	e.assertNetZero(id, "reserve-inventory", "charge-payment", "ship-order")
}

// failingSender fails every Send that fail picks, like a queue whose
// permission or key was revoked.
type failingSender struct {
	next wiring.Sender
	fail func(queueURL, body string) bool
	// err is what a failed send returns; errSendRevoked when nil.
	err error

	mu    sync.Mutex
	calls int
}

var errSendRevoked = errors.New("AccessDenied: not authorized to perform sqs:SendMessage")

func (s *failingSender) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	if s.fail(queueURL, body) {
		s.mu.Lock()
		s.calls++
		s.mu.Unlock()
		if s.err != nil {
			return s.err
		}
		return errSendRevoked
	}
	return s.next.Send(ctx, queueURL, body, delay)
}

// isForward reports whether body asks an agent to perform (not undo) a step.
func isForward(body string) bool {
	var m struct{ Kind, Action string }
	return json.Unmarshal([]byte(body), &m) == nil && m.Kind == "agent.request" && m.Action != "compensate"
}

// TestDispatchThatKeepsFailingGivesUpWithAnAlert: every SendMessage of a
// step's request fails. Each failed dispatch counts as a failure of the step,
// so the order stops at the threshold, undoes what it may have done, and an
// alert names the order and the cause. Before, the claim, release and
// re-send cycle ran forever with FailureCount 0.
func TestDispatchThatKeepsFailingGivesUpWithAnAlert(t *testing.T) {
	t.Parallel()
	var queue string
	e := newEnv(t, envOptions{workflow: workflow.Reference(), wrapSender: func(role string, s wiring.Sender) wiring.Sender {
		if role != "scheduler" {
			return s
		}
		return &failingSender{next: s, fail: func(url, body string) bool { return url == queue && isForward(body) }}
	}})
	queue = e.sys.AgentQueues["charge-payment"].URL
	id := e.submit("")
	st := e.runToTerminal(id, 3*e.policy.MaxFailures)
	if st.ProcessState != workflow.Compensated || !strings.Contains(st.LastError, "AccessDenied") {
		t.Fatalf("final %s", brief(st))
	}
	if st.Steps[1].Failures != e.policy.MaxFailures || st.Steps[1].Attempts != e.policy.MaxFailures {
		t.Fatalf("charge-payment history %+v, want %d failed dispatches", st.Steps[1], e.policy.MaxFailures)
	}
	e.assertNetZero(id, "reserve-inventory", "charge-payment")
	a := e.alertsReceived(1)[0]
	if a.MessageAttributes["kind"].Value != "dispatch-failed" || !strings.Contains(a.Message, id) || !strings.Contains(a.Message, "AccessDenied") {
		t.Fatalf("alert %+v", a)
	}
}

// TestDispatchThatFailsBrieflyRecovers: two failed dispatches, then the
// queue works again; the order completes without an operator.
func TestDispatchThatFailsBrieflyRecovers(t *testing.T) {
	t.Parallel()
	var queue string
	var mu sync.Mutex
	failures := 2
	e := newEnv(t, envOptions{workflow: workflow.Reference(), wrapSender: func(role string, s wiring.Sender) wiring.Sender {
		if role != "scheduler" {
			return s
		}
		return &failingSender{next: s, fail: func(url, body string) bool {
			mu.Lock()
			defer mu.Unlock()
			if url != queue || !isForward(body) || failures == 0 {
				return false
			}
			failures--
			return true
		}}
	}})
	queue = e.sys.AgentQueues["charge-payment"].URL
	id := e.submit("")
	st := e.runToTerminal(id, 6)
	if st.ProcessState != workflow.Processed || st.Steps[1].Failures != 2 {
		t.Fatalf("final %s", brief(st))
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, e.alerts.URL, 300*time.Millisecond)
}

// throttledStore fails the first commit of a reply as DynamoDB does when it
// throttles, after the SDK's own retries gave up.
type throttledStore struct {
	wiring.Store
	mu      sync.Mutex
	commits int
}

func (s *throttledStore) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	if !c.CommitsReply() {
		return s.Store.Apply(ctx, c)
	}
	s.mu.Lock()
	first := s.commits == 0
	s.commits++
	s.mu.Unlock()
	if first {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate of requests exceeds the allowed throughput")})
	}
	return s.Store.Apply(ctx, c)
}

// tried counts the commits of replies tried, the throttled one
// included.
func (s *throttledStore) tried() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// TestThrottledCommitIsRedeliveredWithinTheBudget: the queues keep a failed
// message invisible for a minute, far past the step's budget, as the
// deployed 6x visibility rule does. The Scheduler brings a reply whose commit
// failed back within seconds, so it still commits: FailureCount 0, no
// Supervisor. Before, the reply came back after the visibility timeout, was
// refused as stale, and the step counted a timeout.
func TestThrottledCommitIsRedeliveredWithinTheBudget(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var throttled []*throttledStore
	e := newEnv(t, envOptions{workflow: workflow.Reference(), visibility: time.Minute, wrapStore: func(role string, s wiring.Store) wiring.Store {
		if role != "scheduler" {
			return s
		}
		ts := &throttledStore{Store: s}
		mu.Lock()
		defer mu.Unlock()
		throttled = append(throttled, ts)
		return ts
	}})
	id := e.submit("")
	await.Until(t, 30*time.Second, "the order processed through the throttling", func() (bool, error) {
		if _, err := e.sys.Settle(e.ctx, 50); err != nil {
			t.Fatal(err)
		}
		st := e.state(id)
		return st.ProcessState == workflow.Processed, errors.New(brief(st))
	})
	st := e.state(id)
	if st.ProcessState != workflow.Processed || st.FailureCount != 0 || st.Steps[0].Failures != 0 {
		t.Fatalf("final %s", brief(st))
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
	// The throttle struck: step 0's commit was tried twice, step 1's once.
	mu.Lock()
	defer mu.Unlock()
	commits := 0
	for _, ts := range throttled {
		commits += ts.tried()
	}
	if commits < 3 {
		t.Fatalf("%d commits went through the throttled store, want the throttled one and two more", commits)
	}
}

// TestLostAnswerOfACommitIsOwnWrite: the answer of the UpdateItem that
// commits step 0 and claims step 1 is lost; the SDK's retry fails its
// condition against that very write. The Scheduler recognizes its own write
// and dispatches step 1 at once. Before, it took the write for somebody
// else's, dropped the reply as stale, and step 1 sat claimed but never sent
// until the Supervisor's timeout.
func TestLostAnswerOfACommitIsOwnWrite(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	updates := 0
	lose := &lossy.Transport{Lose: func(target string, _ []byte) bool {
		if target != "DynamoDB_20120810.UpdateItem" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		updates++
		return updates == 2 // 1: claim step 0; 2: commit it and claim step 1
	}}
	e := newEnv(t, envOptions{workflow: workflow.Reference(), ddbTransport: lose})
	id, st := e.run()
	if lose.Lost() != 1 {
		t.Fatalf("%d answers lost, want 1", lose.Lost())
	}
	if st.ProcessState != workflow.Processed || st.FailureCount != 0 || st.Steps[1].Attempts != 1 {
		t.Fatalf("final %s", brief(st))
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
	if n := e.transitions()[workflow.TransitionStaleReply]; n != 0 {
		t.Fatalf("%d replies dropped as stale", n)
	}
}
