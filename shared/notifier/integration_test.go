package notifier_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/notifier"
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
	for _, ev := range published {
		if err := p.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range clients {
		var want []notifier.Event
		for _, ev := range published {
			if ev.ClientID == c.id {
				want = append(want, ev)
			}
		}
		msgs := enginetest.ReceiveAll(ctx, t, sqsc, c.q.URL, len(want), 10*time.Second)
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
