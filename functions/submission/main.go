// Command submission is the Submission Lambda behind the API Gateway HTTP
// API: POST /orders and GET /orders/{id}.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "submission")
	cfg, err := submission.LoadConfig(os.Getenv)
	if err != nil {
		log.Error("bad configuration", "error", err)
		os.Exit(1)
	}
	// Loaded once per cold start; the clients are reused across invocations.
	aws, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("aws configuration", "error", err)
		os.Exit(1)
	}
	store := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Orders: cfg.OrdersTable, State: cfg.StateTable})
	h := submission.New(cfg, store, queue.NewSender(sqs.NewFromConfig(aws)), clock.System{}, log)
	lambda.Start(h.Handle)
}
