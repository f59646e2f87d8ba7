package simulation

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sasflow/sas/shared/topic"
)

// The SNS model: topics whose subscriptions get every message their
// filter policy matches (attribute-based, each named attribute equal to
// one of the policy's strings, as the SNS Developer Guide's exact string
// matching); a message and a PublishBatch are at most 256 KiB
// (MaxPublishBytes), a batch at most 10 messages, each entry succeeding or
// failing alone: PublishBatch "reports the result of publishing each
// message individually", so a request that succeeds may list some entries
// in Failed (PartialBatch; the SNS API Reference's PublishBatch,
// https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html).

// MaxPublishBytes is SNS's limit on a message and on a whole PublishBatch
// request: 256 KiB, a topic's default (the SNS Developer Guide's "Amazon
// SNS message batching" and "Publishing large messages with Amazon SNS"),
// the limit the code under test counts on (topic.MaxBatchBytes).
const MaxPublishBytes = topic.MaxBatchBytes

// Delivery is one message as a subscription got it.
type Delivery struct {
	Body  string
	Attrs map[string]string
}

// Subscription is a topic's subscriber with its filter policy (nil: every
// message).
type Subscription struct {
	Name   string
	Filter map[string][]string
	Got    []Delivery
}

// Topic is one SNS topic.
type Topic struct {
	arn  string
	subs []*Subscription
}

// SNS is the model's endpoint.
type SNS struct {
	w      *World
	f      *faults
	topics map[string]*Topic
}

func newSNS(w *World, f *faults) *SNS { return &SNS{w: w, f: f, topics: map[string]*Topic{}} }

func (s *SNS) topic(name string) *Topic {
	t := &Topic{arn: "arn:aws:sns:us-east-1:123456789012:" + name}
	s.topics[t.arn] = t
	return t
}

func (t *Topic) subscribe(name string, filter map[string][]string) *Subscription {
	sub := &Subscription{Name: name, Filter: filter}
	t.subs = append(t.subs, sub)
	return sub
}

func matches(filter map[string][]string, attrs map[string]string) bool {
	for name, allowed := range filter {
		v, ok := attrs[name]
		if !ok || !slices.Contains(allowed, v) {
			return false
		}
	}
	return true
}

func (t *Topic) deliver(body string, attrs map[string]snstypes.MessageAttributeValue) {
	flat := make(map[string]string, len(attrs))
	for k, v := range attrs {
		flat[k] = aws.ToString(v.StringValue)
	}
	for _, sub := range t.subs {
		if matches(sub.Filter, flat) {
			sub.Got = append(sub.Got, Delivery{Body: body, Attrs: flat})
		}
	}
}

func (s *SNS) lookup(arn string) (*Topic, error) {
	t, ok := s.topics[arn]
	if !ok {
		return nil, fmt.Errorf("NotFound: topic %s does not exist", arn)
	}
	return t, nil
}

// Publish is sns.Client's.
func (s *SNS) Publish(ctx context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	t, err := s.lookup(aws.ToString(in.TopicArn))
	if err != nil {
		return nil, err
	}
	body := aws.ToString(in.Message)
	err = s.f.call(ctx, "sns.Publish", aws.ToString(in.MessageAttributes["alertId"].StringValue), true, func() error {
		if n := len(body) + attrBytes(in.MessageAttributes); n > MaxPublishBytes {
			return fmt.Errorf("InvalidParameter: message of %d bytes is over %d", n, MaxPublishBytes)
		}
		t.deliver(body, in.MessageAttributes)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sns.PublishOutput{}, nil
}

// PublishBatch is sns.Client's.
func (s *SNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	t, err := s.lookup(aws.ToString(in.TopicArn))
	if err != nil {
		return nil, err
	}
	if len(in.PublishBatchRequestEntries) == 0 || len(in.PublishBatchRequestEntries) > 10 {
		return nil, fmt.Errorf("TooManyEntriesInBatchRequest: %d entries", len(in.PublishBatchRequestEntries))
	}
	total := 0
	for _, e := range in.PublishBatchRequestEntries {
		total += len(aws.ToString(e.Message)) + attrBytes(e.MessageAttributes)
	}
	if total > MaxPublishBytes {
		return nil, fmt.Errorf("BatchRequestTooLong: %d bytes", total)
	}
	out := &sns.PublishBatchOutput{}
	err = s.f.call(ctx, "sns.PublishBatch", "", true, func() error {
		for _, e := range in.PublishBatchRequestEntries {
			if s.f.strike(PartialBatch) {
				s.w.log.add(s.w.now, "sns", "publish entry failed", aws.ToString(e.MessageAttributes["orderId"].StringValue))
				out.Failed = append(out.Failed, snstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"),
					Message: aws.String("the message was not published"), SenderFault: false})
				continue
			}
			t.deliver(aws.ToString(e.Message), e.MessageAttributes)
			out.Successful = append(out.Successful, snstypes.PublishBatchResultEntry{Id: e.Id})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// attrBytes is what message attributes add to a message's size: name, type
// and value of each.
func attrBytes(attrs map[string]snstypes.MessageAttributeValue) int {
	n := 0
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

var (
	_ topic.Client      = (*SNS)(nil)
	_ topic.BatchClient = (*SNS)(nil)
)
