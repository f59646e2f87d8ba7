package stack_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/shared/topology"
)

var update = flag.Bool("update", false, "rewrite testdata/environments.json from the synthesized template")

// environmentsFile is every function's environment as the stack synthesizes
// it, read by the root module's bootstrap test (functions/bootstrap_test.go),
// which runs each shipped binary with exactly this environment pointed at
// local resources.
const environmentsFile = "testdata/environments.json"

// symbolic returns v with every logical ID of a resource replaced by its
// construct path under the stack (without the trailing /Resource), so
// {"Ref": "SchedulerQueueB1C2..."} becomes {"Ref": "SchedulerQueue"}: a
// name the bootstrap test can map to what it creates locally, and one that
// does not change when the CDK's hashes do. Parameters and pseudo
// parameters are kept as they are.
func symbolic(tb testing.TB, v any) any {
	tb.Helper()
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = symbolic(tb, x)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			switch k {
			case "Ref":
				out[k] = symbolicID(tb, x.(string))
			case "Fn::GetAtt":
				att := x.([]any)
				out[k] = []any{symbolicID(tb, att[0].(string)), att[1]}
			default:
				out[k] = symbolic(tb, x)
			}
		}
		return out
	}
	return v
}

func symbolicID(tb testing.TB, id string) string {
	tb.Helper()
	if _, ok := tmpl.Parameters[id]; ok || strings.HasPrefix(id, "AWS::") {
		return id
	}
	r, ok := tmpl.Resources[id]
	if !ok {
		tb.Fatalf("reference to unknown %s", id)
	}
	p, _ := r.Metadata["aws:cdk:path"].(string)
	if p == "" {
		tb.Fatalf("%s has no construct path", id)
	}
	_, p, _ = strings.Cut(p, "/")
	return strings.TrimSuffix(p, "/Resource")
}

// synthesizedEnvironments maps each function's construct path to its
// environment variables, references kept symbolically.
func synthesizedEnvironments(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, id := range tmpl.ofType("AWS::Lambda::Function") {
		r := tmpl.Resources[id]
		vars, _ := get(r.Properties, "Environment", "Variables").(map[string]any)
		env := map[string]any{}
		for k, v := range vars {
			env[k] = symbolic(t, v)
		}
		out[symbolicID(t, id)] = env
	}
	return out
}

func TestEnvironmentsFileMatchesTheTemplate(t *testing.T) {
	envs := synthesizedEnvironments(t)
	names := make([]string, 0, len(envs))
	for n := range envs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(envs) != len(loaders) {
		t.Errorf("%d functions %v, the loaders know %d", len(envs), names, len(loaders))
	}
	got, err := json.MarshalIndent(envs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(environmentsFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(environmentsFile)
	if err != nil {
		t.Fatalf("%v: regenerate with `cd infra && go test ./stack -run TestEnvironmentsFileMatchesTheTemplate -update`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the synthesized environments (%v): regenerate it with `cd infra && go test ./stack -run TestEnvironmentsFileMatchesTheTemplate -update`, then run the bootstrap test (go test ./functions) on the local engines\ngot\n%s", environmentsFile, names, got)
	}
}

// Each function's environment is exactly what shared/topology's descriptor
// says the stack sets for its actor: no variable its config reads is left
// out, and none is set that it does not read.
func TestEnvironmentsAreTheDescriptors(t *testing.T) {
	t.Parallel()
	envs := synthesizedEnvironments(t)
	seen := map[string]bool{}
	for path, env := range envs {
		actor := strings.ToLower(path)
		wantEnv := []string{}
		if strings.HasPrefix(path, "Agent") {
			actor = topology.Agent
		}
		// A code step's function: its runtime's variables, and its
		// manifest's.
		for name, m := range stack.DefaultConfig().CodeSteps {
			if path == "Step"+pascalStep(name) {
				actor = topology.CodeStep
				wantEnv = slices.Collect(maps.Keys(m.Environment))
			}
		}
		seen[actor] = true
		want := slices.Sorted(slices.Values(append(topology.Describe(actor).DeployedEnv(), wantEnv...)))
		got := slices.Sorted(maps.Keys(env))
		if !slices.Equal(got, want) {
			t.Errorf("%s's environment is %v; the descriptor of %s says %v", path, got, actor, want)
		}
	}
	for _, a := range topology.Actors() {
		if !seen[a.Name] {
			t.Errorf("the stack deploys no function for the %s", a.Name)
		}
	}
}
