// Command agent is the Agent Lambda. One binary serves every step: the stack
// deploys it once per step with AGENT_STEP set.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/queue"
)

// The SQS adapter is the reply sender the runtime expects.
var _ agent.ReplySender = (*queue.Sender)(nil)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cfg, err := agent.LoadConfig(os.Getenv)
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(1)
	}
	// Built once per container, so connections and breakers survive across
	// invocations.
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS config", "err", err)
		os.Exit(1)
	}
	sender := queue.NewSender(sqs.NewFromConfig(awsCfg))
	svc := agent.NewHTTPService(cfg.RemoteBaseURL, agent.NewHTTPClient(cfg.RemoteTimeout))
	h, err := agent.New(cfg, svc, sender, clock.System{}, log)
	if err != nil {
		log.Error("build handler", "err", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
