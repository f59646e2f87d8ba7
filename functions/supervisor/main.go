// Command supervisor is the Supervisor Lambda, fired by an EventBridge
// schedule.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/supervisor"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "supervisor")
	cfg, err := supervisor.LoadConfig(os.Getenv)
	if err != nil {
		log.Error("bad configuration", "error", err)
		os.Exit(1)
	}
	aws, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("aws configuration", "error", err)
		os.Exit(1)
	}
	store := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Orders: cfg.OrdersTable, State: cfg.StateTable})
	alerts := alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)
	h := supervisor.New(cfg, store, queue.NewSender(sqs.NewFromConfig(aws)), alerts, clock.System{}, log)
	lambda.Start(h.Handle)
}
