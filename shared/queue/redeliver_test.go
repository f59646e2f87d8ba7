package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/queue"
)

func TestRedeliveryDelay(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{
		0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second,
		5: 16 * time.Second, 6: queue.MaxRedeliveryDelay, 50: queue.MaxRedeliveryDelay,
	} {
		if got := queue.RedeliveryDelay(n); got != want {
			t.Errorf("RedeliveryDelay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := queue.ReceiveCount(events.SQSMessage{Attributes: map[string]string{"ApproximateReceiveCount": "x"}}); got != 1 {
		t.Errorf("ReceiveCount of a bad attribute = %d, want 1", got)
	}
}

// TestRedeliverIntegration: a message received under a long visibility
// timeout comes back after the short wait the handler asks for, on the real
// engine.
func TestRedeliverIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, q := newQueue(t, enginetest.QueueOptions{VisibilityTimeout: 10 * time.Minute})
	if err := queue.NewSender(c).Send(ctx, q.URL, "again", 0); err != nil {
		t.Fatal(err)
	}
	// Received by hand, not deleted: invisible for ten minutes.
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), WaitTimeSeconds: 5})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
	}
	m := out.Messages[0]
	rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), EventSourceARN: q.ARN}
	r := queue.NewRedeliverer(c, "https://elsewhere.example.com/000000000000/other", q.URL)
	if err := r.After(ctx, rec, time.Second); err != nil {
		t.Fatal(err)
	}
	again := enginetest.ReceiveAll(ctx, t, c, q.URL, 1, 15*time.Second)
	if aws.ToString(again[0].Body) != "again" {
		t.Fatalf("redelivered %q", aws.ToString(again[0].Body))
	}
	// A queue the handler does not consume is refused, not guessed.
	rec.EventSourceARN = "arn:aws:sqs:us-east-1:000000000000:unknown"
	if err := r.After(ctx, rec, time.Second); err == nil || !strings.Contains(err.Error(), "not one this handler consumes") {
		t.Fatalf("After on an unknown queue = %v", err)
	}
}
