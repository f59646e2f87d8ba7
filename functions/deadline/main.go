// Command deadline is the Supervisor's fast path, fed by the deadline
// queue (event source mapping with ReportBatchItemFailures): each Deadline
// arrives when a phase's CompleteBy passes, and the record is recovered as
// the scheduled sweep would recover it.
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
	cfg, aws, log := coldstart.Load("deadline", supervisor.LoadDeadlineConfig)
	store := statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Orders: cfg.OrdersTable, State: cfg.StateTable})
	alerts := alert.NewPublisher(sns.NewFromConfig(aws), cfg.AlertTopicARN)
	q := sqs.NewFromConfig(aws)
	h, err := supervisor.New(cfg.Config, store, queue.NewSender(q), alerts, actor.Deps{Log: log},
		supervisor.WithRedelivery(queue.NewRedeliverer(q, cfg.DeadlineQueueURL)))
	coldstart.Check(log, "build handler", err)
	lambda.Start(segments.Wrap(segments.New(xray.NewFromConfig(aws), log), time.Now, h.HandleDeadlines))
}
