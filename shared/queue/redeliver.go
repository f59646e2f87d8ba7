package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// VisibilityClient is the part of *sqs.Client a Redeliverer uses.
type VisibilityClient interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var _ VisibilityClient = (*sqs.Client)(nil)

// Redeliverer brings back, after a short wait, a message its handler failed
// for a reason that may pass (a throttled or unreachable DynamoDB or SQS).
// Lambda leaves a failed message invisible for the queue's whole visibility
// timeout, which the stack sets to six times the consumer's timeout (minutes)
// against step budgets of seconds: a reply would come back only to be refused
// as stale. The event source mapping's role can already change visibility.
type Redeliverer struct {
	client VisibilityClient
	// urls maps a queue's name (the last part of its ARN and of its URL) to
	// its URL: events name the queue by ARN, the API wants the URL.
	urls map[string]string
}

// NewRedeliverer returns a Redeliverer for the queues the handler consumes.
func NewRedeliverer(c VisibilityClient, queueURLs ...string) *Redeliverer {
	r := &Redeliverer{client: c, urls: map[string]string{}}
	for _, u := range queueURLs {
		r.urls[u[strings.LastIndex(u, "/")+1:]] = u
	}
	return r
}

// MaxRedeliveryDelay caps RedeliveryDelay.
const MaxRedeliveryDelay = 30 * time.Second

// RedeliveryDelay is the wait before a message that failed on its n-th
// receive comes back: 1 s, 2 s, 4 s, … up to MaxRedeliveryDelay. With the
// stack's five receives before the dead-letter queue, a message keeps being
// retried for about 15 s, inside a step's budget.
func RedeliveryDelay(receiveCount int) time.Duration {
	n := min(max(receiveCount, 1), 6)
	return min(time.Second<<(n-1), MaxRedeliveryDelay)
}

// ReceiveCount reads a record's ApproximateReceiveCount; 1 when absent.
func ReceiveCount(rec events.SQSMessage) int {
	n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// After makes rec visible again after wait (whole seconds, at most the
// longest visibility SQS allows). The handler still reports rec as a batch
// item failure; Lambda then leaves it alone.
func (r *Redeliverer) After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error {
	name := rec.EventSourceARN[strings.LastIndex(rec.EventSourceARN, ":")+1:]
	url, ok := r.urls[name]
	if !ok {
		return fmt.Errorf("redeliver %s: queue %q is not one this handler consumes", rec.MessageId, rec.EventSourceARN)
	}
	secs := min(max(int32((wait+time.Second-1)/time.Second), 0), 12*60*60)
	_, err := r.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(url), ReceiptHandle: aws.String(rec.ReceiptHandle), VisibilityTimeout: secs,
	})
	if err != nil {
		return fmt.Errorf("redeliver %s in %v: %w", rec.MessageId, wait, err)
	}
	return nil
}
