package codestep

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/segments"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/step"
)

// The adapters Main wires fit the ports they stand for.
var (
	_ agent.ReplySender     = (*queue.Sender)(nil)
	_ statestore.LedgerPort = (*statestore.Store)(nil)
)

// Main is the Lambda of the code step name (functions/steps/<name>): the
// configuration (LoadConfig; AGENT_STEP must be name), the step from
// newStep with the function's environment and AWS configuration, the ledger
// on LEDGER_TABLE, and the agent's Handler around them, as the HTTP Agent
// is wired. It does not return; a function that cannot start exits with
// the reason logged.
func Main(name string, newStep step.New) {
	cfg, aws, log := coldstart.Load(name, LoadConfig)
	if cfg.Step != name {
		coldstart.Check(log, "bad configuration", fmt.Errorf("AGENT_STEP=%q, but this function runs the code of step %q", cfg.Step, name))
	}
	// Built once per container, so clients and breakers survive across
	// invocations.
	st, err := newStep(context.Background(), step.Env{Getenv: os.Getenv, AWS: aws})
	coldstart.Check(log, "build step "+name, err)
	ledger := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Ledger: cfg.LedgerTable})
	svc, err := New(name, st, ledger, actor.Deps{Log: log}, WithRetention(cfg.Retention), WithMaxOutputBytes(cfg.MaxOutputBytes))
	coldstart.Check(log, "build code step", err)
	sqsc := sqs.NewFromConfig(aws)
	opts := []agent.Option{agent.WithRedelivery(queue.NewRedeliverer(sqsc, cfg.RequestQueueURL))}
	if cfg.AlertTopicARN != "" {
		opts = append(opts, agent.WithAlerts(alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)))
	}
	h, err := agent.New(cfg.Config, svc, queue.NewSender(sqsc), actor.Deps{Log: log}, opts...)
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
