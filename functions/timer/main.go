// Command timer is the Timer Lambda, fed by the state table's DynamoDB
// stream (event source mapping with ReportBatchItemFailures): for every
// write that starts a new phase of a record the Supervisor watches, it
// sends a Deadline to the deadline queue, delayed until that CompleteBy.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/timer"
)

func main() {
	cfg, aws, log := coldstart.Load("timer", timer.LoadConfig)
	h, err := timer.New(cfg, queue.NewSender(sqs.NewFromConfig(aws)), actor.Deps{Log: log})
	coldstart.Check(log, "build handler", err)
	lambda.Start(h.Handle)
}
