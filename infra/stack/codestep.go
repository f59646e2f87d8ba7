package stack

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// codeStep deploys code step st (steps/<step>, manifest m) as its own
// function, functions/steps/<step>, in the Agent's place: the same queue,
// dead-letter queue, event source, alarms and reply grant, but no remote
// service's URL. Instead it gets the manifest's parameters, variables and
// statements, and the ledger on its own keys (topology's CodeStep).
func (b *builder) codeStep(sh *sharedResources, st workflow.Step, m stepgen.Manifest) *fn {
	params := map[string]awscdk.CfnParameter{}
	for _, name := range slices.Sorted(maps.Keys(m.Parameters)) {
		params[name] = awscdk.NewCfnParameter(b.stack, jsii.String(name), &awscdk.CfnParameterProps{
			Type:        jsii.String("String"),
			MinLength:   jsii.Number(1),
			Description: jsii.String(fmt.Sprintf("%s (code step %s, steps/%s/step.json)", m.Parameters[name], st.Name, st.Name)),
		})
	}
	q := sh.queues.agents[st.Name]
	actor := topology.Describe(topology.CodeStep)
	env := environment(actor, sh.env, map[string]*string{
		topology.EnvAgentStep: jsii.String(st.Name),
		// Its own queue: a request whose reply could not be sent comes
		// back on it within seconds.
		topology.EnvRequestQueueURL: q.main.QueueUrl(),
	})
	for name, v := range m.Environment {
		if _, clash := (*env)[name]; clash {
			panic(fmt.Sprintf("stack: code step %s sets %s, which its runtime reads", st.Name, name))
		}
		(*env)[name] = b.substitute(v, params)
	}
	f := b.function("steps/"+st.Name, fnSpec{
		id:          "Step-" + st.Name,
		description: "Code step " + st.Name + ": " + m.Description,
		trigger:     byQueue,
		timeout:     topology.AgentTimeout(st), memory: topology.AgentMemoryMB,
		env: env,
	})
	f.step = st.Name
	b.grant(f, actor, sh)
	for i, s := range m.Statements {
		resources := make([]*string, len(s.Resources))
		var wildcards []any
		for j, r := range s.Resources {
			resources[j] = b.substitute(r, params)
			if strings.Contains(r, "*") {
				wildcards = append(wildcards, jsii.String("Resource::"+nagPattern(r)))
			}
		}
		allow(f.role, s.Actions, resources...)
		if len(wildcards) > 0 {
			// stepgen admits a wildcard only in the last segment of a
			// literal path under one resource (shipments/* of the
			// bucket): the step's own objects, named at run time.
			cdknag.NagSuppressions_AddResourceSuppressions(f.role, &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"),
				Reason: jsii.String(fmt.Sprintf("Statement %d of steps/%s/step.json: the step names its objects at run time, under a literal path of "+
					"one resource that is the step's own (stepgen refuses a wildcard anywhere else).", i, st.Name)),
				AppliesTo: &wildcards,
			}}, jsii.Bool(true))
		}
	}
	b.stepQueue(sh, f, st, q, fmt.Sprintf("The step's own calls are slower than the capacity model's RemoteLatency (%s=%v) or the %s function is throttled or failing",
		ContextRemoteLatency, b.cfg.Capacity.RemoteLatency, f.id))
	return f
}

// substitute is the manifest value s with its ${Name} references replaced
// by the stack's parameters and CloudFormation's pseudo parameters: a
// token CloudFormation resolves (a Ref, or a Join of literals and Refs).
func (b *builder) substitute(s string, params map[string]awscdk.CfnParameter) *string {
	var out strings.Builder
	for _, p := range stepgen.Parts(s) {
		switch p.Ref {
		case "":
			out.WriteString(p.Literal)
		case stepgen.Partition:
			out.WriteString(*awscdk.Aws_PARTITION())
		case stepgen.Region:
			out.WriteString(*awscdk.Aws_REGION())
		case stepgen.AccountID:
			out.WriteString(*awscdk.Aws_ACCOUNT_ID())
		default:
			param, ok := params[p.Ref]
			if !ok {
				panic(fmt.Sprintf("stack: a manifest references %s, which it does not declare (stepgen validates this)", p.Ref))
			}
			out.WriteString(*param.ValueAsString())
		}
	}
	return jsii.String(out.String())
}

// nagPattern is how cdk-nag names the resource s in its findings: each
// reference as <Name>.
func nagPattern(s string) string {
	var out strings.Builder
	for _, p := range stepgen.Parts(s) {
		if p.Ref == "" {
			out.WriteString(p.Literal)
		} else {
			out.WriteString("<" + p.Ref + ">")
		}
	}
	return out.String()
}
