// Command timer is the Timer Lambda, fed by the state table's DynamoDB
// stream (event source mapping with ReportBatchItemFailures): for every
// write that starts a new phase of a record the Supervisor watches, it
// sends a Deadline to the deadline queue, delayed until that CompleteBy;
// for every write that ends an order for good, it gives the ledger entries
// of its code steps the record's TTL.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/timer"
)

func main() {
	cfg, aws, log := coldstart.Load("timer", timer.LoadConfig)
	var ledger timer.Ledger
	if len(cfg.CodeSteps) > 0 {
		ledger = statestore.New(dynamodb.NewFromConfig(aws), statestore.Tables{Ledger: cfg.LedgerTable})
	}
	h, err := timer.New(cfg, queue.NewSender(sqs.NewFromConfig(aws)), ledger, actor.Deps{Log: log})
	coldstart.Check(log, "build handler", err)
	lambda.Start(h.Handle)
}
