package wiring_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

// deployment is one name prefix on the test engines (tables, queues,
// topics) with one remote simulator and one clock, on which the system is
// built, stopped and built again, as a deploy replaces every function while
// the tables and queues, and the messages on them, stay.
type deployment struct {
	t      *testing.T
	prefix string
	sim    *remotesim.Sim
	remote string
	clk    *clock.Offset
	logs   *logtest.Buffer
	sqs    *sqs.Client
	alerts enginetest.Queue
	policy workflow.Policy
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	sim := remotesim.New(remotesim.WithSeed(1))
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	return &deployment{t: t, prefix: enginetest.UniqueName(t, "ver"), sim: sim, remote: srv.URL, clk: &clock.Offset{},
		logs: &logtest.Buffer{}, sqs: enginetest.SQS(t),
		policy: workflow.Policy{MaxFailures: 3, ClaimTimeout: time.Minute, AlertTimeout: time.Minute, Retention: workflow.DefaultRetention}}
}

// deploy builds the system with the workflow versions of cat on the
// deployment's tables and queues (a first deploy creates them).
func (d *deployment) deploy(cat workflow.Catalog) *env {
	d.t.Helper()
	ctx := context.Background()
	agentCfg := agent.DefaultConfig()
	agentCfg.RetryBase, agentCfg.RetryMax = time.Millisecond, 5*time.Millisecond
	snsc := enginetest.SNS(d.t)
	sys, err := wiring.Build(ctx, wiring.Options{
		DynamoDB: enginetest.DynamoDB(d.t), SQS: enginetest.SQS(d.t), PollSQS: d.sqs, SNS: snsc,
		Prefix: d.prefix, Region: enginetest.Region,
		Workflows: cat, Policy: d.policy, RemoteBaseURL: d.remote, Agent: agentCfg,
		MaxReceiveCount: 2, VisibilityTimeout: time.Second,
		Clock: d.clk, Log: slog.New(slog.NewJSONHandler(d.logs, nil)), OperatorPrincipals: []string{testOperator},
	})
	if err != nil {
		d.t.Fatal(err)
	}
	if d.alerts.URL == "" {
		d.alerts = enginetest.CreateQueue(d.t, d.sqs, enginetest.UniqueName(d.t, "alerts"), enginetest.QueueOptions{})
		if _, err := snsc.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(sys.AlertTopicARN), Protocol: aws.String("sqs"),
			Endpoint: aws.String(d.alerts.ARN)}); err != nil {
			d.t.Fatal(err)
		}
	}
	return &env{t: d.t, ctx: ctx, sys: sys, sim: d.sim, clk: d.clk, sqs: d.sqs, alerts: d.alerts, policy: d.policy, logs: d.logs}
}

// toSecondStep delivers what brings every order just submitted to its
// second step, claimed and dispatched: the first step's requests, then
// the replies, whose commits claim the next step.
func (e *env) toSecondStep(first string) {
	e.t.Helper()
	for _, url := range []string{e.sys.AgentQueues[first].URL, e.sys.ResponseQueue.URL} {
		e.deliverAll(url)
	}
}

// deliverAll delivers the queue's messages to its handler until it is empty.
func (e *env) deliverAll(queueURL string) {
	e.t.Helper()
	for _, b := range e.sys.Bridges {
		if b.QueueURL != queueURL {
			continue
		}
		for range 20 {
			n, err := b.PollOnce(e.ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			if n == 0 {
				return
			}
		}
		e.t.Fatalf("%s never emptied", queueURL)
	}
	e.t.Fatalf("no bridge delivers %s", queueURL)
}

// submitTo posts an order naming workflow ("" names none).
func (e *env) submitTo(workflowRef string) string {
	e.t.Helper()
	body := orderBody
	if workflowRef != "" {
		body = strings.Replace(body, `"currency"`, `"workflow":"`+workflowRef+`","currency"`, 1)
	}
	resp := e.post(body, "")
	if resp.StatusCode != 202 {
		e.t.Fatalf("POST /orders (workflow %q) = %d %s", workflowRef, resp.StatusCode, resp.Body)
	}
	return readOrderID(e.t, resp.Body)
}

// assertNothingPoisoned checks that no message of any queue went to its
// dead-letter queue, that no alert was raised, and that no handler logged
// a message as poison.
func (e *env) assertNothingPoisoned() {
	e.t.Helper()
	queues := []wiring.Queue{e.sys.SchedulerQueue, e.sys.ResponseQueue}
	for _, q := range e.sys.AgentQueues {
		queues = append(queues, q)
	}
	for _, q := range queues {
		enginetest.AssertNoMessages(e.ctx, e.t, e.sqs, q.DLQURL, 0)
	}
	enginetest.AssertNoMessages(e.ctx, e.t, e.sqs, e.alerts.URL, time.Second)
	if strings.Contains(e.logs.String(), "poison") {
		e.t.Errorf("a handler found a message poison:\n%s", e.logs.String())
	}
}

// TestVersionSwitch changes the workflow under orders in flight: orders
// start on v1, the system is deployed again with v1 and a v2 that is
// current, and then the v1 orders finish on v1, including a compensation
// that starts after the switch, while new orders run v2 (or v1 when they
// name it), and nothing is poisoned. Three kinds of v2: a step inserted, a
// budget changed, a step made non-compensable.
func TestVersionSwitch(t *testing.T) {
	t.Parallel()
	v1 := workflow.Reference()
	v2 := func(change func(d *workflow.Definition)) workflow.Definition {
		d := workflow.Reference()
		d.Version = 2
		d.Steps = append([]workflow.Step(nil), d.Steps...)
		change(&d)
		return d
	}
	for _, tc := range []struct {
		name string
		v2   workflow.Definition
		// undone reports whether a v2 order stopped at charge-payment
		// undoes reserve-inventory: it ends Compensated; else, with
		// reserve-inventory applied and no undo of it, it waits in Error,
		// nothing undone, with an alert.
		undoesReserve bool
	}{
		{"a step inserted", v2(func(d *workflow.Definition) {
			d.Steps = append(d.Steps, workflow.Step{Name: "ship-order", Budget: 20 * time.Second, Wait: workflow.DefaultWait, Compensable: true})
		}), true},
		{"a budget changed", v2(func(d *workflow.Definition) { d.Steps[1].Budget = 45 * time.Second }), true},
		{"a step made non-compensable", v2(func(d *workflow.Definition) { d.Steps[0].Compensable = false }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDeployment(t)
			before := d.deploy(workflow.Single(v1))
			// Two v1 orders, both at charge-payment when the switch comes;
			// the second's payment will be refused after it, so its
			// compensation runs on the new deployment.
			done1, undone1 := before.submitTo(""), before.submitTo("")
			before.toSecondStep("reserve-inventory")
			d.sim.Script(workflow.IdempotencyKey(undone1, "charge-payment"), remotesim.Permanent)
			for _, id := range []string{done1, undone1} {
				if st := before.state(id); st.Workflow != v1.ID() || st.ProcessState != workflow.Processing || st.Step != "charge-payment" {
					t.Fatalf("%s before the switch: %s %s at %s", id, st.Workflow, st.ProcessState, st.Step)
				}
			}

			// The switch: the same tables and queues, v2 now current.
			cat := workflow.Catalog{Definitions: []workflow.Definition{v1, tc.v2}, Current: map[string]int{"order": 2}, Default: "order"}
			after := d.deploy(cat)
			done2, undone2, named1 := after.submitTo(""), after.submitTo("order"), after.submitTo(v1.ID())
			d.sim.Script(workflow.IdempotencyKey(undone2, "charge-payment"), remotesim.Permanent)
			if resp := after.post(strings.Replace(orderBody, `"currency"`, `"workflow":"order-v9","currency"`, 1), ""); resp.StatusCode != 422 ||
				!strings.Contains(resp.Body, `"workflow"`) || !strings.Contains(resp.Body, "order-v9") {
				t.Errorf("an order naming a version not deployed: %d %s, want 422 naming the field", resp.StatusCode, resp.Body)
			}

			// Each claim takes its lease from the order's own version.
			after.toSecondStep("reserve-inventory")
			for id, def := range map[string]workflow.Definition{done2: tc.v2, named1: v1} {
				st := after.state(id)
				if st.Workflow != def.ID() || st.Step != "charge-payment" || st.Steps[1].StartedAt == nil ||
					st.CompleteBy.Sub(*st.Steps[1].StartedAt) != def.Steps[1].Lease() {
					t.Errorf("%s on %s: %s at %s until %v after its claim, want %s's lease %v", id, st.Workflow, st.ProcessState, st.Step,
						st.CompleteBy.Sub(ptrOr(st.Steps[1].StartedAt)), def.ID(), def.Steps[1].Lease())
				}
			}
			after.settle()

			// The v1 orders finished on v1: two steps, compensated as v1
			// says, both undone.
			for id, want := range map[string]workflow.ProcessState{done1: workflow.Processed, named1: workflow.Processed, undone1: workflow.Compensated} {
				st := after.state(id)
				if st.Workflow != v1.ID() || st.ProcessState != want || len(st.Steps) != len(v1.Steps) {
					t.Errorf("v1 order %s: %s %s with %d steps, want %s on %s with %d", id, st.Workflow, st.ProcessState, len(st.Steps), want, v1.ID(), len(v1.Steps))
				}
			}
			after.assertEffectsOnce(done1, "reserve-inventory", "charge-payment")
			after.assertRemote(undone1, "reserve-inventory", 1, 1)

			// The v2 orders ran v2 to its end, or were compensated as v2
			// says.
			st := after.state(done2)
			if st.Workflow != tc.v2.ID() || st.ProcessState != workflow.Processed || len(st.Steps) != len(tc.v2.Steps) {
				t.Errorf("v2 order: %s %s with %d steps, want Processed on %s with %d", st.Workflow, st.ProcessState, len(st.Steps), tc.v2.ID(), len(tc.v2.Steps))
			}
			after.assertEffectsOnce(done2, tc.v2.StepNames()...)
			st = after.state(undone2)
			wantRefused := workflow.Compensated
			if !tc.undoesReserve {
				wantRefused = workflow.Error
				a := after.alertsReceived(1)[0]
				if a.MessageAttributes["kind"].Value != "not-undoable" || !strings.Contains(a.Message, "step reserve-inventory was applied and has no undo") {
					t.Errorf("alert %+v, want one naming reserve-inventory as applied without an undo", a)
				}
			}
			if st.Workflow != tc.v2.ID() || st.ProcessState != wantRefused {
				t.Errorf("refused v2 order: %s %s, want %s on %s", st.Workflow, st.ProcessState, wantRefused, tc.v2.ID())
			}
			undone := 0
			if tc.undoesReserve {
				undone = 1
			}
			after.assertRemote(undone2, "reserve-inventory", 1, undone)
			for _, id := range []string{done1, named1, undone1} {
				if n := d.sim.EffectCount(workflow.IdempotencyKey(id, "ship-order")); n != 0 {
					t.Errorf("v1 order %s shipped", id)
				}
			}
			after.assertNothingPoisoned()
		})
	}
}

// TestRemovedVersionStrandsWithAnAlert: a deploy that drops a version with
// an order still open on it does not leave the order in flight forever nor
// poison its messages silently: the Supervisor stops it in Error with an
// alert that says to deploy the version again, and once it is back a
// retry finishes the order on it.
func TestRemovedVersionStrandsWithAnAlert(t *testing.T) {
	t.Parallel()
	v1 := workflow.Reference()
	v2 := workflow.Reference()
	v2.Version = 2
	d := newDeployment(t)
	before := d.deploy(workflow.Single(v1))
	id := before.submitTo("")
	// Its first request is lost with the Agent that held it.
	before.dropAgentRequests("reserve-inventory", 1)

	without := d.deploy(workflow.Single(v2))
	if resp := without.operator("POST", "/orders/"+id+"/retry", id); resp.StatusCode != 409 {
		t.Errorf("retry of an order in flight: %d %s", resp.StatusCode, resp.Body)
	}
	without.expire(id)
	without.supervise()
	st := without.state(id)
	if st.ProcessState != workflow.Error || !strings.Contains(st.LastError, "order-v1") || !st.AlertPending && st.InFlight {
		t.Fatalf("stranded order: %s %q", st.ProcessState, st.LastError)
	}
	alerts := without.alertsReceived(1)
	if !strings.Contains(alerts[0].Subject, "workflow order-v1 is not deployed") || !strings.Contains(alerts[0].Message, "workflows") {
		t.Errorf("alert %q:\n%s", alerts[0].Subject, alerts[0].Message)
	}
	if resp := without.operator("POST", "/orders/"+id+"/retry", id); resp.StatusCode != 409 || !strings.Contains(resp.Body, "order-v1") {
		t.Errorf("retry while order-v1 is not deployed: %d %s, want 409 naming it", resp.StatusCode, resp.Body)
	}

	// order-v1 deployed again: the retry carries the order on.
	back := d.deploy(workflow.Catalog{Definitions: []workflow.Definition{v1, v2}, Current: map[string]int{"order": 2}, Default: "order"})
	if resp := back.operator("POST", "/orders/"+id+"/retry", id); resp.StatusCode != 202 {
		t.Fatalf("retry: %d %s", resp.StatusCode, resp.Body)
	}
	back.settle()
	if st := back.state(id); st.ProcessState != workflow.Processed || st.Workflow != v1.ID() {
		t.Fatalf("after the retry: %s on %s", st.ProcessState, st.Workflow)
	}
	back.assertEffectsOnce(id, v1.StepNames()...)
}

func ptrOr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func readOrderID(t *testing.T, body string) string {
	t.Helper()
	var out struct{ OrderID string }
	if err := json.Unmarshal([]byte(body), &out); err != nil || out.OrderID == "" {
		t.Fatalf("POST body %s: %v", body, err)
	}
	return out.OrderID
}

// TestEveryDeployedVersion runs every version of the deployed catalog
// (shared/catalog/workflows.json) on the local engines: an order through
// all its steps, each applied once, and an order refused at its last step,
// whose steps are undone as its version says. A version added to the file
// is covered without a test of its own.
func TestEveryDeployedVersion(t *testing.T) {
	t.Parallel()
	cat := catalog.MustDeployed()
	e := newDeployment(t).deploy(cat)
	for _, def := range cat.Definitions {
		done, refused := e.submitTo(def.ID()), e.submitTo(def.ID())
		last := def.Steps[len(def.Steps)-1]
		e.sim.Script(workflow.IdempotencyKey(refused, last.Name), remotesim.Permanent)
		e.settle()
		if st := e.state(done); st.ProcessState != workflow.Processed || st.Workflow != def.ID() {
			t.Errorf("%s: %s on %s, want Processed", def.ID(), st.ProcessState, st.Workflow)
		}
		e.assertEffectsOnce(done, def.StepNames()...)
		st := e.state(refused)
		if st.Workflow != def.ID() || !st.ProcessState.Terminal() {
			t.Errorf("%s refused at %s: %s on %s", def.ID(), last.Name, st.ProcessState, st.Workflow)
		}
		for _, s := range def.Steps[:len(def.Steps)-1] {
			undone := 0
			if s.Compensable {
				undone = 1
			}
			e.assertRemote(refused, s.Name, 1, undone)
		}
	}
}
