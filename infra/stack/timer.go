package stack

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/topology"
)

// timerActor is the Timer's function with its stream's failure queue.
type timerActor struct {
	fn       *fn
	failures awssqs.Queue
}

// timer deploys the Timer, the first half of the Supervisor's fast path:
// it reads the state table's stream and sends each new phase of a watched
// record a Deadline, delayed until its CompleteBy, to the Deadline
// function's queue (supervisor.go).
func (b *builder) timer(sh *sharedResources) *timerActor {
	f := b.actorFunction(Timer, sh, fnSpec{
		description: "Reads the state table's stream, arms a Deadline, delayed until CompleteBy, for each new phase of a record the Supervisor watches, and gives an ended order's ledger entries its TTL",
		trigger:     byStream,
		timeout:     topology.TimerTimeout, memory: topology.TimerMemoryMB,
	}, map[string]*string{topology.EnvCodeSteps: jsii.String(strings.Join(b.cfg.CodeStepNames(), ","))})
	failures := b.failureQueue("TimerDLQ", "Timer")
	b.consumeStream(f, sh.state, failures)
	b.functionErrors(sh.alerts, f)
	b.streamAlarms(sh.alerts, f, failures, "the Supervisor's fast path is not armed meanwhile (the sweep still recovers, within its schedule)",
		"the description of stream records that expired before the Timer armed their Deadline; the sweep recovers those records")
	return &timerActor{fn: f, failures: failures}
}
