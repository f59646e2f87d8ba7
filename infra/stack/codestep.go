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
	// What the rules refuse never reaches the template, whoever built the
	// Config (FromContext validates it; a Config built in code may not
	// be).
	if err := m.Validate(st.Name); err != nil {
		panic(fmt.Sprintf("stack: code step %s: %v", st.Name, err))
	}
	params := map[string]awscdk.CfnParameter{}
	named := m.ResourceParameters()
	for _, name := range slices.Sorted(maps.Keys(m.Parameters)) {
		props := &awscdk.CfnParameterProps{
			Type:        jsii.String("String"),
			MinLength:   jsii.Number(1),
			Description: jsii.String(fmt.Sprintf("%s (code step %s, steps/%s/step.json)", m.Parameters[name], st.Name, st.Name)),
		}
		if slices.Contains(named, name) {
			// A resource is named with it: no wildcard or policy variable
			// that would widen the grant, and none of the stack's own
			// names (stepgen.ParameterValue).
			props.AllowedPattern = jsii.String(stepgen.ParameterPattern())
			props.ConstraintDescription = jsii.String("a name without *, ?, $ or spaces, and none of the stack's own resources")
		}
		params[name] = awscdk.NewCfnParameter(b.stack, jsii.String(name), props)
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
		for j, r := range s.Resources {
			resources[j] = b.substitute(r, params)
		}
		allow(f.role, s.Actions, resources...)
		// stepgen admits a wildcard only in the last segment of a literal
		// path under one resource (shipments/* of the bucket), and decides
		// which findings that makes: these, and no other, are suppressed.
		if findings := s.NagFindings(); len(findings) > 0 {
			applies := make([]any, len(findings))
			for k, finding := range findings {
				applies[k] = jsii.String(finding)
			}
			cdknag.NagSuppressions_AddResourceSuppressions(f.role, &[]*cdknag.NagPackSuppression{{
				Id:        jsii.String("AwsSolutions-IAM5"),
				Reason:    jsii.String(fmt.Sprintf("Statement %d of steps/%s/step.json: %s", i, st.Name, stepgen.WildcardReason)),
				AppliesTo: &applies,
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
