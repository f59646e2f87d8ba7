// Package topic is the SNS adapter: one topic, published to with a body and
// message attributes. The alert publisher (the operators' topic) publishes
// one message at a time through Topic; the Notifier (the order-events topic)
// publishes a stream batch's events through Batcher.
package topic

import (
	"context"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sasflow/sas/shared/trace"
)

// Client is the part of *sns.Client a Topic uses.
type Client interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

var _ Client = (*sns.Client)(nil)

// Topic is one SNS topic.
type Topic struct {
	Client Client
	ARN    string
}

// Message is what one publish sends. SNS refuses an empty attribute value,
// so the caller leaves out what it does not know.
type Message struct {
	// Subject is the e-mail subject of an e-mail subscription; optional.
	Subject string
	Body    string
	// Strings and Numbers are the message attributes subscribers filter on.
	Strings map[string]string
	Numbers map[string]int
	// Trace is the trace of the order the message is about; zero means the
	// one the context carries. SNS records the publish in it
	// (X-Amzn-Trace-Id) when the topic's tracing is active and the order
	// is recorded.
	Trace trace.Header
}

// traced is the per-request option that publishes in trace h, or else in
// the one ctx carries.
func traced(ctx context.Context, h trace.Header) func(*sns.Options) {
	if h.IsZero() {
		h, _ = trace.FromContext(ctx)
	}
	return func(o *sns.Options) { o.APIOptions = trace.APIOptions(o.APIOptions, h) }
}

// Publish sends m. String attributes are made valid UTF-8, as SNS requires.
func (t Topic) Publish(ctx context.Context, m Message) error {
	in := &sns.PublishInput{TopicArn: aws.String(t.ARN), Message: aws.String(m.Body), MessageAttributes: attributes(m)}
	if m.Subject != "" {
		in.Subject = aws.String(m.Subject)
	}
	_, err := t.Client.Publish(ctx, in, traced(ctx, m.Trace))
	return err
}

// attributes are m's message attributes as SNS takes them, string values
// made valid UTF-8.
func attributes(m Message) map[string]types.MessageAttributeValue {
	attrs := make(map[string]types.MessageAttributeValue, len(m.Strings)+len(m.Numbers))
	for name, v := range m.Strings {
		attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(strings.ToValidUTF8(v, "?"))}
	}
	for name, n := range m.Numbers {
		attrs[name] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(n))}
	}
	return attrs
}
