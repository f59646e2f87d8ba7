package localstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// start runs a local stack with the demo's settings, changed by tune, on
// the test engines.
func start(t *testing.T, tune func(*localstack.Options)) (*localstack.Stack, *localstack.Tap) {
	t.Helper()
	o := localstack.DemoOptions()
	o.Seed = 7
	if tune != nil {
		tune(&o)
	}
	return startWith(t, o)
}

// startWith runs a local stack with o on the test engines.
func startWith(t *testing.T, o localstack.Options) (*localstack.Stack, *localstack.Tap) {
	t.Helper()
	o.DynamoDBEndpoint, o.AWSEndpoint = enginetest.Endpoints(t)
	o.Prefix = enginetest.UniqueName(t, "local")
	tap := &localstack.Tap{}
	o.Log = slog.New(slog.NewJSONHandler(tap, nil))
	st, err := localstack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, tap
}

// runDemo runs d to its end and fails the test unless every invariant
// held (Summary.Err).
func runDemo(t *testing.T, d localstack.Demo) localstack.Summary {
	t.Helper()
	sum, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := sum.Err(); err != nil {
		t.Fatalf("%v\n%+v", err, sum)
	}
	return sum
}

func TestDemoUnderFaultsLosesNothingAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	st, tap := start(t, func(o *localstack.Options) {
		// Harsher than the default, so every recovery path shows up in 40
		// orders: agent crashes (Supervisor retries, stale redeliveries),
		// hangs, effects applied before a failure, permanent rejections.
		// Only charge-payment's rejections undo something (reserve-inventory
		// is first, ship-order is code, not the simulator's), and it gets
		// about 50 calls: at 15% the chance that none is rejected is below
		// 1 in 3,000.
		o.Faults = remotesim.Faults{Transient: 0.2, Permanent: 0.15, Hang: 0.05, ApplyThenFail: 0.1}
		o.Crash = 0.15
	})
	var progress bytes.Buffer
	sum := runDemo(t, localstack.Demo{Stack: st, Tap: tap, Orders: 40, Clients: 4, Timeout: 2 * time.Minute, Progress: &progress, RunID: "t1"})
	if sum.Submitted != 40 || sum.Processed+sum.Errored+sum.Compensated+sum.CompensationFailed != 40 || sum.CompletedSteps < 2*sum.Processed {
		t.Fatalf("counts %+v", sum)
	}
	// Some order fails at charge-payment and has its reservation undone.
	if sum.Compensated == 0 || sum.UndoneSteps == 0 {
		t.Errorf("no order was compensated: %+v", sum)
	}
	if sum.AgentCrashes == 0 || sum.SupervisorRetries == 0 || sum.RecoveredBySupervisor == 0 {
		t.Errorf("the faults did not exercise the Supervisor: %+v", sum)
	}
	if sum.Alerts != sum.Errored+sum.CompensationFailed {
		t.Errorf("%d alerts for %d errors and %d failed compensations", sum.Alerts, sum.Errored, sum.CompensationFailed)
	}
	if !strings.Contains(progress.String(), "40/40 terminal") {
		t.Errorf("progress never reached the end:\n%s", progress.String())
	}
	var out bytes.Buffer
	sum.Print(&out)
	if !strings.Contains(out.String(), "verdict     OK") || !strings.Contains(out.String(), "exactly one per completed step") {
		t.Errorf("summary:\n%s", out.String())
	}
}

func TestAPIServesTheSubmissionHandlerLikeAPIGateway(t *testing.T) {
	t.Parallel()
	st, _ := start(t, func(o *localstack.Options) { o.Faults = remotesim.Faults{}; o.Crash = 0 })
	resp := post(t, st.APIURL+"/orders", order)
	if resp.status != 202 || !strings.Contains(resp.body, `"orderId"`) {
		t.Fatalf("POST = %d %s", resp.status, resp.body)
	}
	// An unknown path reaches the handler through the catch-all route, as
	// in the stack: its 404 problem, not API Gateway's bare one.
	if r := get(t, st.APIURL+"/nowhere"); r.status != 404 || !strings.Contains(r.body, `"type":"https://sasflow.dev/problems/not-found"`) {
		t.Fatalf("GET /nowhere = %d %s", r.status, r.body)
	}
	// A client mistake is a 4xx problem from the handler.
	if r := post(t, st.APIURL+"/orders", `{"customerId":`); r.status != 400 || !strings.Contains(r.body, `"type"`) {
		t.Fatalf("bad JSON = %d %s", r.status, r.body)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	t.Parallel()
	o := localstack.DemoOptions()
	o.APIAddr = "0.0.0.0:8080"
	o.Crash = 0.9
	_, err := localstack.Start(context.Background(), o)
	for _, want := range []string{"engine endpoints", "loopback", "crash probability"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want it to name %q", err, want)
		}
	}
}

// The demo runs the capacity model as the stack deploys one: admission,
// each Agent's concurrency, a Scheduler that is not the bottleneck, a
// queue allowance that the model accepts, and visibility timeouts past
// every lease, so a killed Agent's step is the Supervisor's. Without the allowance the model refuses the workflow (a
// wait under twice the admit wait), as it did the demo's, which ran with
// none.
func TestDemoRunsItsCapacityModelAsDeployed(t *testing.T) {
	t.Parallel()
	c := localstack.DemoCapacity()
	plain := localstack.DemoOptions()
	plain.Capacity = &c
	if err := plain.Validate(); err == nil || !strings.Contains(err.Error(), "must be at least twice the admit wait") {
		t.Errorf("the demo's workflows without an allowance under the model: %v", err)
	}
	o := localstack.WithCapacity(localstack.DemoOptions(), c)
	o.DynamoDBEndpoint, o.AWSEndpoint = "http://127.0.0.1:1", "http://127.0.0.1:2"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Capacity == nil || *o.Capacity != c || o.AgentPollers != c.AgentMaxConcurrency() || o.PollersPerQueue != localstack.SchedulerPollers {
		t.Errorf("capacity %v, Agent pollers %d, Scheduler pollers %d", o.Capacity, o.AgentPollers, o.PollersPerQueue)
	}
	wait := localstack.QueueAllowance(c)
	if wait < 2*c.AdmitWait {
		t.Errorf("allowance %v under twice the admit wait %v", wait, c.AdmitWait)
	}
	for _, d := range o.Workflows.Definitions {
		for _, s := range d.Steps {
			if s.Wait != wait || s.Budget != 3*time.Second || o.Visibility <= s.Lease() {
				t.Errorf("%s/%s: wait %v, budget %v, lease %v under visibility %v", d.ID(), s.Name, s.Wait, s.Budget, s.Lease(), o.Visibility)
			}
		}
	}
}

func TestTapCountsTransitionsAndPassesLinesOn(t *testing.T) {
	t.Parallel()
	var next bytes.Buffer
	tap := &localstack.Tap{Next: &next}
	log := slog.New(slog.NewJSONHandler(tap, nil))
	log.Info("order accepted", workflow.TransitionAccepted.Attr())
	log.Info("noise")
	log.Info("order processed", workflow.TransitionProcessed.Attr())
	log.Info("order accepted", workflow.TransitionAccepted.Attr())
	if _, err := io.WriteString(tap, "not json\n"); err != nil {
		t.Fatal(err)
	}
	got := tap.Counts()
	if got[workflow.TransitionAccepted] != 2 || got[workflow.TransitionProcessed] != 1 || len(got) != 2 {
		t.Fatalf("counts %v", got)
	}
	if n := strings.Count(next.String(), "\n"); n != 5 {
		t.Fatalf("%d lines passed on, want 5", n)
	}
}

func TestSummaryErrNamesEveryProblem(t *testing.T) {
	t.Parallel()
	ok := localstack.Summary{Submitted: 3, Processed: 2, Errored: 1, Alerts: 1}
	if err := ok.Err(); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	bad := localstack.Summary{Submitted: 4, Processed: 1, Errored: 1, CompensationFailed: 1, InFlight: 1, DuplicateEffects: []string{"o/s×2"}, MissingEffects: []string{"o/t"},
		UndoErrors: []string{"p: reserve-inventory undone 2 times"}, Alerts: 1,
		LeftApplied: []string{"q/charge-payment (applied 1, undone 0, order Compensated)"}, Unbounded: []string{"r(attempt 40 > 13)"}}
	err := bad.Err()
	for _, want := range []string{"1 orders not terminal", "more than once", "without an effect", "1 alerts for 2", "undone 2 times",
		"left applied: [q/charge-payment", "cycling past their bound: [r(attempt 40"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err = %v, want %q", err, want)
		}
	}
}

type answer struct {
	status int
	body   string
}

// testClient is the access key the tests' requests are signed with: the
// local API's IAM authorization names the caller by it.
const testClient = "test-client"

// order is a small valid order.
const order = `{"customerId":"c-1","currency":"EUR","items":[{"sku":"A-1","quantity":1,"unitPriceCents":100}]}`

// submit posts order as client, under the Idempotency-Key key unless it is
// "", and returns the ID of the order accepted.
func submit(t *testing.T, st *localstack.Stack, client, key string) string {
	t.Helper()
	var headers map[string]string
	if key != "" {
		headers = map[string]string{"Idempotency-Key": key}
	}
	r := call(t, "POST", st.APIURL+"/orders", order, client, headers)
	var a struct{ OrderID string }
	if r.status != 202 || json.Unmarshal([]byte(r.body), &a) != nil || a.OrderID == "" {
		t.Fatalf("POST as %s = %d %s", client, r.status, r.body)
	}
	return a.OrderID
}

func post(t *testing.T, url, body string) answer {
	t.Helper()
	return call(t, "POST", url, body, testClient, nil)
}

func get(t *testing.T, url string) answer {
	t.Helper()
	return call(t, "GET", url, "", testClient, nil)
}

// call sends a request signed with SigV4 as the local caller accessKey, or
// unsigned when accessKey is "", with the extra headers given.
func call(t *testing.T, method, url, body, accessKey string, headers map[string]string) answer {
	t.Helper()
	return callAt(t, method, url, body, accessKey, time.Now(), headers)
}

// callAt is call with the signature made at at.
func callAt(t *testing.T, method, url, body, accessKey string, at time.Time, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if accessKey != "" {
		if err := localstack.SignRequestAt(context.Background(), req, []byte(body), accessKey, at); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

func TestChaosKeepsEveryInvariant(t *testing.T) {
	t.Parallel()
	in, err := chaos.New(11, localstack.ChaosRates())
	if err != nil {
		t.Fatal(err)
	}
	o := localstack.ChaosOptions()
	o.Seed, o.Chaos = 11, in
	o.OutageEvery = 4 * time.Second
	st, tap := startWith(t, o)
	sum := runDemo(t, localstack.Demo{Stack: st, Tap: tap, Orders: 60, Clients: 4, Timeout: 3 * time.Minute, Progress: io.Discard, RunID: "chaos"})
	// The run really was hostile: kills at several points, duplicates,
	// outages, and the Supervisor at work.
	c := in.Counts()
	struck := 0
	for _, p := range chaos.Points() {
		if c[p] > 0 {
			struck++
		}
	}
	if struck < 4 || sum.Outages == 0 || sum.SupervisorRetries+sum.Requeues == 0 {
		t.Errorf("too gentle a run: %v, outages %d, recoveries %d", c, sum.Outages, sum.SupervisorRetries+sum.Requeues)
	}
	if sum.Submitted != 60 || sum.InFlight != 0 {
		t.Fatalf("summary %+v", sum)
	}
}

// TestEachFaultAlone runs every fault on its own, each on a stack of its
// own, so a broken invariant points at one fault; TestChaosKeepsEveryInvariant
// then runs them all at once.
func TestEachFaultAlone(t *testing.T) {
	t.Parallel()
	// Alone means alone; and a crashed batch comes back after its step's
	// deadline, so every crash gives the Supervisor a record to recover.
	quiet := func(o *localstack.Options) {
		o.Faults, o.Crash, o.AgentLag, o.OutageEvery = remotesim.Faults{}, 0, 0, 0
		o.Schedulers, o.Supervisors, o.Skew = 1, 1, 0
		o.Visibility = 5 * time.Second
	}
	type fault struct {
		name  string
		tune  func(*localstack.Options)
		point chaos.Point // struck at least once, when set
		check func(localstack.Summary) bool
	}
	var faults []fault
	for _, p := range chaos.Points() {
		var check func(localstack.Summary) bool
		if p == chaos.ReplicaFault {
			// The Agents route around a replica at fault: tries failed on
			// it, no try went back to it after one of its claim had failed
			// there while the other replica could take it, every order
			// completed as without it, and the fault caused none of the
			// Supervisor's retries. A fault of a second cannot make a step
			// of a 3 s budget outlive it, routed or not, so the repeats
			// are what shows the routing. On a loaded machine a claim may
			// also outlive its lease waiting in a queue, its request in the
			// Agent's (meeting the fault too late to ride it out) or its
			// reply in the Scheduler's: that retry is the queue's
			// (localstack.CauseQueue, CauseReplyQueue), not the fault's.
			check = func(s localstack.Summary) bool {
				return s.ReplicaFailedTries > 0 && s.ReplicaRepeats == 0 && s.Processed == s.Submitted && s.ReplicaRetries == 0
			}
		}
		faults = append(faults, fault{name: string(p), point: p, check: check, tune: func(o *localstack.Options) {
			rate := 0.3
			if p == chaos.ReplicaFault {
				rate = 0.5 // a period in two: a short run sees it strike
			}
			in, err := chaos.New(5, map[chaos.Point]float64{p: rate})
			if err != nil {
				t.Fatal(err)
			}
			o.Chaos = in
			switch p {
			case chaos.KillAfterRecover:
				o.Crash = 0.3 // the Supervisor needs expired records to recover
			case chaos.KillAfterClaim:
				// A Scheduler claims only steps handed back to it (a new
				// order's first step comes claimed): agent crashes make
				// the Supervisor hand some back.
				o.Crash = 0.3
			}
		}})
	}
	faults = append(faults,
		fault{name: "remote applies then hangs", tune: func(o *localstack.Options) { o.Faults.ApplyThenHang = 0.3 },
			check: func(s localstack.Summary) bool { return s.RemoteCalls > remoteSteps(s) }},
		fault{name: "agent crashes", tune: func(o *localstack.Options) { o.Crash = 0.3 },
			check: func(s localstack.Summary) bool { return s.AgentCrashes > 0 && s.SupervisorRetries > 0 }},
		fault{name: "zombie agents", tune: func(o *localstack.Options) {
			// Half the remote calls outlast the 3 s budget; agents 4 s
			// behind still wait for them and reply after CompleteBy.
			o.AgentLag, o.Agent.RemoteTimeout = 4*time.Second, 5*time.Second
			o.Faults.Latency, o.Faults.LatencyMin, o.Faults.LatencyMax = 0.5, remotesim.Duration(3200*time.Millisecond), remotesim.Duration(3500*time.Millisecond)
		}, check: func(s localstack.Summary) bool { return s.StaleReplies > 0 }},
		fault{name: "skewed schedulers and supervisors", tune: func(o *localstack.Options) {
			o.Schedulers, o.Supervisors, o.Skew = 3, 3, 2*time.Second
			o.Crash = 0.3 // gives the Supervisors work to race for
		}, check: func(s localstack.Summary) bool { return s.SupervisorRetries > 0 }},
		fault{name: "engine outages", tune: func(o *localstack.Options) { o.OutageEvery, o.OutageFor = 700*time.Millisecond, 300*time.Millisecond },
			check: func(s localstack.Summary) bool { return s.Outages > 0 }},
		// Answers that do not prove nothing was applied: each stops its
		// order, and the undo of the stopped step must net the effect out.
		fault{name: "remote answers 2xx too large", tune: func(o *localstack.Options) { o.Faults.Oversize = 0.2 },
			check: func(s localstack.Summary) bool { return s.Compensated > 0 }},
		fault{name: "remote answers 2xx that is not JSON", tune: func(o *localstack.Options) { o.Faults.Garbage = 0.2 },
			check: func(s localstack.Summary) bool { return s.Compensated > 0 }},
		// A key in progress is answered 409 in_progress, which the agents
		// retry until the effect lands: the orders complete.
		fault{name: "remote key in progress after a timeout", tune: func(o *localstack.Options) { o.Faults.HangThenApply = 0.2 },
			check: func(s localstack.Summary) bool {
				return s.Processed == s.Submitted && s.Compensated == 0 && s.RemoteCalls > remoteSteps(s)
			}},
	)
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			o := localstack.ChaosOptions()
			quiet(&o)
			f.tune(&o)
			o.Seed = 5
			st, tap := startWith(t, o)
			demo := localstack.Demo{Stack: st, Tap: tap, Orders: 15, Clients: 3, Timeout: 3 * time.Minute, Progress: io.Discard, RunID: "alone"}
			if f.point == chaos.ReplicaFault {
				// A replica's fault strikes on a clock of its own, a
				// period at a time: the orders come over several periods,
				// or a fast machine finishes them before the first.
				demo.Orders, demo.Rate = 40, 5
			}
			sum := runDemo(t, demo)
			if f.point != "" && o.Chaos.Counts()[f.point] == 0 {
				t.Errorf("%s never struck", f.point)
			}
			if f.check != nil && !f.check(sum) {
				t.Errorf("the fault left no trace: %+v", sum)
			}
		})
	}
}

// remoteSteps is how many completed steps the remote simulator answered:
// a code step (ship-order) runs in process and calls no remote, so a
// remote call more than these is a retry.
func remoteSteps(s localstack.Summary) int { return s.CompletedSteps - s.CodeSteps }
