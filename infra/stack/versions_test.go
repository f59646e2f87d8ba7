package stack_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// twoVersions is a catalog in the middle of a change: order-v1 (the
// reference) still runs the orders pinned to it while order-v2, current,
// charges for longer, no longer undoes the charge, and ships the order in
// a new third step.
func twoVersions() workflow.Catalog {
	v1 := workflow.Reference()
	v2 := workflow.Reference()
	v2.Version = 2
	v2.Steps[1].Budget, v2.Steps[1].Compensable = 45*time.Second, false
	v2.Steps = append(v2.Steps, workflow.Step{Name: "ship-order", Budget: 20 * time.Second, Wait: workflow.DefaultWait, Compensable: true})
	return workflow.Catalog{Definitions: []workflow.Definition{v1, v2}, Current: map[string]int{"order": 2}, Default: "order"}
}

// TestTwoVersionsDeployTheUnionOfTheirSteps: the stack deploys one Agent,
// queue, parameter and alarm set per step name of any live version, each
// Agent timed out at its step's longest lease; new orders may start on any
// version's first step; the Submission is updated last.
func TestTwoVersionsDeployTheUnionOfTheirSteps(t *testing.T) {
	c := stack.DefaultConfig()
	c.Workflows = twoVersions()
	c.CodeDir = cfg.CodeDir
	// Every step an Agent here: TestCodeStepsGetTheirManifestNotARemote
	// holds the code steps.
	c.CodeSteps = nil
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	outdir, err := os.MkdirTemp("", "sas-infra-versions")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outdir)
	app := awscdk.NewApp(&awscdk.AppProps{
		Outdir:  jsii.String(outdir),
		Context: &map[string]any{"aws:cdk:enable-path-metadata": true},
	})
	s := stack.New(app, "Versions", c, nil)
	vt := templateOf(s)

	union := []string{"reserve-inventory", "charge-payment", "ship-order"}
	if got := c.Workflows.AgentNames(); !slices.Equal(got, union) {
		t.Fatalf("union %v, want %v", got, union)
	}
	if got, want := len(vt.ofType("AWS::Lambda::Function")), len(stack.Functions())-1+len(union); got != want {
		t.Errorf("%d functions, want %d (one Agent per step of the union)", got, want)
	}
	// Alarms by metric and the resource of their first dimension.
	alarmed := map[string]map[string]any{}
	for _, id := range vt.ofType("AWS::CloudWatch::Alarm") {
		p := vt.Resources[id].Properties
		if dims := list(p["Dimensions"]); len(dims) > 0 {
			alarmed[p["MetricName"].(string)+" "+ref(get(dims[0], "Value"))] = p
		}
	}
	for _, name := range union {
		step, _ := c.Workflows.Agent(name)
		fnID, fn := vt.byPath(t, "AWS::Lambda::Function", "Agent"+pascalStep(name)+"/Resource")
		if got, want := fn.Properties["Timeout"], topology.AgentTimeout(step).Seconds(); got != want {
			t.Errorf("Agent %s: timeout %v, want %v (its longest lease)", name, got, want)
		}
		qID, q := vt.byPath(t, "AWS::SQS::Queue", pascalStep(name)+"Queue/Resource")
		dlq := ref(get(q.Properties, "RedrivePolicy", "deadLetterTargetArn"))
		if vt.Resources[dlq].Type != "AWS::SQS::Queue" {
			t.Errorf("%s's queue has no DLQ: %s", name, toJSON(q.Properties["RedrivePolicy"]))
		}
		if _, ok := vt.Parameters[pascalStep(name)+"RemoteBaseUrl"]; !ok {
			t.Errorf("no %sRemoteBaseUrl parameter", pascalStep(name))
		}
		if a := alarmed["ApproximateAgeOfOldestMessage "+qID]; a == nil || a["Threshold"] != topology.AgentQueueAgeAlarm(step).Seconds() {
			t.Errorf("%s's queue: age alarm %s, want at %v", name, toJSON(a), topology.AgentQueueAgeAlarm(step))
		}
		if alarmed["ApproximateNumberOfMessagesVisible "+dlq] == nil {
			t.Errorf("%s's DLQ has no alarm", name)
		}
		if alarmed["Errors "+fnID] == nil {
			t.Errorf("Agent %s has no errors alarm", name)
		}
	}
	// charge-payment runs 30s in v1 and 45s in v2: its Agent must outlast
	// the longer.
	_, charge := vt.byPath(t, "AWS::Lambda::Function", "AgentChargePayment/Resource")
	if got, want := charge.Properties["Timeout"], (45*time.Second + workflow.DefaultWait + topology.AgentMargin).Seconds(); got != want {
		t.Errorf("charge-payment's Agent times out at %v, want %v (v2's 45s budget)", got, want)
	}
	// Replies of every version share the response queue: it alarms at the
	// shortest lease of any version's step (ship-order's 25s).
	respID, _ := vt.byPath(t, "AWS::SQS::Queue", "ResponseQueue/Resource")
	if a := alarmed["ApproximateAgeOfOldestMessage "+respID]; a == nil || a["Threshold"] != float64(25) {
		t.Errorf("response queue: age alarm %s, want at 25s", toJSON(a))
	}

	envOf := func(path string) map[string]any {
		_, fn := vt.byPath(t, "AWS::Lambda::Function", path+"/Resource")
		vars, _ := get(fn.Properties, "Environment", "Variables").(map[string]any)
		return vars
	}
	t.Run("Scheduler", func(t *testing.T) { checkAgentQueueURLs(t, envOf("Scheduler"), union) })
	t.Run("Submission", func(t *testing.T) {
		sub := envOf("Submission")
		checkAgentQueueURLs(t, sub, []string{"reserve-inventory"})
		if _, ok := sub["FIRST_AGENT_QUEUE_URL"]; ok {
			t.Error("FIRST_AGENT_QUEUE_URL is still set")
		}
		// Admission watches every Agent's queue.
		r := resolver{t: vt, params: deployParams(vt)}
		queues := strings.Split(r.resolve(t, sub[topology.EnvAdmissionQueues]), ",")
		if len(queues) != len(union) {
			t.Fatalf("ADMISSION_QUEUES %v, want the %d Agents' queues", queues, len(union))
		}
		for i, name := range union {
			if id, _ := vt.byPath(t, "AWS::SQS::Queue", pascalStep(name)+"Queue/Resource"); !strings.HasSuffix(queues[i], "/"+id) {
				t.Errorf("ADMISSION_QUEUES[%d] = %s, want %s's queue", i, queues[i], name)
			}
		}
	})

	// The Submission is updated after every actor that resolves versions,
	// without a cycle.
	subID, sub := vt.byPath(t, "AWS::Lambda::Function", "Submission/Resource")
	var deps []string
	for _, d := range list(sub.DependsOn) {
		deps = append(deps, d.(string))
	}
	for _, path := range []string{"Scheduler", "Supervisor", "Deadline", "AgentReserveInventory", "AgentChargePayment", "AgentShipOrder"} {
		id, _ := vt.byPath(t, "AWS::Lambda::Function", path+"/Resource")
		if !slices.Contains(deps, id) {
			t.Errorf("%s does not depend on %s (%s): DependsOn %v", subID, path, id, deps)
		}
	}
	if cycle := vt.dependencyCycle(); cycle != nil {
		t.Errorf("CloudFormation would refuse the template: dependency cycle %v", cycle)
	}

	desc := *s.TemplateOptions().Description()
	for _, w := range []string{"order-v1 (reserve-inventory, charge-payment)", "order-v2* (reserve-inventory, charge-payment, ship-order)", "* current"} {
		if !strings.Contains(desc, w) {
			t.Errorf("description %q does not say %q", desc, w)
		}
	}
}

// TestDescriptionFitsCloudFormation: a catalog too long to describe in
// full is described by its version IDs, and cut short past that.
func TestDescriptionFitsCloudFormation(t *testing.T) {
	t.Parallel()
	if got := stack.Description(workflow.Single(workflow.Reference())); got != "Scheduler Agent Supervisor: orders through order-v1 (reserve-inventory, charge-payment) (github.com/sasflow/sas)" {
		t.Errorf("one version: %q", got)
	}
	many := func(n int) workflow.Catalog {
		c := workflow.Catalog{Current: map[string]int{"order": n}, Default: "order"}
		for v := 1; v <= n; v++ {
			d := workflow.Reference()
			d.Version = v
			c.Definitions = append(c.Definitions, d)
		}
		return c
	}
	ids := stack.Description(many(30))
	if len(ids) > 1024 || !strings.Contains(ids, "order-v29, order-v30*; * current") || strings.Contains(ids, "reserve-inventory") {
		t.Errorf("30 versions: %d characters: %q", len(ids), ids)
	}
	cut := stack.Description(many(200))
	if len(cut) != 1024 || !strings.HasSuffix(cut, "...; * current (github.com/sasflow/sas)") {
		t.Errorf("200 versions: %d characters, ends %q", len(cut), cut[max(0, len(cut)-60):])
	}
}
