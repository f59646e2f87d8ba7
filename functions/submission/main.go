// Command submission is the Submission Lambda behind the API Gateway HTTP
// API: POST /orders and GET /orders/{id}.
package main

import (
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/segments"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
)

func main() {
	cfg, aws, log := coldstart.Load("submission", submission.LoadConfig)
	store := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Orders: cfg.OrdersTable, State: cfg.StateTable})
	sqsClient := sqs.NewFromConfig(aws)
	gate, err := admission.New(cfg.Admission, queue.NewDepths(sqsClient), actor.Deps{Log: log})
	coldstart.Check(log, "build admission check", err)
	var opts []submission.Option
	if cfg.AlertTopicARN != "" {
		opts = append(opts, submission.WithAlerts(alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)))
	}
	h, err := submission.New(cfg, store, queue.NewSender(sqsClient), gate, actor.Deps{Log: log}, opts...)
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
