package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
)

// Message attribute names. Clients filter their subscription on
// AttrClientID; the others let them filter further or route without
// reading the body.
const (
	AttrClientID = "clientId"
	AttrOrderID  = "orderId"
	AttrState    = "state"
	AttrStatus   = "status"
	AttrSeq      = "seq"
)

// Client is the part of *sns.Client the Publisher uses.
type Client interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

var _ Client = (*sns.Client)(nil)

// Sender publishes one event; the Handler uses it and *Publisher is one.
type Sender interface {
	Publish(ctx context.Context, ev Event) error
}

var _ Sender = (*Publisher)(nil)

// Publisher sends events to the order-events topic.
type Publisher struct {
	client   Client
	topicARN string
}

// NewPublisher returns a Publisher to the topic.
func NewPublisher(c Client, topicARN string) *Publisher {
	return &Publisher{client: c, topicARN: topicARN}
}

// Publish sends the event as JSON with the attributes clientId, orderId,
// state, status (String) and seq (Number). An invalid event is refused
// before it reaches SNS, which would reject an empty attribute anyway.
func (p *Publisher) Publish(ctx context.Context, ev Event) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("publish event %d of order %q: %w", ev.Seq, ev.OrderID, err)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("publish event %d of order %s: encode: %w", ev.Seq, ev.OrderID, err)
	}
	_, err = p.client.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(p.topicARN),
		Message:  aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrClientID: stringAttr(ev.ClientID),
			AttrOrderID:  stringAttr(ev.OrderID),
			AttrState:    stringAttr(string(ev.State)),
			AttrStatus:   stringAttr(string(ev.Status)),
			AttrSeq:      {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(ev.Seq))},
		},
	})
	if err != nil {
		return fmt.Errorf("publish event %d of order %s to %s: %w", ev.Seq, ev.OrderID, p.topicARN, err)
	}
	return nil
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}
