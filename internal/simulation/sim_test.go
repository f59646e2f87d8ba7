package simulation

import (
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/workflow"
	"github.com/sasflow/sas/steps"
)

func TestOneOrderWithoutFaultsIsProcessed(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 1, Orders: 1, Mix: Mix{}, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) > 0 || res.States[workflow.Processed] != 1 {
		t.Fatalf("states %v, violations %v; log:\n%s", res.States, res.Violations, strings.Join(res.Log, "\n"))
	}
}

// TestSeedsKeepEveryInvariant runs a few seeds, each with its own faults.
func TestSeedsKeepEveryInvariant(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		res, err := Run(Config{Seed: seed, Orders: 300})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 || res.Accepted != res.Orders {
			t.Errorf("seed %d (faults %s): %d of %d accepted, violations %v\nreplay: %s", seed, res.Mix, res.Accepted, res.Orders,
				res.Violations, ReplayCommand(Config{Seed: seed, Orders: 300, Mix: res.Mix}))
		}
	}
}

func BenchmarkRun(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Run(Config{Seed: uint64(i + 1), Orders: 2000, Mix: Mix{}}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSameSeedSameLog(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 111, Orders: 300, Record: true}
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The replay names the mix the first run drew, as a failing seed's
	// replay command does.
	cfg.Mix = a.Mix
	b, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash || len(a.Log) != len(b.Log) {
		for i := range min(len(a.Log), len(b.Log)) {
			if a.Log[i] != b.Log[i] {
				t.Fatalf("the logs part at event %d:\n%s\n%s", i, a.Log[i], b.Log[i])
			}
		}
		t.Fatalf("hashes %x and %x, %d and %d events", a.Hash, b.Hash, len(a.Log), len(b.Log))
	}
}

// TestExploreSmallest searches the smallest configuration exhaustively,
// within two deviations a run (see Small).
func TestExploreSmallest(t *testing.T) {
	t.Parallel()
	for _, s := range []Small{{Deviations: 2}, {Crashes: 1, Copies: 1, Deviations: 2}} {
		res, err := Explore(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: %s", s, res)
		if !res.Complete || len(res.Violations) > 0 || res.Runs < 100 {
			t.Errorf("%+v: %s: %v (choices of the failing run: %v)", s, res, res.Violations, res.Failing)
		}
	}
}

func TestBurstSheds(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 5, Orders: 2000, Mix: Mix{Burst: 1, Duplicate: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a burst shed %d requests", res.Faults["shed"])
	if res.Faults["shed"] == 0 || len(res.Violations) > 0 {
		t.Fatalf("a burst shed %d requests, want some; violations %v", res.Faults["shed"], res.Violations)
	}
}

// TestWaitingStepsKeepEveryInvariant: under remote faults the orders of
// the current version, whose charge-payment waits at its threshold (the
// deployed catalog's retry policy), wait and come back, and every
// invariant holds, liveness within a settle bound that counts the waits.
func TestWaitingStepsKeepEveryInvariant(t *testing.T) {
	t.Parallel()
	waited := 0
	for seed := uint64(1); seed <= 3; seed++ {
		res, err := Run(Config{Seed: seed, Orders: 300, Mix: Mix{Remote: 0.3, KillBefore: 0.2, KillAfter: 0.1, Throttle: 0.1, Operator: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Errorf("seed %d: violations %v\nreplay: %s", seed, res.Violations, ReplayCommand(Config{Seed: seed, Orders: 300, Mix: res.Mix}))
		}
		waited += res.Transitions[workflow.TransitionWaiting]
		t.Logf("seed %d: states %v, transitions %v", seed, res.States, res.Transitions)
	}
	if waited == 0 {
		t.Fatal("no order waited: the simulator does not exercise a step that waits")
	}
}

// TestReplicaFaultIsRoutedAround: with one of the remote's two replicas at
// fault now and then (refusing, answering 503 or hanging) and no other
// fault, the Agents route around it: every order is processed, none
// recovered by the Supervisor, nothing applied twice.
func TestReplicaFaultIsRoutedAround(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 9, Orders: 2000, Mix: Mix{Replica: 0.05}, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Faults[Replica] == 0 || len(res.Violations) > 0 || res.States[workflow.Processed] != res.Orders {
		t.Fatalf("replica outages %d, states %v, violations %v", res.Faults[Replica], res.States, res.Violations)
	}
	met, recovered := 0, 0
	for _, l := range res.Log {
		switch {
		case strings.Contains(l, "remote") && strings.Contains(l, "replica "):
			met++
		case strings.Contains(l, "retried"):
			recovered++
		}
	}
	if met == 0 || recovered != 0 {
		t.Errorf("%d replica outages logged, %d Supervisor retries", met, recovered)
		for _, l := range res.Log {
			if strings.Contains(l, "replica ") {
				t.Log(l)
			}
		}
	}
}

// TestCodeStepKeepsEveryInvariant: ship-order, the current version's code
// step, runs in the real Agent under the ledger (shared/codestep), with
// duplicate deliveries, crashes between its effect and the ledger write and
// between the ledger write and the reply, and the other faults of the
// ports. Every invariant holds: each key's effect recorded by one try at
// most, a re-run only after a try that ran it and did not record it, no
// shipment left by an order that ended compensated or cancelled.
func TestCodeStepKeepsEveryInvariant(t *testing.T) {
	t.Parallel()
	var total CodeStepReport
	crashed, replayed := 0, 0
	for seed := uint64(1); seed <= 3; seed++ {
		mix := Mix{Copy: 0.05, CrashAfterEffect: 0.2, CrashAfterLedger: 0.2, Throttle: 0.02, KillAfter: 0.01, Slow: 0.02, Operator: 0.05}
		res, err := Run(Config{Seed: seed, Orders: 300, Mix: mix})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Errorf("seed %d: violations %v\nreplay: %s", seed, res.Violations, ReplayCommand(Config{Seed: seed, Orders: 300, Mix: res.Mix}))
		}
		c := res.CodeStep
		t.Logf("seed %d: %+v, faults %v, states %v", seed, c, res.Faults, res.States)
		if c.Reruns > c.Openings {
			t.Errorf("seed %d: %d re-runs from %d tries that ran the step and did not record it", seed, c.Reruns, c.Openings)
		}
		total.add(c)
		crashed += res.Faults[CrashAfterEffect]
		replayed += res.Faults[CrashAfterLedger]
	}
	if total.Puts == 0 || total.Deletes == 0 || total.Reruns == 0 || total.CrashOpenings == 0 || crashed == 0 || replayed == 0 {
		t.Fatalf("the faults did not strike the code step: %+v, %d crashes after the effect, %d after the ledger write", total, crashed, replayed)
	}
}

// TestCodeStepWindowIsTheCrashes: with no fault but the crashes of the
// code step and duplicate deliveries, every try that ran the step and did
// not record it is a crash after its effect, and every re-run follows one.
func TestCodeStepWindowIsTheCrashes(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 7, Orders: 300, Mix: Mix{Copy: 0.05, CrashAfterEffect: 0.3, CrashAfterLedger: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	c := res.CodeStep
	if len(res.Violations) > 0 || c.Reruns == 0 || c.Openings != c.CrashOpenings || c.Reruns > c.CrashOpenings {
		t.Fatalf("%+v, violations %v", c, res.Violations)
	}
}

// TestEveryCodeStepIsModelled: the simulator runs every code step of the
// registry (steps.All) as code, over a model of what it acts on.
func TestEveryCodeStepIsModelled(t *testing.T) {
	t.Parallel()
	for name := range steps.All {
		if _, ok := codeSteps[name]; !ok {
			t.Errorf("code step %s has no model in the simulator (codeSteps)", name)
		}
	}
}

// TestAgentsWorkBatchesConcurrently: the Agents run with their deployed
// AGENT_CONCURRENCY, each record of a batch on a coroutine of the
// invocation (agent.WithWorkers), and their calls interleave: a worker's
// call comes between two calls of another worker of the same invocation.
func TestAgentsWorkBatchesConcurrently(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 2, Orders: 300, Mix: Mix{Burst: 1}, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) > 0 {
		t.Fatalf("violations %v", res.Violations)
	}
	// last is each invocation's worker that made its latest call; called,
	// the workers that made one.
	last := map[string]string{}
	called := map[string]bool{}
	interleaved := 0
	for _, l := range res.Log {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[1], "agent-") {
			continue
		}
		inv, worker, ok := strings.Cut(f[1], ".")
		if !ok {
			continue
		}
		if last[inv] != worker && called[f[1]] {
			interleaved++ // worker called, another did, and it again
		}
		last[inv], called[f[1]] = worker, true
	}
	if interleaved == 0 {
		t.Fatal("no two workers of an Agent's invocation interleaved their calls")
	}
}

// TestCallsLandAfterTheirLambdaDied: a call an invocation sent before it
// was killed may still take effect, and every invariant holds.
func TestCallsLandAfterTheirLambdaDied(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 4, Orders: 300, Mix: Mix{KillBefore: 0.03, KillAfter: 0.03, Slow: 0.05, Remote: 1}, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	landed := 0
	for _, l := range res.Log {
		if strings.Contains(l, "landed after the death") {
			landed++
		}
	}
	if landed == 0 || len(res.Violations) > 0 {
		t.Fatalf("%d calls landed after their invocation died; violations %v", landed, res.Violations)
	}
}

// TestPartialBatchesKeepEveryInvariant: with entries of every batch request
// failing (PublishBatch's and SendMessageBatch's Failed, the event source
// mappings' deletes), the handlers retry what was not done and every
// invariant holds, the Timer's Deadlines included.
func TestPartialBatchesKeepEveryInvariant(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 6, Orders: 300, Mix: Mix{PartialBatch: 0.1}, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]int{}
	for _, l := range res.Log {
		for _, what := range []string{"publish entry failed", "sqs.send entry failed", "sqs.delete failed"} {
			if strings.Contains(l, what) {
				failed[what]++
			}
		}
	}
	if len(failed) != 3 || len(res.Violations) > 0 {
		t.Fatalf("failed entries %v, want some of each of 3 kinds; violations %v", failed, res.Violations)
	}
}

// TestScheduledRunsComeLateTwiceAndAgain: EventBridge delivers scheduled
// Supervisor runs late and twice, Lambda retries a run that failed, and
// every invariant holds.
func TestScheduledRunsComeLateTwiceAndAgain(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 8, Orders: 300, Rate: 1, Record: true,
		Mix: Mix{LateRun: 0.5, DoubleRun: 0.5, Throttle: 0.05, KillBefore: 0.01, Remote: 1}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range res.Log {
		for _, what := range []string{"supervisor run late by", "supervisor run delivered twice", "Lambda retries it"} {
			if strings.Contains(l, what) {
				seen[what]++
			}
		}
	}
	if len(seen) != 3 || len(res.Violations) > 0 {
		t.Fatalf("scheduled runs %v, want some of each of 3 kinds; violations %v", seen, res.Violations)
	}
}

// TestTimeoutsStopInvocations: with every call slow, invocations run past
// their function's timeout (the Submission's 10 s first); Lambda stops
// them there, calls they had sent land after, and every invariant holds.
func TestTimeoutsStopInvocations(t *testing.T) {
	t.Parallel()
	res, err := Run(Config{Seed: 3, Orders: 300, Mix: Mix{Slow: 1}, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	timedOut, landed := 0, 0
	for _, l := range res.Log {
		switch {
		case strings.Contains(l, "timed out"):
			timedOut++
		case strings.Contains(l, "landed after the death"):
			landed++
		}
	}
	if timedOut == 0 || landed == 0 || len(res.Violations) > 0 {
		t.Fatalf("%d invocations timed out, %d calls landed after; violations %v", timedOut, landed, res.Violations)
	}
}
