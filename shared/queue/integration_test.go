package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// newQueue creates a queue of its own on the local engine for the test.
func newQueue(t *testing.T, opts enginetest.QueueOptions) (*sqs.Client, enginetest.Queue) {
	t.Helper()
	c := enginetest.SQS(t)
	return c, enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), opts)
}

func TestSendIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, q := newQueue(t, enginetest.QueueOptions{})
	s := queue.NewSender(c)

	// A delay of 14 minutes outlives the test, so counting it as delayed is
	// not a race with the clock.
	if err := s.Send(ctx, q.URL, "later", 14*time.Minute-time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, q.URL, `{"now":true}`, 0); err != nil {
		t.Fatal(err)
	}
	msgs := enginetest.ReceiveAll(ctx, t, c, q.URL, 1, 10*time.Second)
	if got := aws.ToString(msgs[0].Body); got != `{"now":true}` {
		t.Errorf("body = %q", got)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.URL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes["ApproximateNumberOfMessagesDelayed"]; n != "1" {
		t.Errorf("delayed messages = %q, want 1", n)
	}
}

// TestSendAtTheMessageLimitIntegration: a queue made as the local stack
// makes them takes a message of exactly SQS's limit (1 MiB), one or in a
// batch, and refuses one byte more.
func TestSendAtTheMessageLimitIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, q := newQueue(t, enginetest.QueueOptions{})
	s := queue.NewSender(c)
	body := strings.Repeat("x", workflow.MaxMessageBytes)
	if err := s.Send(ctx, q.URL, body, 0); err != nil {
		t.Fatalf("a message of %d bytes: %v", len(body), err)
	}
	if err := s.SendBatch(ctx, q.URL, queue.Bodies(body)); err != nil {
		t.Fatalf("a batch of one message of %d bytes: %v", len(body), err)
	}
	for _, m := range enginetest.ReceiveAll(ctx, t, c, q.URL, 2, 20*time.Second) {
		if got := aws.ToString(m.Body); got != body {
			t.Errorf("received %d bytes, want the %d sent", len(got), len(body))
		}
	}
	if err := s.Send(ctx, q.URL, body+"x", 0); err == nil {
		t.Errorf("a message of %d bytes, over SQS's limit, was sent", len(body)+1)
	}
}

func TestSendToMissingQueue(t *testing.T) {
	t.Parallel()
	c := enginetest.SQS(t)
	_, endpoint := enginetest.Endpoints(t)
	url := endpoint + "/" + enginetest.AccountID + "/" + enginetest.UniqueName(t, "missing")
	err := queue.NewSender(c).Send(context.Background(), url, "x", 0)
	var notFound *sqstypes.QueueDoesNotExist
	if !errors.As(err, &notFound) || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v, want QueueDoesNotExist naming %s", err, url)
	}
}

func TestSendBatchIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, q := newQueue(t, enginetest.QueueOptions{})
	s := queue.NewSender(c)

	bodies := make([]string, 23)
	for i := range bodies {
		bodies[i] = strings.Repeat("x", i+1)
	}
	// SQS refuses U+0000 in a body entry by entry, not the whole request.
	bodies[12] = "bad \x00 body"
	err := s.SendBatch(ctx, q.URL, queue.Bodies(bodies...))
	var be *queue.BatchError
	if !errors.As(err, &be) || len(be.Failures) != 1 || be.Failures[0].Index != 12 || be.Failures[0].Code != "InvalidMessageContents" {
		t.Fatalf("err = %v, want entry 12 failed with InvalidMessageContents", err)
	}

	want := slices.Delete(slices.Clone(bodies), 12, 13)
	var got []string
	for _, m := range enginetest.ReceiveAll(ctx, t, c, q.URL, len(want), 20*time.Second) {
		got = append(got, aws.ToString(m.Body))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("received %q, want %q", got, want)
	}
	enginetest.AssertNoMessages(ctx, t, c, q.URL, time.Second)
}

func TestDepthIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, q := newQueue(t, enginetest.QueueOptions{})
	s, d := queue.NewSender(c), queue.NewDepths(c)

	if n, err := d.Depth(ctx, q.URL); err != nil || n != 0 {
		t.Fatalf("empty queue: depth %d, %v", n, err)
	}
	// Waiting messages count; a delayed one and one being worked on do not.
	if err := s.SendBatch(ctx, q.URL, queue.Bodies("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, q.URL, "later", 14*time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Depth(ctx, q.URL); err != nil || n != 3 {
		t.Fatalf("depth %d, %v; want 3", n, err)
	}
	enginetest.ReceiveAll(ctx, t, c, q.URL, 1, 10*time.Second)
	if n, err := d.Depth(ctx, q.URL); err != nil || n != 2 {
		t.Fatalf("after receiving one: depth %d, %v; want 2", n, err)
	}
}

func TestDepthOfMissingQueue(t *testing.T) {
	t.Parallel()
	c := enginetest.SQS(t)
	_, endpoint := enginetest.Endpoints(t)
	url := endpoint + "/" + enginetest.AccountID + "/" + enginetest.UniqueName(t, "missing")
	_, err := queue.NewDepths(c).Depth(context.Background(), url)
	var notFound *sqstypes.QueueDoesNotExist
	if !errors.As(err, &notFound) || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v, want QueueDoesNotExist naming %s", err, url)
	}
}
