package stack_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/internal/stepgen"
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

// grantsManifest is ship-order's manifest with more of what a manifest may
// grant: a second wildcard path, a queue named by a parameter, another
// function, and a parameter only a variable reads. The variant deploys it.
var grantsManifest = func() stepgen.Manifest {
	m, err := stepgen.Parse("ship-order", []byte(`{
  "description": "Ships the order, with more grants than the real one.",
  "parameters": {
    "ShipOrderBucket": "The bucket.",
    "ShipOrderCarrierQueue": "The carrier's queue.",
    "ShipOrderCarrierName": "The carrier's name."
  },
  "environment": {"SHIPMENTS_BUCKET": "${ShipOrderBucket}", "CARRIER_NAME": "${ShipOrderCarrierName}"},
  "statements": [
    {"actions": ["s3:PutObject", "s3:DeleteObject"], "resources": ["arn:${AWS::Partition}:s3:::${ShipOrderBucket}/shipments/*"]},
    {"actions": ["dynamodb:Query"], "resources": [
      "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/orders-archive",
      "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/orders-archive/index/*"]},
    {"actions": ["sqs:SendMessage"], "resources": ["arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${ShipOrderCarrierQueue}"]},
    {"actions": ["lambda:InvokeFunction"], "resources": ["arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:pricing"]}
  ]
}`))
	if err != nil {
		panic(err)
	}
	return m
}()

// TestCodeStepGrantsAreTheManifestsOnly: the variant's code step's role
// has its runtime's grants and its manifest's statements, nothing else;
// the cdk-nag suppressions on it name exactly the findings stepgen admits
// (NagFindings), each with stepgen's reason, and cdk-nag finds nothing
// else; a parameter a resource is named with takes only what
// stepgen.ParameterValue accepts, and one only a variable reads is free.
func TestCodeStepGrantsAreTheManifestsOnly(t *testing.T) {
	if g, w := toJSON(variant.grants(t, "StepShipOrderRole")), toJSON(codeStepGrants("ship-order", grantsManifest)); g != w {
		t.Errorf("actions\n got %s\nwant %s", g, w)
	}
	var want []string
	for _, s := range grantsManifest.Statements {
		want = append(want, s.NagFindings()...)
	}
	sort.Strings(want)
	_, role := variant.byPath(t, "AWS::IAM::Role", "StepShipOrderRole/Resource")
	var got []string
	for _, s := range list(get(role.Metadata, "cdk_nag", "rules_to_suppress")) {
		if get(s, "id") != "AwsSolutions-IAM5" || toJSON(get(s, "applies_to")) == `["Resource::*"]` {
			continue // X-Ray's grant, the same on every function
		}
		if reason, _ := get(s, "reason").(string); !strings.HasSuffix(reason, stepgen.WildcardReason) {
			t.Errorf("IAM5 suppressed for %s because %q", toJSON(get(s, "applies_to")), reason)
		}
		for _, a := range list(get(s, "applies_to")) {
			got = append(got, fmt.Sprint(a))
		}
	}
	sort.Strings(got)
	if len(want) != 2 || !slices.Equal(got, want) {
		t.Errorf("IAM5 suppressed for %q, want exactly %q", got, want)
	}
	if len(variantNag) > 0 {
		t.Errorf("cdk-nag on the variant:\n%s", strings.Join(variantNag, "\n"))
	}
	for p := range grantsManifest.Parameters {
		pattern, _ := variant.Parameters[p]["AllowedPattern"].(string)
		if named := slices.Contains(grantsManifest.ResourceParameters(), p); named != (pattern == stepgen.ParameterPattern()) || (!named && pattern != "") {
			t.Errorf("parameter %s names a resource: %v, AllowedPattern %q", p, named, pattern)
		}
	}
}

// TestParameterPatternIsParameterValue: the AllowedPattern a parameter
// that names a resource gets, run as JavaScript reads it (as Java reads
// what it holds: lookahead, classes, anchors), takes the values
// stepgen.ParameterValue takes and no other.
func TestParameterPatternIsParameterValue(t *testing.T) {
	values := []string{
		"my-shipments-bucket", "orders.example.com", "carrier_queue", "prod/carrier/key-AbCdEf", "Schedules",
		"*", "a*", "shipments-?", "${aws:username}", "a b", "a\nb", "",
		"SchedulerAgentSupervisor-dev-StateTable1A2B-0123", "x-scheduleragentsupervisor", "cdk-hnb659fds-assets-1-eu-west-1", "HNB659FDS",
	}
	in, err := json.Marshal(map[string]any{"pattern": stepgen.ParameterPattern(), "values": values})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "-e", `const {pattern, values} = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(values.map(v => new RegExp(pattern).test(v))));`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var matched []bool
	if err := json.Unmarshal(out, &matched); err != nil || len(matched) != len(values) {
		t.Fatalf("node said %s (%v)", out, err)
	}
	accepted := 0
	for i, v := range values {
		err := stepgen.ParameterValue(v)
		if matched[i] != (err == nil) {
			t.Errorf("%q: the pattern matches %v, ParameterValue says %v", v, matched[i], err)
		}
		if err == nil {
			accepted++
		}
	}
	if accepted != 5 {
		t.Errorf("%d values accepted, want the first 5", accepted)
	}
}

// TestBootstrapQualifierIsTheCDKs: stepgen refuses the names of the
// bootstrap the app deploys through, the default one.
func TestBootstrapQualifierIsTheCDKs(t *testing.T) {
	if q := *awscdk.DefaultStackSynthesizer_DEFAULT_QUALIFIER(); q != stepgen.BootstrapQualifier {
		t.Errorf("the CDK's bootstrap qualifier is %s, stepgen refuses %s", q, stepgen.BootstrapQualifier)
	}
}

// TestStackRefusesWhatStepgenRefuses: a Config holding a manifest stepgen
// refuses does not validate, and the stack, built from it all the same,
// stops before any of it reaches the template: one manifest for each kind
// of rule (a ? wildcard, the stack's own table, an escalating action).
func TestStackRefusesWhatStepgenRefuses(t *testing.T) {
	statement := func(action, resource string) stepgen.Manifest {
		m := grantsManifest
		m.Statements = append(slices.Clone(m.Statements), stepgen.Statement{Actions: []string{action}, Resources: []string{resource}})
		return m
	}
	bad := map[string]struct {
		m    stepgen.Manifest
		want string
	}{
		"?":           {statement("s3:GetObject", "arn:${AWS::Partition}:s3:::${ShipOrderBucket}/shipments/order-?.json"), "IAM reads ? as a wildcard"},
		"state table": {statement("dynamodb:GetItem", "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/SchedulerAgentSupervisor-dev-StateTable"), "the stack's own"},
		"PassRole":    {statement("iam:PassRole", "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/deploy"), "escalate"},
	}
	for name, tc := range bad {
		c := cfg
		c.CodeSteps = map[string]stepgen.Manifest{"ship-order": tc.m}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error naming %q", name, err, tc.want)
		}
	}
	c := cfg
	c.CodeSteps = map[string]stepgen.Manifest{"ship-order": bad["?"].m}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "IAM reads ? as a wildcard") {
			t.Errorf("stack.New with a ? in a manifest: recovered %v, want the manifest refused", r)
		}
	}()
	stack.New(awscdk.NewApp(nil), "Refused", c, nil)
}

// TestNagMissesWhatTheStacksOwnCheckCatches: cdk-nag's IAM5 reads only *,
// so the canary's ? path passes it unseen; the stack's own check
// (wildcardGrants, which every policy of the stack passes) sees both.
func TestNagMissesWhatTheStacksOwnCheckCatches(t *testing.T) {
	for _, e := range canaryErr {
		if strings.Contains(e, canaryQuestion) {
			t.Errorf("cdk-nag reads ? now: %s (the suppressions may rely on it)", e)
		}
	}
	if !slices.ContainsFunc(canaryErr, func(e string) bool {
		return strings.Contains(e, "AwsSolutions-IAM5") && strings.Contains(e, canaryStar)
	}) {
		t.Errorf("cdk-nag missed the canary's * path: %v", canaryErr)
	}
	var found []string
	for _, id := range canaryTmpl.ofType("AWS::IAM::Policy") {
		found = append(found, wildcardGrants(canaryTmpl.Resources[id].Properties["PolicyDocument"], func(string) bool { return false })...)
	}
	for _, r := range []string{canaryStar, canaryQuestion} {
		if !slices.ContainsFunc(found, func(f string) bool { return strings.Contains(f, r) }) {
			t.Errorf("the stack's check missed %s: %v", r, found)
		}
	}
}

// The canary role's wildcard resources.
const (
	canaryStar     = "arn:aws:s3:::canary-bucket/shipments/*"
	canaryQuestion = "arn:aws:s3:::canary-bucket/shipment?.json"
)
