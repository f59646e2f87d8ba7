package localstack_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// waitingCatalog is the order workflow whose first step, after one
// timeout, waits wait before it is tried again, up to five times; the
// budgets are the local runs' (Scaled), and the waits as given.
func waitingCatalog(wait time.Duration) workflow.Catalog {
	one := 1
	d := workflow.Reference()
	d.Steps = []workflow.Step{d.Steps[0], d.Steps[1]}
	for i := range d.Steps {
		d.Steps[i].Budget, d.Steps[i].Wait = 3*time.Second, 0
	}
	d.Steps[0].Retry = &workflow.Retry{MaxFailures: &one, OnExhausted: workflow.ExhaustedWait, Wait: wait, WaitRounds: 5}
	return workflow.Single(d)
}

// awaitStatus polls the order's status through the client API until its
// state is want, and returns it.
func awaitStatus(t *testing.T, st *localstack.Stack, id string, want workflow.ProcessState) api.Order {
	t.Helper()
	return await.Value(t, 30*time.Second, "order "+id+" "+string(want)+" through the API",
		func() (api.Order, error) {
			r := get(t, st.APIURL+"/orders/"+id)
			var o api.Order
			err := json.Unmarshal([]byte(r.body), &o)
			return o, err
		},
		func(o api.Order) bool { return o.State == want })
}

// TestAWaitingStepComesBackWhenTheRemoteHeals: a step that keeps timing
// out past its threshold waits (the API says so), and once the remote has
// healed the Supervisor hands it back at the end of its wait and the order
// is processed, with nobody acting.
func TestAWaitingStepComesBackWhenTheRemoteHeals(t *testing.T) {
	t.Parallel()
	st, tap := start(t, func(o *localstack.Options) {
		o.Workflows = waitingCatalog(6 * time.Second)
		o.Faults = remotesim.Faults{Hang: 1}
		o.Crash = 0
	})
	id := submit(t, st, testClient, "")
	o := awaitStatus(t, st, id, workflow.Waiting)
	if o.Status != workflow.StatusWaiting || o.WaitRound < 1 || o.CompleteBy.IsZero() || o.Step != "reserve-inventory" {
		t.Fatalf("waiting order as the API shows it: %+v", o)
	}
	if err := st.Sim.SetFaults(remotesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	final := awaitState(t, st, id, workflow.Processed)
	if final.Resubmits != 0 || final.WaitRound != 0 || final.Steps[0].Attempts < 2 {
		t.Fatalf("processed after its wait: %+v", final)
	}
	if tap.Counts()[workflow.TransitionWaiting] < 1 {
		t.Fatal("no waiting transition logged")
	}
}

// TestOperatorRetriesAWaitingOrderWithTheCLI: an operator finds a waiting
// order in the listing, sees its wait, and once the remote is fixed
// retries it at once instead of waiting out the hour.
func TestOperatorRetriesAWaitingOrderWithTheCLI(t *testing.T) {
	t.Parallel()
	st, _ := start(t, func(o *localstack.Options) {
		o.Workflows = waitingCatalog(time.Hour)
		o.Faults = remotesim.Faults{Hang: 1}
		o.Crash = 0
	})
	id := submit(t, st, testClient, "")
	awaitState(t, st, id, workflow.Waiting)
	out, code := sasctl(t, st, "list", "--state", "Waiting")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("list = %d\n%s", code, out)
	}
	out, code = sasctl(t, st, "show", id)
	if code != 0 || !strings.Contains(out, "Waiting (client status waiting)") || !strings.Contains(out, " retry "+id) {
		t.Fatalf("show = %d\n%s", code, out)
	}
	if err := st.Sim.SetFaults(remotesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	if out, code = sasctl(t, st, "retry", id); code != 0 {
		t.Fatalf("retry = %d\n%s", code, out)
	}
	final := awaitState(t, st, id, workflow.Processed)
	if final.Resubmits != 1 || final.WaitRound != 0 {
		t.Fatalf("after the retry: %+v", final)
	}
}
