package esm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/localstack/streambridge"
)

// mapping is what both bridges are.
type mapping interface {
	PollOnce(ctx context.Context) (int, error)
	Run(ctx context.Context) error
}

// sqsMapping is a well configured SQS mapping, then changed. Its client is
// never called: a misconfigured mapping stops before.
func sqsMapping(change func(*sqsbridge.Bridge)) mapping {
	b := &sqsbridge.Bridge{
		Client:   sqs.New(sqs.Options{}),
		QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs",
		QueueARN: "arn:aws:sqs:eu-west-1:123456789012:jobs",
		Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		},
	}
	change(b)
	return b
}

// streamMapping is sqsMapping's counterpart for a DynamoDB stream.
func streamMapping(change func(*streambridge.Bridge)) mapping {
	b := &streambridge.Bridge{
		Client:    dynamodbstreams.New(dynamodbstreams.Options{}),
		StreamARN: "arn:aws:dynamodb:eu-west-1:123456789012:table/state/stream/2024-01-01T00:00:00.000",
		Handler: func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			return events.DynamoDBEventResponse{}, nil
		},
	}
	change(b)
	return b
}

// TestMisconfiguredMappingsRefuse: PollOnce and Run of either mapping
// refuse a misconfiguration, naming the problem.
func TestMisconfiguredMappingsRefuse(t *testing.T) {
	t.Parallel()
	// The subtests are named by the mapping and the problem.
	tests := []struct {
		m    mapping
		want string
	}{
		{sqsMapping(func(b *sqsbridge.Bridge) { b.Client = nil }), "no Client"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.Handler = nil }), "no Handler"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.QueueURL = "" }), "no QueueURL"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.QueueARN = "" }), "no QueueARN"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.BatchSize = 11 }), "BatchSize 11"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.BatchSize = -1 }), "BatchSize -1"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.WaitTime = 21 * time.Second }), "WaitTime 21s"},
		{sqsMapping(func(b *sqsbridge.Bridge) { b.QueueARN = "jobs" }), "no Region"},
		{streamMapping(func(b *streambridge.Bridge) { b.Client = nil }), "no Client"},
		{streamMapping(func(b *streambridge.Bridge) { b.Handler = nil }), "no Handler"},
		{streamMapping(func(b *streambridge.Bridge) { b.StreamARN = "" }), "no StreamARN"},
		{streamMapping(func(b *streambridge.Bridge) { b.BatchSize = 1001 }), "BatchSize 1001"},
		{streamMapping(func(b *streambridge.Bridge) { b.BatchSize = -1 }), "BatchSize -1"},
		{streamMapping(func(b *streambridge.Bridge) { b.PollInterval = -time.Second }), "PollInterval -1s"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%T %s", tc.m, tc.want), func(t *testing.T) {
			t.Parallel()
			if _, err := tc.m.PollOnce(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PollOnce err = %v, want %q", err, tc.want)
			}
			if err := tc.m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run err = %v, want %q", err, tc.want)
			}
		})
	}
}
