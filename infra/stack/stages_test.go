package stack_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/infra/stack"
)

// scopedNames are top-level properties named like a name that are scoped to
// their parent resource, or are a label: two stages may share them.
var scopedNames = map[string]string{
	"StageName":  "an HTTP API's stage, named within its API ($default)",
	"PolicyName": "an inline policy's name, within the roles it is attached to",
	"MetricName": "a metric's name, within its namespace (which is the stage's)",
}

// physicalNames lists the explicit physical names in t: every top-level
// property named *Name with a literal value, and every custom metric
// namespace, as "Property=value".
func (t *template) physicalNames() []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "Namespace" || k == "MetricNamespace") && !strings.HasPrefix(s, "AWS/") {
					out = append(out, "namespace="+s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, r := range t.Resources {
		for k, v := range r.Properties {
			if s, ok := v.(string); ok && strings.HasSuffix(k, "Name") && scopedNames[k] == "" {
				out = append(out, k+"="+s)
			}
		}
		walk(r.Properties)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestStagesShareNoPhysicalName(t *testing.T) {
	outdir, err := os.MkdirTemp("", "sas-infra-stages")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outdir)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
	names := map[string][]string{}
	stacks := map[string]awscdk.Stack{}
	for _, stage := range []string{"dev", "prod"} {
		c, err := stack.FromContext(func(k string) string {
			if k == stack.ContextStage {
				return stage
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		c.CodeDir = cfg.CodeDir
		stacks[stage] = stack.New(app, stack.StackName(stage), c, nil)
	}
	for stage, s := range stacks {
		if got, want := *s.StackName(), "SchedulerAgentSupervisor-"+stage; got != want {
			t.Errorf("stack name %s, want %s", got, want)
		}
		tp := templateOf(s)
		names[stage] = tp.physicalNames()
		// The dashboard graphs its own stage's metrics.
		for _, id := range tp.ofType("AWS::CloudWatch::Dashboard") {
			body := toJSON(tp.Resources[id].Properties["DashboardBody"])
			if !strings.Contains(body, stack.MetricNamespace(stage)+`\"`) {
				t.Errorf("%s: dashboard does not graph namespace %s", stage, stack.MetricNamespace(stage))
			}
			for other := range stacks {
				if other != stage && strings.Contains(body, stack.MetricNamespace(other)) {
					t.Errorf("%s: dashboard graphs %s's namespace", stage, other)
				}
			}
			if name := tp.Resources[id].Properties["DashboardName"]; name != nil {
				t.Errorf("%s: dashboard named %v: a name the stage does not make unique", stage, name)
			}
		}
	}
	// Not vacuous: the access log group, the work queues, the API, the
	// topics' display names and the metric namespace are found.
	for stage, got := range names {
		for _, want := range []string{
			"LogGroupName=" + stack.AccessLogGroupName(stack.StackName(stage)),
			"QueueName=" + stack.QueueName(stack.StackName(stage), "SchedulerQueue"),
			"Name=" + stack.StackName(stage) + "-OrdersApi",
			"namespace=" + stack.MetricNamespace(stage),
		} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: %s not among the physical names %v", stage, want, got)
			}
		}
		if len(got) < 10 {
			t.Errorf("%s: only %d physical names found: %v", stage, len(got), got)
		}
	}
	for _, n := range names["dev"] {
		if slices.Contains(names["prod"], n) {
			t.Errorf("dev and prod share the physical name %s", n)
		}
	}
	t.Logf("dev: %v", names["dev"])
}
