// Command agent is the Agent Lambda. One binary serves every step: the stack
// deploys it once per step with AGENT_STEP set.
package main

import (
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/segments"
)

// The SQS adapter is the reply sender the runtime expects.
var _ agent.ReplySender = (*queue.Sender)(nil)

func main() {
	cfg, aws, log := coldstart.Load("agent", agent.LoadConfig)
	// Built once per container, so connections and breakers survive across
	// invocations.
	svc := agent.NewReplicatedHTTPService(cfg.Endpoints(), agent.NewHTTPClient(cfg.RemoteTimeout))
	sqsc := sqs.NewFromConfig(aws)
	opts := []agent.Option{agent.WithRedelivery(queue.NewRedeliverer(sqsc, cfg.RequestQueueURL))}
	if cfg.AlertTopicARN != "" {
		opts = append(opts, agent.WithAlerts(alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)))
	}
	// agent.New adds the step to every log line; the clock is the system's,
	// actor.Deps's default.
	h, err := agent.New(cfg, svc, queue.NewSender(sqsc), actor.Deps{Log: log}, opts...)
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
