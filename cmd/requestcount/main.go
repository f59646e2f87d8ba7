// Command requestcount runs orders through the real handlers against local
// engines and prints the AWS requests made per order, split into the
// handlers' own requests and the SQS polling that Lambda's event source
// mappings do for them.
//
//	scripts/engines.sh run -- go run ./cmd/requestcount -orders 20
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/reqcount"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

func main() {
	orders := flag.Int("orders", 10, "orders to run")
	flag.Parse()
	if err := run(context.Background(), *orders, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "requestcount:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, orders int, out io.Writer) error {
	ddbURL, awsURL := os.Getenv("SAS_TEST_DYNAMODB_ENDPOINT"), os.Getenv("SAS_TEST_AWS_ENDPOINT")
	if ddbURL == "" || awsURL == "" {
		return fmt.Errorf("set SAS_TEST_DYNAMODB_ENDPOINT and SAS_TEST_AWS_ENDPOINT (scripts/engines.sh run -- ... does)")
	}
	var handlers, polling reqcount.Counter
	// counted is the configuration of a client of one engine whose requests
	// c counts.
	counted := func(endpoint string, c *reqcount.Counter) aws.Config {
		return aws.Config{
			Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
			BaseEndpoint: aws.String(endpoint), APIOptions: []func(*middleware.Stack) error{c.Add},
		}
	}
	ddb := dynamodb.NewFromConfig(counted(ddbURL, &handlers))
	handlerSQS := sqs.NewFromConfig(counted(awsURL, &handlers))
	pollSQS := sqs.NewFromConfig(counted(awsURL, &polling))
	snsc := sns.NewFromConfig(counted(awsURL, &handlers))

	sim := remotesim.New()
	defer sim.Close()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	agentCfg := agent.DefaultConfig()
	sys, err := wiring.Build(ctx, wiring.Options{
		DynamoDB: ddb, SQS: handlerSQS, PollSQS: pollSQS, SNS: snsc,
		Prefix: "reqcount-" + strconv.FormatInt(time.Now().UnixNano(), 36), Region: "us-east-1",
		Workflows: workflow.Single(workflow.Reference()), Policy: workflow.DefaultPolicy(), RemoteBaseURL: srv.URL, Agent: agentCfg,
		MaxReceiveCount: 3, VisibilityTimeout: 30 * time.Second,
		Clock: clock.System{}, Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	handlers.Reset()
	polling.Reset()
	ids := make([]string, 0, orders)
	for i := range orders {
		req := events.APIGatewayV2HTTPRequest{RawPath: "/orders", RouteKey: "POST /orders",
			Headers: map[string]string{"content-type": "application/json"},
			Body:    `{"customerId":"c-1","currency":"EUR","items":[{"sku":"A-1","quantity":1,"unitPriceCents":100}]}`}
		req.RequestContext.HTTP.Method = "POST"
		req.RequestContext.RequestID = "count-" + strconv.Itoa(i)
		// The identity API Gateway's IAM authorization passes: every route
		// takes one (the orders are their caller's).
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: apigw.LocalUser(apigw.Credential{AccessKeyID: "requestcount"})}
		resp, err := sys.Submission.Handle(ctx, req)
		if err != nil || resp.StatusCode != 202 {
			return fmt.Errorf("submit: %d %s %v", resp.StatusCode, resp.Body, err)
		}
		ids = append(ids, resp.Headers["Location"][len("/orders/"):])
	}
	if _, err := sys.Settle(ctx, 20*orders+20); err != nil {
		return err
	}
	counts := map[workflow.ProcessState]int{}
	handlerCounts, pollCounts := handlers.Snapshot(), polling.Snapshot()
	for _, id := range ids {
		st, err := sys.Store.GetState(ctx, id)
		if err != nil {
			return err
		}
		counts[st.ProcessState]++
	}
	fmt.Fprintf(out, "orders: %d submitted, %d Processed, %d Error, %d still in flight; remote effects: %d (want %d)\n\n",
		orders, counts[workflow.Processed], counts[workflow.Error], counts[workflow.Pending]+counts[workflow.Processing]+counts[workflow.Waiting],
		len(sim.Effects()), 2*orders)
	if counts[workflow.Processed] != orders {
		return fmt.Errorf("not every order was processed")
	}
	fmt.Fprintf(out, "AWS requests per order (%d two-step orders, happy path)\n\nmade by the handlers:\n%s\nmade by the SQS event source mappings (Lambda's pollers; batching makes this vary):\n%s",
		orders, reqcount.Table(handlerCounts, orders), reqcount.Table(pollCounts, orders))
	return nil
}
