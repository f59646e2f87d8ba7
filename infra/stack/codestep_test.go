package stack_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// TestCodeStepsGetTheirManifestNotARemote: a code step's function is its
// own binary (build/steps/<step>), with no remote service's URL parameter
// or variable, the manifest's parameters (required: MinLength 1), its
// variables from them and its statements, the ledger on its own keys, and
// nothing on "*" but X-Ray's actions; its wildcard path is suppressed for
// cdk-nag by name.
func TestCodeStepsGetTheirManifestNotARemote(t *testing.T) {
	if len(cfg.CodeSteps) == 0 {
		t.Fatal("no code step deployed: ship-order is one")
	}
	for name, m := range cfg.CodeSteps {
		t.Run(name, func(t *testing.T) {
			pascal := pascalStep(name)
			if _, ok := tmpl.Parameters[pascal+"RemoteBaseUrl"]; ok {
				t.Errorf("a %sRemoteBaseUrl parameter for a code step", pascal)
			}
			for p, desc := range m.Parameters {
				param, ok := tmpl.Parameters[p]
				if !ok || param["Type"] != "String" || param["MinLength"] != float64(1) || !strings.Contains(param["Description"].(string), desc) {
					t.Errorf("parameter %s: %v", p, param)
				}
			}
			_, f := tmpl.byPath(t, "AWS::Lambda::Function", "Step"+pascal+"/Resource")
			vars, _ := get(f.Properties, "Environment", "Variables").(map[string]any)
			if _, ok := vars[topology.EnvRemoteBaseURLs]; ok {
				t.Errorf("the code step's function reads %s", topology.EnvRemoteBaseURLs)
			}
			for k, v := range m.Environment {
				if got := vars[k]; got == nil || (strings.HasPrefix(v, "${") && strings.Count(v, "${") == 1 && strings.HasSuffix(v, "}") && ref(got) != v[2:len(v)-1]) {
					t.Errorf("%s = %s, want %s", k, toJSON(got), v)
				}
			}
			if !strings.HasPrefix(ref(vars[topology.EnvLedgerTable]), "LedgerTable") {
				t.Errorf("%s = %s, want the ledger", topology.EnvLedgerTable, toJSON(vars[topology.EnvLedgerTable]))
			}
			if d, _ := f.Properties["Description"].(string); !strings.HasPrefix(d, "Code step "+name+": ") || len(d) > 256 {
				t.Errorf("description %q", d)
			}
			if f.Properties["Timeout"] != topology.AgentTimeout(stepOf(t, name)).Seconds() {
				t.Errorf("timeout %v, want the step's lease %v", f.Properties["Timeout"], topology.AgentTimeout(stepOf(t, name)))
			}
			// Its own event source on its own queue, bounded as an Agent's.
			fnID, _ := tmpl.byPath(t, "AWS::Lambda::Function", "Step"+pascal+"/Resource")
			queue, _ := tmpl.byPath(t, "AWS::SQS::Queue", pascal+"Queue/Resource")
			found := false
			for _, id := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
				p := tmpl.Resources[id].Properties
				if ref(p["FunctionName"]) == fnID && ref(p["EventSourceArn"]) == queue {
					found = get(p, "ScalingConfig", "MaximumConcurrency") == float64(cfg.Capacity.AgentMaxConcurrency())
				}
			}
			if !found {
				t.Errorf("no event source from %s to %s with the capacity model's concurrency", queue, fnID)
			}
			// The cdk-nag suppression of its wildcard path names it.
			role, r := tmpl.byPath(t, "AWS::IAM::Role", "Step"+pascal+"Role/Resource")
			var applies []string
			for _, s := range list(get(r.Metadata, "cdk_nag", "rules_to_suppress")) {
				if get(s, "id") == "AwsSolutions-IAM5" {
					for _, a := range list(get(s, "applies_to")) {
						applies = append(applies, toJSON(a))
					}
				}
			}
			if !slices.ContainsFunc(applies, func(a string) bool { return strings.Contains(a, "/shipments/*") }) {
				t.Errorf("%s: no IAM5 suppression names the shipments path: %v", role, applies)
			}
		})
	}
}

func stepOf(t *testing.T, name string) (st workflow.Step) {
	t.Helper()
	for _, s := range cfg.Workflows.Agents() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no step %s", name)
	return st
}

// TestLedgerTable: on-demand, keyed by k, expiring on expiresAt, with
// point-in-time recovery, no stream, and the state table's protection.
func TestLedgerTable(t *testing.T) {
	_, table := tmpl.byPath(t, "AWS::DynamoDB::Table", "LedgerTable/Resource")
	p := table.Properties
	if p["BillingMode"] != "PAY_PER_REQUEST" || toJSON(p["KeySchema"]) != `[{"AttributeName":"`+stack.LedgerKey+`","KeyType":"HASH"}]` ||
		toJSON(p["AttributeDefinitions"]) != `[{"AttributeName":"`+stack.LedgerKey+`","AttributeType":"S"}]` {
		t.Errorf("billing %v, keys %s %s", p["BillingMode"], toJSON(p["KeySchema"]), toJSON(p["AttributeDefinitions"]))
	}
	if get(p, "TimeToLiveSpecification", "AttributeName") != stack.LedgerTTL || get(p, "TimeToLiveSpecification", "Enabled") != true {
		t.Errorf("TTL %s", toJSON(p["TimeToLiveSpecification"]))
	}
	if get(p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
		t.Error("no point-in-time recovery")
	}
	if p["StreamSpecification"] != nil || p["GlobalSecondaryIndexes"] != nil {
		t.Errorf("stream %s, indexes %s: nothing reads them", toJSON(p["StreamSpecification"]), toJSON(p["GlobalSecondaryIndexes"]))
	}
	if p["DeletionProtectionEnabled"] != true || table.DeletionPolicy != "Retain" || table.UpdateReplacePolicy != "Retain" {
		t.Errorf("deletion protection %v, policies %s/%s", p["DeletionProtectionEnabled"], table.DeletionPolicy, table.UpdateReplacePolicy)
	}
}
