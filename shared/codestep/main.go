package codestep

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/segments"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/step"
)

// The DynamoDB store is the ledger Main wires.
var _ statestore.LedgerPort = (*statestore.Store)(nil)

// Main is the Lambda of the code step name (functions/steps/<name>): the
// configuration (LoadConfig; AGENT_STEP must be name), the step from
// newStep with the function's environment and AWS configuration, the ledger
// on LEDGER_TABLE, and the agent's Handler around them, wired as the HTTP
// Agent's (agent.NewFromConfig). It does not return; a function that
// cannot start exits with the reason logged.
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
	svc, err := New(name, st, ledger, actor.Deps{Log: log}, WithMaxOutputBytes(cfg.MaxOutputBytes))
	coldstart.Check(log, "build code step", err)
	h, err := agent.NewFromConfig(cfg.Config, svc, aws, actor.Deps{Log: log})
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
