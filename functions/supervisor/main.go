// Command supervisor is the Supervisor Lambda, fired by an EventBridge
// schedule.
package main

import (
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/xray"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/segments"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/supervisor"
)

func main() {
	cfg, aws, log := coldstart.Load("supervisor", supervisor.LoadConfig)
	store := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Orders: cfg.OrdersTable, State: cfg.StateTable})
	alerts := alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)
	h, err := supervisor.New(cfg, store, queue.NewSender(sqs.NewFromConfig(aws)), alerts, actor.Deps{Log: log})
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.WrapErr(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
