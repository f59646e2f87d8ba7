package notifier_test

import (
	"context"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/topic"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// subscribe subscribes a client's queue to the topic, filtered on its
// clientId, as a client does with its private response queue.
func subscribe(t *testing.T, snsc *sns.Client, topicARN, queueARN, clientID string, raw bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rawDelivery := "false"
	if raw {
		rawDelivery = "true"
	}
	if _, err := snsc.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: aws.String(topicARN),
		Protocol: aws.String("sqs"),
		Endpoint: aws.String(queueARN),
		Attributes: map[string]string{
			"FilterPolicy":       `{"clientId":["` + clientID + `"]}`,
			"RawMessageDelivery": rawDelivery,
		},
		ReturnSubscriptionArn: true,
	}); err != nil {
		t.Fatalf("subscribe %s for %s: %v", queueARN, clientID, err)
	}
}

func TestNotifyIntegrationEachClientGetsOnlyItsEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snsc, sqsc := enginetest.SNS(t), enginetest.SQS(t)
	name := enginetest.UniqueName(t, "order-events")
	out, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	topicARN := aws.ToString(out.TopicArn)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := snsc.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(topicARN)}); err != nil {
			t.Logf("delete topic: %v", err)
		}
	})

	// client-a reads SNS envelopes, client-b raw bodies: DecodeEvent takes
	// both.
	clients := []struct {
		id  string
		raw bool
		q   enginetest.Queue
	}{
		{id: "client-a", raw: false},
		{id: "client-b", raw: true},
	}
	for i := range clients {
		c := &clients[i]
		c.q = enginetest.CreateQueue(t, sqsc, enginetest.UniqueName(t, c.id), enginetest.QueueOptions{})
		subscribe(t, snsc, topicARN, c.q.ARN, c.id, c.raw)
	}

	mk := func(client, order string, ps workflow.ProcessState, seq int) notifier.Event {
		s := state(ps, seq)
		s.OrderID, s.ClientID = order, client
		return notifier.EventOf(s)
	}
	published := []notifier.Event{
		mk("client-a", "o-a1", workflow.Pending, 1),
		mk("client-b", "o-b1", workflow.Pending, 1),
		mk("client-a", "o-a1", workflow.Processing, 2),
		mk("client-b", "o-b1", workflow.Cancelled, 2),
		mk("client-a", "o-a2", workflow.Pending, 1),
		mk("client-a", "o-a1", workflow.Processed, 3),
	}
	// The topic as the function reads it: the engine's ARN passes the
	// configuration's rules, as the stack's does.
	cfg, err := notifier.LoadConfig(func(k string) string { return map[string]string{"ORDER_EVENTS_TOPIC_ARN": topicARN}[k] })
	if err != nil {
		t.Fatal(err)
	}
	p := notifier.NewPublisher(snsc, cfg.OrderEventsTopicARN)
	if n, err := p.PublishBatch(ctx, published); n != len(published) || err != nil {
		t.Fatalf("PublishBatch = %d, %v; want %d, nil", n, err, len(published))
	}

	for _, c := range clients {
		var want []notifier.Event
		for _, ev := range published {
			if ev.ClientID == c.id {
				want = append(want, ev)
			}
		}
		msgs := enginetest.ReceiveAll(ctx, t, sqsc, c.q.URL, len(want), 40*time.Second) // see TestNotifyIntegrationStreamBatchInRequestsOfTen
		got := make(map[[2]any]notifier.Event, len(msgs))
		for _, m := range msgs {
			body := aws.ToString(m.Body)
			ev, err := notifier.DecodeEvent(body)
			if err != nil {
				t.Fatalf("%s: %v\nbody: %s", c.id, err, body)
			}
			got[[2]any{ev.OrderID, ev.Seq}] = ev
			checkAttributes(t, c.id, c.raw, m, ev)
		}
		// A standard topic and queue do not keep order; Seq does.
		for _, w := range want {
			if g, ok := got[[2]any{w.OrderID, w.Seq}]; !ok || !sameEvent(g, w) {
				t.Errorf("%s: event %s#%d = %+v (received: %v), want %+v", c.id, w.OrderID, w.Seq, g, ok, w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d distinct events, want %d", c.id, len(got), len(want))
		}
		enginetest.AssertNoMessages(ctx, t, sqsc, c.q.URL, time.Second)
	}
}

// checkAttributes asserts the message attributes a client sees: on the SQS
// message with raw delivery, inside the SNS envelope without.
func checkAttributes(t *testing.T, client string, raw bool, m sqstypes.Message, ev notifier.Event) {
	t.Helper()
	got := map[string][2]string{}
	if raw {
		for k, v := range m.MessageAttributes {
			got[k] = [2]string{aws.ToString(v.DataType), aws.ToString(v.StringValue)}
		}
	} else {
		n := enginetest.DecodeNotification(t, aws.ToString(m.Body))
		for k, v := range n.MessageAttributes {
			got[k] = [2]string{v.Type, v.Value}
		}
	}
	want := map[string][2]string{
		"clientId": {"String", client},
		"orderId":  {"String", ev.OrderID},
		"state":    {"String", string(ev.State)},
		"status":   {"String", string(ev.Status)},
		"seq":      {"Number", strconv.Itoa(ev.Seq)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: attributes of %s#%d = %v, want %v", client, ev.OrderID, ev.Seq, got, want)
	}
}

// countingClient passes PublishBatch requests to the engine and counts them.
type countingClient struct {
	next     topic.BatchClient
	requests atomic.Int32
}

func (c *countingClient) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	c.requests.Add(1)
	return c.next.PublishBatch(ctx, in, optFns...)
}

// A stream batch of 25 status changes, among records that need no event,
// reaches a raw and an enveloped subscriber as 25 messages each, from three
// PublishBatch requests, each with its body and attributes.
func TestNotifyIntegrationStreamBatchInRequestsOfTen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snsc, sqsc := enginetest.SNS(t), enginetest.SQS(t)
	arn, enveloped := enginetest.CreateTopicToQueue(t, snsc, sqsc, enginetest.UniqueName(t, "order-events"))
	raw := enginetest.CreateQueue(t, sqsc, enginetest.UniqueName(t, "client-a"), enginetest.QueueOptions{})
	subscribe(t, snsc, arn, raw.ARN, "client-a", true)

	records, want, _ := stream(t, 25)
	client := &countingClient{next: snsc}
	resp, err := newHandler(t, notifier.NewPublisher(client, arn), nil).Handle(ctx, events.DynamoDBEvent{Records: records})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
	}
	if got := client.requests.Load(); got != 3 {
		t.Errorf("%d PublishBatch requests, want 3", got)
	}
	for _, q := range []struct {
		queue enginetest.Queue
		raw   bool
	}{{raw, true}, {enveloped, false}} {
		got := map[[2]any]notifier.Event{}
		// Beyond the queues' 30 s visibility timeout: a receive whose
		// answer was lost on a loaded machine hides its messages that long
		// (seen on a fresh CI machine: 20 of 25 within 10 s).
		for _, m := range enginetest.ReceiveAll(ctx, t, sqsc, q.queue.URL, len(want), 40*time.Second) {
			ev, err := notifier.DecodeEvent(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("%v\nbody: %s", err, aws.ToString(m.Body))
			}
			got[[2]any{ev.OrderID, ev.Seq}] = ev
			checkAttributes(t, "client-a", q.raw, m, ev)
		}
		for _, w := range want {
			if g, ok := got[[2]any{w.OrderID, w.Seq}]; !ok || !sameEvent(g, w) {
				t.Errorf("raw %v: event %s#%d = %+v (received: %v), want %+v", q.raw, w.OrderID, w.Seq, g, ok, w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("raw %v: %d distinct events, want %d", q.raw, len(got), len(want))
		}
		enginetest.AssertNoMessages(ctx, t, sqsc, q.queue.URL, time.Second)
	}
}
