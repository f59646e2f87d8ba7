package notifier_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/workflow"
)

// clientFunc is an SNS client made of a function.
type clientFunc func(ctx context.Context, in *sns.PublishInput) (*sns.PublishOutput, error)

func (f clientFunc) Publish(ctx context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	return f(ctx, in)
}

const topic = "arn:aws:sns:us-east-1:000000000000:order-events"

func TestPublishSendsTheEventWithItsAttributes(t *testing.T) {
	t.Parallel()
	ev := event(workflow.StatusCompensating, workflow.Compensating, 4)
	ev.LastError = "charge failed: <declined> & \"blocked\"\n"
	var got []*sns.PublishInput
	p := notifier.NewPublisher(clientFunc(func(_ context.Context, in *sns.PublishInput) (*sns.PublishOutput, error) {
		got = append(got, in)
		return &sns.PublishOutput{MessageId: aws.String("m-1")}, nil
	}), topic)
	if err := p.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d Publish calls, want 1", len(got))
	}
	in := got[0]
	if aws.ToString(in.TopicArn) != topic || in.Subject != nil {
		t.Errorf("TopicArn %q, Subject %v; want %q and none", aws.ToString(in.TopicArn), in.Subject, topic)
	}
	body, err := notifier.DecodeEvent(aws.ToString(in.Message))
	if err != nil || body != ev {
		t.Errorf("body decodes to %+v, %v; want %+v", body, err, ev)
	}
	attrs := map[string][2]string{}
	for k, v := range in.MessageAttributes {
		attrs[k] = [2]string{aws.ToString(v.DataType), aws.ToString(v.StringValue)}
	}
	want := map[string][2]string{
		"clientId": {"String", "client-a"},
		"orderId":  {"String", "o-1"},
		"state":    {"String", "Compensating"},
		"status":   {"String", "compensating"},
		"seq":      {"Number", "4"},
	}
	if !reflect.DeepEqual(attrs, want) {
		t.Errorf("attributes = %v, want %v", attrs, want)
	}
}

func TestPublishEventErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	tests := []struct {
		name      string
		change    func(*notifier.Event)
		clientErr error
		wantCalls int
		wantErr   string
	}{
		// SNS rejects an empty attribute, so such an event never reaches it.
		{"no client", func(e *notifier.Event) { e.ClientID = "" }, nil, 0, "clientId: empty"},
		{"no order", func(e *notifier.Event) { e.OrderID = "" }, nil, 0, "orderId: empty"},
		{"unknown state", func(e *notifier.Event) { e.State = "" }, nil, 0, "unknown state"},
		{"SNS fails", func(*notifier.Event) {}, boom, 1, "publish event 2 of order o-1 to " + topic + ": throttled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			p := notifier.NewPublisher(clientFunc(func(context.Context, *sns.PublishInput) (*sns.PublishOutput, error) {
				calls++
				return &sns.PublishOutput{}, tc.clientErr
			}), topic)
			ev := event(workflow.StatusProcessing, workflow.Processing, 2)
			tc.change(&ev)
			err := p.Publish(context.Background(), ev)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Publish = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.clientErr != nil && !errors.Is(err, tc.clientErr) {
				t.Errorf("Publish error %v does not wrap %v", err, tc.clientErr)
			}
			if calls != tc.wantCalls {
				t.Errorf("%d SNS calls, want %d", calls, tc.wantCalls)
			}
		})
	}
}
