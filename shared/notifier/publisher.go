package notifier

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sasflow/sas/shared/topic"
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

// Sender publishes one event; the Handler uses it and *Publisher is one.
type Sender interface {
	Publish(ctx context.Context, ev Event) error
}

var _ Sender = (*Publisher)(nil)

// Publisher sends events to the order-events topic.
type Publisher struct{ topic topic.Topic }

// NewPublisher returns a Publisher to the topic.
func NewPublisher(c topic.Client, topicARN string) *Publisher {
	return &Publisher{topic: topic.Topic{Client: c, ARN: topicARN}}
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
	err = p.topic.Publish(ctx, topic.Message{Body: string(body),
		Strings: map[string]string{
			AttrClientID: ev.ClientID, AttrOrderID: ev.OrderID, AttrState: string(ev.State), AttrStatus: string(ev.Status),
		},
		Numbers: map[string]int{AttrSeq: ev.Seq},
	})
	if err != nil {
		return fmt.Errorf("publish event %d of order %s to %s: %w", ev.Seq, ev.OrderID, p.topic.ARN, err)
	}
	return nil
}
