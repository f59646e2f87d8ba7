// Command scheduler is the Scheduler Lambda: it consumes the scheduler queue
// and the agents' response queue.
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
	"github.com/sasflow/sas/shared/scheduler"
	"github.com/sasflow/sas/shared/statestore"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "scheduler")
	cfg, err := scheduler.LoadConfig(os.Getenv)
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
	h := scheduler.New(cfg, store, queue.NewSender(sqs.NewFromConfig(aws)), alerts, clock.System{}, log)
	lambda.Start(h.Handle)
}
