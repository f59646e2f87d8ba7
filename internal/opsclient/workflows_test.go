package opsclient

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/api"
)

func TestWorkflows(t *testing.T) {
	t.Parallel()
	runCases(t, []cliCase{
		{name: "table", args: []string{"workflows"}, code: ExitOK, requests: 1, lastMethod: "GET", lastPath: "/ops/workflows",
			stdout: []string{"VERSION", "CURRENT", "IN FLIGHT", "WAITING FOR AN OPERATOR", "REMOVAL",
				"order-v1", "keep: 4 open", "order-v2", "keep: current, 41 open", "order-v3", "can be removed",
				"refund-v1", "NOT DEPLOYED: 2 open orders stranded", "sasctl list --state Error"}},
		{name: "flags after the command", args: []string{"workflows", "--endpoint-url", "http://127.0.0.1:1"}, code: ExitError, requests: 0,
			stderr: []string{"list workflow versions: GET /ops/workflows", "connect"}},
		{name: "stray argument", args: []string{"workflows", "order-v1"}, code: ExitUsage, requests: 0,
			stderr: []string{`workflows takes no arguments, got ["order-v1"]`, "Run 'sasctl --help'"}},
		{name: "unknown flag", args: []string{"workflows", "--state", "Error"}, code: ExitUsage, requests: 0, stderr: []string{"state"}},
	})
}

// TestWorkflowsGolden pins the table an operator reads before removing a
// version: the four cases of its last column, a count the API truncated,
// and nothing to show.
func TestWorkflowsGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*api.Workflows)
	}{
		{"workflows.txt", func(*api.Workflows) {}},
		{"workflows-truncated.txt", func(w *api.Workflows) {
			w.Truncated = true
			for i := range w.Workflows {
				w.Workflows[i].CanRemove = false
			}
		}},
		{"workflows-none.txt", func(w *api.Workflows) { w.Workflows = []api.WorkflowVersion{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, 0)
			tc.edit(&f.workflows)
			srv := f.server()
			r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": srv.URL}, "--endpoint-url", srv.URL, "workflows")
			if r.code != ExitOK || r.stderr != "" {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			checkGolden(t, tc.name, strings.ReplaceAll(r.stdout, srv.URL, "URL"))
		})
	}
}

func TestWorkflowsJSON(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 0)
	srv := f.server()
	r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": srv.URL}, "workflows", "--json")
	var got api.Workflows
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got.Workflows) != 4 || !bytes.Contains([]byte(r.stdout), []byte("\n  \"workflows\"")) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// An answer the client cannot take is an error, not a table.
func TestWorkflowsRefusesABadAnswer(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 0)
	f.intercept = func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"workflows":[{"id":"order-v1\u001b[2J","inFlight":1}]}`))
		return true
	}
	srv := f.server()
	r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": srv.URL}, "workflows")
	if r.code != ExitError || r.stdout != "" || !strings.Contains(r.stderr, "not printable ASCII") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}
