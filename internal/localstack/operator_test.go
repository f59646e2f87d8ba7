package localstack_test

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/workflow"
)

// operatorKey is the access key the operators' CLI signs with in the
// tests, as a local operator without AWS credentials would.
const operatorKey = "local-operator"

// sasctl runs the operators' CLI against the stack's API, as
// `go run ./cmd/sasctl --endpoint-url ...` would, signing as operatorKey.
func sasctl(t *testing.T, st *localstack.Stack, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := opsclient.Run(context.Background(), append([]string{"--endpoint-url", st.APIURL}, args...), opsclient.Env{
		Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut,
		// Not the machine's credential chain: the tests sign as one
		// known operator, whoever runs them.
		LoadAWSConfig: func(context.Context, string) (aws.Config, error) {
			return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(operatorKey, "not-checked", "")}, nil
		},
	})
	return out.String() + errOut.String(), code
}

// awaitState polls the order's record until it is in want.
func awaitState(t *testing.T, st *localstack.Stack, id string, want workflow.ProcessState) workflow.State {
	t.Helper()
	return await.Value(t, 30*time.Second, "order "+id+" "+string(want),
		func() (workflow.State, error) { return st.Direct.GetState(context.Background(), id) },
		func(s workflow.State) bool { return s.ProcessState == want })
}

func TestOperatorFixesAFailedCompensationWithTheCLI(t *testing.T) {
	t.Parallel()
	st, _ := start(t, func(o *localstack.Options) {
		o.Faults = remotesim.Faults{RejectSteps: []string{"charge-payment"}, RejectUndo: []string{"reserve-inventory"}}
		o.Crash = 0
	})
	id := submit(t, st, testClient, "")
	awaitState(t, st, id, workflow.CompensationFailed)

	out, code := sasctl(t, st, "list", "--state", "CompensationFailed")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("list = %d\n%s", code, out)
	}
	out, code = sasctl(t, st, "show", id)
	if code != 0 || !strings.Contains(out, "CompensationFailed") || !strings.Contains(out, "reserve-inventory") {
		t.Fatalf("show = %d\n%s", code, out)
	}
	// The timeline draws the failed step and the undo that failed.
	if !strings.Contains(out, "Timeline from") || !strings.Contains(out, "  undo reserve-inventory |") || !strings.Contains(out, "X|") {
		t.Fatalf("show draws no timeline of the step and its undo:\n%s", out)
	}
	t.Logf("sasctl show %s\n%s", id, out)
	// A cancel of an order no longer in flight is a conflict.
	if out, code = sasctl(t, st, "cancel", id); code != opsclient.ExitConflict {
		t.Fatalf("cancel of a stopped order = %d\n%s", code, out)
	}
	// The operator fixes the remote, then resubmits the compensation.
	if err := st.Sim.SetFaults(remotesim.Faults{RejectSteps: []string{"charge-payment"}}); err != nil {
		t.Fatal(err)
	}
	if out, code = sasctl(t, st, "retry", id); code != 0 {
		t.Fatalf("retry = %d\n%s", code, out)
	}
	final := awaitState(t, st, id, workflow.Compensated)
	if final.Resubmits != 1 || st.Sim.CompensationCount(workflow.IdempotencyKey(id, "reserve-inventory")) != 1 {
		t.Fatalf("after the retry: %+v", final)
	}
	// A second retry finds nothing to resubmit.
	if out, code = sasctl(t, st, "retry", id); code != opsclient.ExitConflict {
		t.Fatalf("second retry = %d\n%s", code, out)
	}
}

func TestCancelAnInFlightOrderWithTheCLI(t *testing.T) {
	t.Parallel()
	// Every step call hangs, so the order stays in flight until cancelled.
	st, _ := start(t, func(o *localstack.Options) {
		o.Faults = remotesim.Faults{Hang: 1}
		o.Crash = 0
	})
	id := submit(t, st, testClient, "")
	awaitState(t, st, id, workflow.Processing)
	if out, code := sasctl(t, st, "cancel", id); code != 0 {
		t.Fatalf("cancel = %d\n%s", code, out)
	}
	// Only now may calls answer: healed before the cancel, a retry of the
	// hung step could finish the order first. An undo that still hangs
	// is retried after its timeout like any other.
	if err := st.Sim.SetFaults(remotesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	// The running step's outcome is unknown, so it is undone; whatever the
	// hung call did, the remote nets nothing. A compensation a cancel
	// started ends Cancelled.
	final := awaitState(t, st, id, workflow.Cancelled)
	key := workflow.IdempotencyKey(id, "reserve-inventory")
	if !final.Cancelled || st.Sim.EffectCount(key) != st.Sim.CompensationCount(key) {
		t.Fatalf("after cancel: %+v; effects %d, undone %d", final, st.Sim.EffectCount(key), st.Sim.CompensationCount(key))
	}
	// Cancelling again is answered as done, not as a conflict.
	if out, code := sasctl(t, st, "cancel", id); code != 0 {
		t.Fatalf("second cancel = %d\n%s", code, out)
	}
}

// TestOperatorCountsOrdersPerVersionWithTheCLI: after a rollout of v2,
// orders still open on v1 keep it, the current v2 is kept anyway, and
// sasctl workflows says so, counting each open order once.
func TestOperatorCountsOrdersPerVersionWithTheCLI(t *testing.T) {
	t.Parallel()
	cat := catalog.MustDeployed()
	var v1 workflow.Definition
	for _, d := range cat.Definitions {
		if d.ID() == "order-v1" {
			v1 = d
		}
	}
	if v1.Name == "" {
		t.Fatalf("the deployed catalog has no order-v1: %v", cat.IDs())
	}
	v2 := v1
	v2.Version = 2
	cat = workflow.Catalog{Definitions: []workflow.Definition{v1, v2}, Current: map[string]int{"order": 2}, Default: "order"}
	o := localstack.DemoOptionsOf(cat)
	o.Seed = 7
	// Every step call hangs, so every order stays open (in flight, or
	// stopped for an operator once its retries and undo ran out).
	o.Faults, o.Crash = remotesim.Faults{Hang: 1}, 0
	st, _ := startWith(t, o)

	pinnedV1 := `{"workflow":"order-v1","customerId":"c-1","currency":"EUR","items":[{"sku":"A-1","quantity":1,"unitPriceCents":100}]}`
	if r := call(t, "POST", st.APIURL+"/orders", pinnedV1, testClient, nil); r.status != 202 {
		t.Fatalf("POST on order-v1 = %d %s", r.status, r.body)
	}
	for range 2 {
		submit(t, st, testClient, "")
	}

	out, code := sasctl(t, st, "--json", "workflows")
	if code != 0 {
		t.Fatalf("workflows --json = %d\n%s", code, out)
	}
	ws, err := api.DecodeWorkflows([]byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	open := map[string]int{}
	for _, v := range ws.Workflows {
		open[v.ID] = v.InFlight + v.NeedsOperator
		if !v.Deployed || v.CanRemove || v.Current != (v.ID == "order-v2") {
			t.Errorf("%+v: want deployed, not removable, current only for order-v2", v)
		}
	}
	if want := map[string]int{"order-v1": 1, "order-v2": 2}; !maps.Equal(open, want) || ws.Truncated || ws.Default != "order" {
		t.Fatalf("open orders %v, truncated %v, default %q; want %v\n%s", open, ws.Truncated, ws.Default, want, out)
	}

	out, code = sasctl(t, st, "workflows")
	if code != 0 || !strings.Contains(out, "keep: 1 open") || !strings.Contains(out, "keep: current, 2 open") {
		t.Fatalf("workflows = %d\n%s", code, out)
	}
	t.Logf("sasctl workflows\n%s", out)
	// An unsigned request is refused, as on every route; a client, by the
	// emulated client policy (TestOperatorRoutesAreRefusedByTheHandlerTooEndToEnd).
	if r := call(t, "GET", st.APIURL+"/ops/workflows", "", "", nil); r.status != 403 {
		t.Fatalf("an unsigned GET /ops/workflows = %d %s", r.status, r.body)
	}
}
