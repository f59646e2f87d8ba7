package alert_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/alert"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

func TestPublishIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqsc := enginetest.SQS(t)
	topic, q := enginetest.CreateTopicToQueue(t, enginetest.SNS(t), sqsc, enginetest.UniqueName(t, "alerts"))
	a := alert.Alert{
		Kind: alert.KindPermanentFailure, OrderID: "order-42", Step: "ship", StepIndex: 3,
		FailureCount: 1, MaxFailures: 5, Attempt: 7, LastError: "address rejected:\nno such street",
		At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if err := alert.NewPublisher(enginetest.SNS(t), topic).Publish(ctx, a); err != nil {
		t.Fatal(err)
	}
	msgs := enginetest.ReceiveAll(ctx, t, sqsc, q.URL, 1, 10*time.Second)
	n := enginetest.DecodeNotification(t, aws.ToString(msgs[0].Body))
	if n.TopicARN != topic || n.Subject != a.Subject() || n.Message != a.Body() {
		t.Errorf("notification = %+v\nwant subject %q and body\n%s", n, a.Subject(), a.Body())
	}
	want := map[string]string{"kind": "permanent-failure", "orderId": "order-42", "alertId": "order-42/7"}
	for k, v := range want {
		if got := n.MessageAttributes[k]; got.Type != "String" || got.Value != v {
			t.Errorf("attribute %s = %+v, want String %q", k, got, v)
		}
	}
	enginetest.AssertNoMessages(ctx, t, sqsc, q.URL, time.Second)
}
