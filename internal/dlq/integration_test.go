package dlq

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/topology"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// deadLetter sends n messages to q and receives each until SQS moves it to
// the DLQ (a redrive policy of one receive).
func deadLetter(t *testing.T, c *sqs.Client, q enginetest.Queue, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(`{"v":1,"kind":"schedule","orderId":"o-` + strconv.Itoa(i) + `","stepIndex":0}`),
			MessageAttributes: map[string]types.MessageAttributeValue{"orderId": {DataType: aws.String("String"), StringValue: aws.String("o-" + strconv.Itoa(i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	await.Until(t, 20*time.Second, fmt.Sprintf("%d messages dead-lettered", n), func() (bool, error) {
		if d := depth(t, c, q.DLQURL); d >= n {
			return true, nil
		}
		// Each receive counts; making the message visible again at once
		// lets the next one move it.
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		d := depth(t, c, q.DLQURL)
		return d >= n, fmt.Errorf("%d of %d messages dead-lettered", d, n)
	})
}

func depth(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible + 100*hidden
}

func TestDiscoverPeekAndCopyOnTheEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := enginetest.SQS(t)
	stack := enginetest.UniqueName(t, "st")
	responses := enginetest.CreateQueue(t, c, topology.QueueName(stack, "ResponseQueue"), enginetest.QueueOptions{MaxReceiveCount: 1})
	enginetest.CreateQueue(t, c, topology.QueueName(stack, "SchedulerQueue"), enginetest.QueueOptions{MaxReceiveCount: 1})
	// Not the stage's: a queue without a DLQ, and another stage's whose
	// stack name starts the same.
	enginetest.CreateQueue(t, c, topology.QueueName(stack, "Plain"), enginetest.QueueOptions{})
	enginetest.CreateQueue(t, c, topology.QueueName(stack+"-2", "ResponseQueue"), enginetest.QueueOptions{MaxReceiveCount: 1})
	deadLetter(t, c, responses, 3)

	pairs, err := Discover(ctx, c, Scope{Prefix: stack + "-", Stack: stack})
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 2 || pairs[0].ID != "ResponseQueue" || pairs[1].ID != "SchedulerQueue" {
		t.Fatalf("Discover = %+v", pairs)
	}
	p := pairs[0]
	if p.Source.URL != responses.URL || p.Source.ARN != responses.ARN || p.DLQ.URL != responses.DLQURL || p.DLQ.ARN != responses.DLQARN || p.MaxReceiveCount != 1 || p.Depth != 3 {
		t.Fatalf("pair %+v", p)
	}

	// A bounded peek, which leaves every message visible.
	msgs, err := Peek(ctx, c, p.DLQ, 2)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("Peek = %+v, %v", msgs, err)
	}
	if m := msgs[0]; m.Body.Kind != "schedule" || m.Body.OrderID == "" || m.ReceiveCount < 2 || m.SentAt.IsZero() {
		t.Fatalf("peeked %+v", m)
	}
	if d := depth(t, c, p.DLQ.URL); d != 3 {
		t.Fatalf("after the peek the DLQ holds %d visible (+100 per hidden), want 3", d)
	}

	moved, err := Copy{Client: c}.Move(ctx, p, 0)
	if err != nil || moved.Count != 3 {
		t.Fatalf("Copy = %+v, %v", moved, err)
	}
	if d := depth(t, c, p.DLQ.URL); d != 0 {
		t.Fatalf("after the copy the DLQ holds %d", d)
	}
	got := enginetest.ReceiveAll(ctx, t, c, p.Source.URL, 3, 10*time.Second)
	for _, m := range got {
		b := DecodeBody(aws.ToString(m.Body))
		if a := m.MessageAttributes["orderId"]; a.StringValue == nil || *a.StringValue != b.OrderID {
			t.Errorf("redriven %s lost its attributes: %+v", aws.ToString(m.Body), m.MessageAttributes)
		}
	}
}
