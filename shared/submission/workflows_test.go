package submission

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// rollout is a catalog after order-v2 became current, with order-v3 tried
// and given up: v1 keeps its orders, v3 has none.
func rollout() workflow.Catalog {
	v2, v3 := workflow.Reference(), workflow.Reference()
	v2.Version, v3.Version = 2, 3
	return workflow.Catalog{Definitions: []workflow.Definition{workflow.Reference(), v2, v3}, Current: map[string]int{"order": 2}, Default: "order"}
}

// pinned is a record of version id in state ps.
func pinned(id, version string, ps workflow.ProcessState) workflow.State {
	st := at(id, ps, 0, 1)
	st.Workflow = version
	// Only a record in flight, or one owing its alert, is in the
	// Supervisor's index.
	st.InFlight = ps.InFlight() || ps == workflow.Error
	return st
}

// workflowsHandler serves cat over store.
func workflowsHandler(t *testing.T, cat workflow.Catalog, store Store) *Handler {
	t.Helper()
	cfg := testConfig()
	cfg.Workflows = cat
	return mustNew(t, cfg, store, (&outbox{}).sender(), admitAll, actor.Deps{Clock: clock.NewFake(testNow)})
}

func TestListWorkflows(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	store.Clock = clock.NewFake(testNow)
	for _, st := range []workflow.State{
		pinned("v1-run", "order-v1", workflow.Processing),
		pinned("v1-err", "order-v1", workflow.Error), // in both indexes: counted once
		pinned("v1-undo", "order-v1", workflow.CompensationPending),
		pinned("v1-done", "order-v1", workflow.Processed),
		pinned("v2-new", "order-v2", workflow.Pending),
		pinned("v3-done", "order-v3", workflow.Compensated),
		// Pinned to versions the catalog does not run.
		pinned("v0-stuck", "order-v0", workflow.Pending),
		pinned("gone-err", "refund-v1", workflow.CompensationFailed),
	} {
		store.Put(st)
	}
	h := workflowsHandler(t, rollout(), store)
	resp, err := h.Handle(context.Background(), request("GET", "/ops/workflows", nil, ""))
	if err != nil || resp.StatusCode != 200 || resp.Headers["Content-Type"] != "application/json" {
		t.Fatalf("GET /ops/workflows = %d %v %s", resp.StatusCode, err, resp.Body)
	}
	got, err := api.DecodeWorkflows([]byte(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	want := api.Workflows{Default: "order", Workflows: []api.WorkflowVersion{
		// Not the shape of a version's ID (there is no v0): no name.
		{ID: "order-v0", InFlight: 1},
		{ID: "order-v1", Name: "order", Version: 1, Deployed: true, InFlight: 2, NeedsOperator: 1},
		{ID: "order-v2", Name: "order", Version: 2, Deployed: true, Current: true, InFlight: 1},
		{ID: "order-v3", Name: "order", Version: 3, Deployed: true, CanRemove: true},
		{ID: "refund-v1", Name: "refund", Version: 1, NeedsOperator: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// truncatedCount is a store whose count stopped at its bound.
type truncatedCount struct{ Store }

func (truncatedCount) CountOpen(context.Context, int) (statestore.OpenCount, error) {
	return statestore.OpenCount{Versions: map[string]statestore.VersionCount{"order-v1": {InFlight: 7}}, Truncated: true}, nil
}

// A truncated count is a lower bound: no version may be removed on it.
func TestListWorkflowsTruncated(t *testing.T) {
	t.Parallel()
	h := workflowsHandler(t, rollout(), truncatedCount{memstore.New()})
	resp, _ := h.Handle(context.Background(), request("GET", "/ops/workflows", nil, ""))
	got, err := api.DecodeWorkflows([]byte(resp.Body))
	if err != nil || !got.Truncated || len(got.Workflows) != 3 {
		t.Fatalf("%v: %+v", err, got)
	}
	for _, v := range got.Workflows {
		if v.CanRemove {
			t.Errorf("%s can be removed on a truncated count", v.ID)
		}
	}
}

func TestListWorkflowsRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		caller string
		query  string
		status int
		detail string
	}{
		{"a parameter", callerOp, "limit=5", 400, "limit: is not a parameter of this resource, which takes none"},
		{"a malformed query", callerOp, "a=%zz", 400, "not well-formed"},
		// API Gateway lets only the operators' policy call the route; a
		// request that reaches the handler without any identity is refused
		// as on every other route.
		{"no identity", "", "", 403, "no IAM identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			req := as(withQuery(request("GET", "/ops/workflows", nil, ""), tc.query), tc.caller)
			p := readProblem(t, f.do(t, req), tc.status)
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", p.Detail, tc.detail)
			}
			if n := f.called("CountOpen"); n != 0 {
				t.Errorf("the store counted %d times", n)
			}
		})
	}
}
