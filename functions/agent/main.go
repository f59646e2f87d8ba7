// Command agent is the Agent Lambda. One binary serves every step: the stack
// deploys it once per step with AGENT_STEP set.
package main

import (
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/segments"
)

func main() {
	cfg, aws, log := coldstart.Load("agent", agent.LoadConfig)
	// Built once per container, so connections and breakers survive across
	// invocations.
	svc := agent.NewReplicatedHTTPService(cfg.Endpoints(), agent.NewHTTPClient(cfg.RemoteTimeout))
	// agent.New adds the step to every log line; the clock is the system's,
	// actor.Deps's default.
	h, err := agent.NewFromConfig(cfg, svc, aws, actor.Deps{Log: log})
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
