package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/testkit/await"
)

// QueueOptions shape a queue made by CreateQueue.
type QueueOptions struct {
	// VisibilityTimeout is rounded up to whole seconds; zero keeps the
	// default of 30 s.
	VisibilityTimeout time.Duration
	// MaxReceiveCount, when positive, gives the queue a dead-letter queue
	// named <name>-dlq and a redrive policy that moves a message there
	// instead of delivering it for the (MaxReceiveCount+1)th time.
	MaxReceiveCount int
}

// Queue is a queue made by CreateQueue. The DLQ fields are empty when it has
// no dead-letter queue.
type Queue struct {
	Name, URL, ARN string
	DLQURL, DLQARN string
}

// CreateQueue creates a standard queue, and its dead-letter queue if asked,
// and deletes them when the test ends.
func CreateQueue(tb testing.TB, client *sqs.Client, name string, opts QueueOptions) Queue {
	tb.Helper()
	ctx, cancel := cleanupContext()
	defer cancel()
	q := Queue{Name: name}
	attrs := map[string]string{}
	if opts.VisibilityTimeout > 0 {
		attrs[string(sqstypes.QueueAttributeNameVisibilityTimeout)] = strconv.FormatInt(ceilSeconds(opts.VisibilityTimeout), 10)
	}
	if opts.MaxReceiveCount > 0 {
		q.DLQURL, q.DLQARN = createQueue(ctx, tb, client, name+"-dlq", nil)
		policy, err := json.Marshal(map[string]any{
			"deadLetterTargetArn": q.DLQARN,
			"maxReceiveCount":     opts.MaxReceiveCount,
		})
		if err != nil {
			tb.Fatalf("redrive policy: %v", err)
		}
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = string(policy)
	}
	q.URL, q.ARN = createQueue(ctx, tb, client, name, attrs)
	return q
}

func createQueue(ctx context.Context, tb testing.TB, client *sqs.Client, name string, attrs map[string]string) (url, arn string) {
	tb.Helper()
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		tb.Fatalf("create queue %s: %v", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	deleteAtEnd(tb, "queue "+url, func(ctx context.Context) error {
		_, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		return err
	})
	got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		tb.Fatalf("queue %s ARN: %v", name, err)
	}
	arn = got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		tb.Fatalf("queue %s has no QueueArn attribute", name)
	}
	return url, arn
}

// CreateTopicToQueue creates an SNS topic and a queue of the same name
// subscribed to it without raw delivery, so each message on the queue is the
// SNS envelope (see DecodeNotification). Both go when the test ends.
func CreateTopicToQueue(tb testing.TB, snsClient *sns.Client, sqsClient *sqs.Client, name string) (topicARN string, q Queue) {
	tb.Helper()
	q = CreateQueue(tb, sqsClient, name, QueueOptions{})
	ctx, cancel := cleanupContext()
	defer cancel()
	out, err := snsClient.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		tb.Fatalf("create topic %s: %v", name, err)
	}
	topicARN = aws.ToString(out.TopicArn)
	deleteAtEnd(tb, "topic "+topicARN, func(ctx context.Context) error {
		_, err := snsClient.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(topicARN)})
		return err
	})
	if _, err := snsClient.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn:              aws.String(topicARN),
		Protocol:              aws.String("sqs"),
		Endpoint:              aws.String(q.ARN),
		Attributes:            map[string]string{"RawMessageDelivery": "false"},
		ReturnSubscriptionArn: true,
	}); err != nil {
		tb.Fatalf("subscribe queue %s to topic %s: %v", q.ARN, topicARN, err)
	}
	return topicARN, q
}

// deleteAtEnd deletes what when the test ends. A failed delete is only
// logged: the test has passed or failed by then, and its names are unique.
func deleteAtEnd(tb testing.TB, what string, del func(context.Context) error) {
	tb.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := del(ctx); err != nil {
			tb.Logf("delete %s: %v", what, err)
		}
	})
}

// Notification is the JSON envelope SNS puts on a subscribed queue when raw
// delivery is off.
type Notification struct {
	Type              string
	MessageID         string `json:"MessageId"`
	TopicARN          string `json:"TopicArn"`
	Subject           string
	Message           string
	Timestamp         time.Time
	MessageAttributes map[string]NotificationAttribute
}

// NotificationAttribute is one message attribute inside a Notification.
type NotificationAttribute struct {
	Type, Value string
}

// DecodeNotification parses an SNS envelope from an SQS message body.
func DecodeNotification(tb testing.TB, body string) Notification {
	tb.Helper()
	var n Notification
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		tb.Fatalf("decode SNS notification: %v\nbody: %s", err, body)
	}
	if n.Type != "Notification" {
		tb.Fatalf("SNS envelope has Type %q, want Notification\nbody: %s", n.Type, body)
	}
	return n
}

// ReceiveAll receives from the queue until want messages have arrived or
// within has passed, deleting each, and returns them in arrival order. It
// fails the test if fewer arrive. Every system and message attribute is
// requested. Call it from the test's goroutine.
func ReceiveAll(ctx context.Context, tb testing.TB, client *sqs.Client, queueURL string, want int, within time.Duration) []sqstypes.Message {
	tb.Helper()
	var got []sqstypes.Message
	deadline := time.Now().Add(within)
	await.Until(tb, within, fmt.Sprintf("%d messages from %s", want, queueURL), func() (bool, error) {
		if len(got) >= want {
			return true, nil
		}
		msgs, err := receive(ctx, client, queueURL, min(want-len(got), 10), deadline)
		if err != nil {
			tb.Fatalf("receive from %s: %v (got %d of %d messages)", queueURL, err, len(got), want)
		}
		deleteMessages(ctx, tb, client, queueURL, msgs)
		got = append(got, msgs...)
		return len(got) >= want, fmt.Errorf("got %d of %d messages", len(got), want)
	})
	return got
}

// AssertNoMessages polls the queue for the whole of within and fails the
// test if any message arrives; such messages are left on the queue.
func AssertNoMessages(ctx context.Context, tb testing.TB, client *sqs.Client, queueURL string, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		msgs, err := receive(ctx, client, queueURL, 10, deadline)
		if err != nil {
			tb.Fatalf("receive from %s: %v", queueURL, err)
		}
		if len(msgs) > 0 {
			bodies := make([]string, len(msgs))
			for i, m := range msgs {
				bodies[i] = aws.ToString(m.Body)
			}
			tb.Fatalf("queue %s should stay empty, got %d message(s): %q", queueURL, len(msgs), bodies)
		}
		pace(ctx, deadline)
	}
}

// pace spaces out short polls, which the last second before a deadline
// uses, so they do not flood the engine.
func pace(ctx context.Context, deadline time.Time) {
	t := time.NewTimer(min(20*time.Millisecond, time.Until(deadline)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// receive makes one ReceiveMessage call that long-polls for at most a
// second, short of the deadline.
func receive(ctx context.Context, client *sqs.Client, queueURL string, n int, deadline time.Time) ([]sqstypes.Message, error) {
	var wait int32
	if time.Until(deadline) >= time.Second {
		wait = 1
	}
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
	defer cancel()
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

func deleteMessages(ctx context.Context, tb testing.TB, client *sqs.Client, queueURL string, msgs []sqstypes.Message) {
	tb.Helper()
	if len(msgs) == 0 {
		return
	}
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		err = errors.New(aws.ToString(out.Failed[0].Message))
	}
	if err != nil {
		tb.Fatalf("delete received messages from %s: %v", queueURL, err)
	}
}

// ceilSeconds rounds d up to whole seconds, as SQS counts them.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
