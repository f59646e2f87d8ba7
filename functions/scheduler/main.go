// Command scheduler is the Scheduler Lambda: it consumes the scheduler queue
// and the agents' response queue.
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
	"github.com/sasflow/sas/shared/scheduler"
	"github.com/sasflow/sas/shared/segments"
	"github.com/sasflow/sas/shared/statestore"
)

func main() {
	cfg, aws, log := coldstart.Load("scheduler", scheduler.LoadConfig)
	store := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Orders: cfg.OrdersTable, State: cfg.StateTable})
	alerts := alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)
	sqsc := sqs.NewFromConfig(aws)
	h, err := scheduler.New(cfg, store, queue.NewSender(sqsc), alerts, actor.Deps{Log: log},
		scheduler.WithRedelivery(queue.NewRedeliverer(sqsc, cfg.SchedulerQueueURL, cfg.ResponseQueueURL)))
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.Handle))
}
