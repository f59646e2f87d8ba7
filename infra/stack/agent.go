package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// agentQueue declares the request queue of step's Agent, visible as long as
// the longest version of the step runs (its Agent's timeout).
func (b *builder) agentQueue(step workflow.Step) *workQueue {
	return b.workQueue(pascal(step.Name)+"Queue", topology.AgentTimeout(step))
}

// agents deploys one Agent per step name across the live versions, in
// AgentNames' order: each behind its own queue, timed out at the step's
// longest lease (Agents' union); the event source's maximum concurrency,
// from the capacity model, keeps the calls in flight to what the remote
// service takes. A step with a folder in steps/ (Config.CodeSteps) is a
// code step: its own code's function takes the Agent's place (codeStep).
func (b *builder) agents(sh *sharedResources) []*fn {
	byName := map[string]*fn{}
	for _, st := range b.cfg.Workflows.Agents() {
		if m, ok := b.cfg.CodeSteps[st.Name]; ok {
			byName[st.Name] = b.codeStep(sh, st, m)
			continue
		}
		byName[st.Name] = b.agent(sh, st)
	}
	out := make([]*fn, 0, len(byName))
	for _, name := range b.cfg.Workflows.AgentNames() {
		out = append(out, byName[name])
	}
	return out
}

// agent deploys step's Agent: the parameter naming its remote service, its
// function, grants (topology's descriptor: it replies to the Scheduler and
// alerts on a poison request's last receive), event source and alarms.
// Its queue is declared with the others (agentQueue), since the
// Submission and the Scheduler send to it.
func (b *builder) agent(sh *sharedResources, st workflow.Step) *fn {
	// https only: the Agent sends the order's step over it. The parameter
	// keeps its name and takes one URL or several, so a stack deployed
	// with one keeps its value; the Agent reads it as REMOTE_BASE_URLS.
	remote := awscdk.NewCfnParameter(b.stack, jsii.String(pascal(st.Name)+"RemoteBaseUrl"), &awscdk.CfnParameterProps{
		Type:                  jsii.String("String"),
		AllowedPattern:        jsii.String(RemoteURLPattern),
		ConstraintDescription: jsii.String("one absolute https:// URL without query or fragment, or up to 8 separated by commas"),
		Description: jsii.String(fmt.Sprintf("Base URL of the remote service the %s Agent calls (POST {url}/v1/steps/%s with an Idempotency-Key header); "+
			"or the base URLs of its replicas, comma-separated, which must share one idempotency state.", st.Name, st.Name)),
	})
	q := sh.queues.agents[st.Name]
	f := b.actorFunction(Agent, sh, fnSpec{
		id:          "Agent-" + st.Name,
		description: fmt.Sprintf("Agent for step %s: calls its remote service with retries until CompleteBy and replies to the Scheduler", st.Name),
		trigger:     byQueue,
		timeout:     topology.AgentTimeout(st), memory: topology.AgentMemoryMB,
	}, map[string]*string{
		topology.EnvAgentStep:      jsii.String(st.Name),
		topology.EnvRemoteBaseURLs: remote.ValueAsString(),
		// Its own queue: a request whose reply could not be sent comes
		// back on it within seconds.
		topology.EnvRequestQueueURL: q.main.QueueUrl(),
	})
	b.stepQueue(sh, f, st, q, fmt.Sprintf("The remote service is slower than the capacity model's RemoteLatency (%s=%v) or the %s Agent is throttled or failing",
		ContextRemoteLatency, b.cfg.Capacity.RemoteLatency, st.Name))
	return f
}

// stepQueue subscribes step st's function f, an Agent or a code step's,
// to its request queue q with the capacity model's concurrency, and adds
// the queue's and the function's alarms; slow says what a queue that ages
// means first.
func (b *builder) stepQueue(sh *sharedResources, f *fn, st workflow.Step, q *workQueue, slow string) {
	f.step = st.Name
	b.consume(f, q, topology.AgentBatchSize, b.cfg.Capacity.AgentMaxConcurrency())

	// The queue alarms at its step's longest lease over the live versions:
	// a request of any version younger than that may still complete in
	// time. The capacity model means a request to wait at most its step's
	// Wait allowance, the admission check shedding new orders long before.
	c, age := b.cfg.Capacity, topology.AgentQueueAgeAlarm(st)
	b.queueAlarms(sh.alerts, q, age, fmt.Sprintf(
		"The oldest request on %s is older than %v, step %s's longest lease over the live versions (queue allowance plus budget): requests are outliving their step's budget. "+
			"%s. "+
			"Check %s's errors and duration; then raise %s (now %d) if the service takes more calls at once, or set %s to the service's real p90 latency.",
		q.id, age, st.Name, slow,
		f.id, ContextRemoteConcurrency, c.RemoteConcurrency, ContextRemoteLatency))
	b.functionErrors(sh.alerts, f)
}
