// Command notifier is the event publisher Lambda, fed by the state table's
// DynamoDB stream (event source mapping with ReportBatchItemFailures): it
// publishes each committed change of an order's client status to the
// order-events topic.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/notifier"
)

func main() {
	cfg, aws, log := coldstart.Load("notifier", notifier.LoadConfig)
	h, err := notifier.New(cfg, notifier.NewPublisher(sns.NewFromConfig(aws), cfg.OrderEventsTopicARN), actor.Deps{Log: log})
	coldstart.Check(log, "build handler", err)
	lambda.Start(h.Handle)
}
