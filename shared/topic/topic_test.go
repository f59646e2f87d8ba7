package topic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/topic"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

type clientFunc func(*sns.PublishInput) error

func (f clientFunc) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	return &sns.PublishOutput{}, f(in)
}

func TestPublishBuildsTheInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		m           topic.Message
		wantSubject *string
		wantAttrs   map[string][2]string // name: type, value
	}{
		{"no subject, no attributes", topic.Message{Body: "b"}, nil, map[string][2]string{}},
		{"subject and both kinds", topic.Message{Subject: "s", Body: "b", Strings: map[string]string{"k": "v"}, Numbers: map[string]int{"n": 42}},
			aws.String("s"), map[string][2]string{"k": {"String", "v"}, "n": {"Number", "42"}}},
		{"invalid UTF-8 is replaced", topic.Message{Body: "b", Strings: map[string]string{"k": "a\xffb"}}, nil, map[string][2]string{"k": {"String", "a?b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got *sns.PublishInput
			tp := topic.Topic{Client: clientFunc(func(in *sns.PublishInput) error { got = in; return nil }), ARN: "arn:aws:sns:eu-west-1:1:t"}
			if err := tp.Publish(context.Background(), tc.m); err != nil {
				t.Fatal(err)
			}
			if aws.ToString(got.TopicArn) != tp.ARN || aws.ToString(got.Message) != tc.m.Body {
				t.Errorf("TopicArn %q, Message %q", aws.ToString(got.TopicArn), aws.ToString(got.Message))
			}
			if (got.Subject == nil) != (tc.wantSubject == nil) || aws.ToString(got.Subject) != aws.ToString(tc.wantSubject) {
				t.Errorf("Subject = %v, want %v", aws.ToString(got.Subject), aws.ToString(tc.wantSubject))
			}
			if len(got.MessageAttributes) != len(tc.wantAttrs) {
				t.Errorf("attributes = %v, want %v", got.MessageAttributes, tc.wantAttrs)
			}
			for name, want := range tc.wantAttrs {
				a := got.MessageAttributes[name]
				if aws.ToString(a.DataType) != want[0] || aws.ToString(a.StringValue) != want[1] {
					t.Errorf("attribute %s = %s %q, want %s %q", name, aws.ToString(a.DataType), aws.ToString(a.StringValue), want[0], want[1])
				}
			}
		})
	}
}

func TestPublishReturnsTheClientsError(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	tp := topic.Topic{Client: clientFunc(func(*sns.PublishInput) error { return boom }), ARN: "arn:aws:sns:eu-west-1:1:t"}
	if err := tp.Publish(context.Background(), topic.Message{Body: "b"}); !errors.Is(err, boom) {
		t.Fatalf("Publish = %v, want the client's error", err)
	}
}

// A subscriber on the real engine gets the body, the subject and both kinds
// of attribute.
func TestPublishIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqsc := enginetest.SQS(t)
	arn, q := enginetest.CreateTopicToQueue(t, enginetest.SNS(t), sqsc, enginetest.UniqueName(t, "topic"))
	tp := topic.Topic{Client: enginetest.SNS(t), ARN: arn}
	m := topic.Message{Subject: "subject", Body: `{"k":"v"}`, Strings: map[string]string{"clientId": "client-a"}, Numbers: map[string]int{"seq": 3}}
	if err := tp.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	msgs := enginetest.ReceiveAll(ctx, t, sqsc, q.URL, 1, 10*time.Second)
	n := enginetest.DecodeNotification(t, aws.ToString(msgs[0].Body))
	if n.TopicARN != arn || n.Subject != m.Subject || n.Message != m.Body {
		t.Errorf("notification = %+v, want %+v", n, m)
	}
	if got := n.MessageAttributes["clientId"]; got.Type != "String" || got.Value != "client-a" {
		t.Errorf("clientId = %+v", got)
	}
	if got := n.MessageAttributes["seq"]; got.Type != "Number" || got.Value != "3" {
		t.Errorf("seq = %+v", got)
	}
	enginetest.AssertNoMessages(ctx, t, sqsc, q.URL, time.Second)
}
