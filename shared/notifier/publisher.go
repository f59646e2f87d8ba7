package notifier

import (
	"context"
	"fmt"

	"github.com/sasflow/sas/shared/jsonwire"
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

// Sender publishes the events of a stream batch; the Handler uses it and
// *Publisher is one.
type Sender interface {
	// PublishBatch publishes evs in order and returns n, how many of them
	// from the first are published, and err, why evs[n] is not; n is
	// len(evs) exactly when err is nil. Events after evs[n] may have been
	// published too: the Handler publishes them again on the retry, and
	// clients drop the duplicates by seq.
	PublishBatch(ctx context.Context, evs []Event) (n int, err error)
}

var _ Sender = (*Publisher)(nil)

// Publisher sends events to the order-events topic with SNS PublishBatch:
// up to topic.MaxBatchEntries events per billed request instead of one.
type Publisher struct{ topic topic.Batcher }

// NewPublisher returns a Publisher to the topic.
func NewPublisher(c topic.BatchClient, topicARN string) *Publisher {
	return &Publisher{topic: topic.Batcher{Client: c, ARN: topicARN}}
}

// PublishBatch sends each event as JSON with the attributes clientId,
// orderId, state, status (String) and seq (Number), in order, as few
// requests as topic.Batcher makes of them. An invalid event is refused
// before it reaches SNS, which would reject an empty attribute anyway: the
// events before it are published, and it is the one reported.
func (p *Publisher) PublishBatch(ctx context.Context, evs []Event) (int, error) {
	msgs := make([]topic.Message, 0, len(evs))
	var invalid error
	for _, ev := range evs {
		m, err := message(ev)
		if err != nil {
			invalid = err
			break
		}
		msgs = append(msgs, m)
	}
	n, err := p.topic.Publish(ctx, msgs)
	if err != nil {
		return n, fmt.Errorf("publish event %d of order %s to %s: %w", evs[n].Seq, evs[n].OrderID, p.topic.ARN, err)
	}
	return n, invalid
}

// message is the SNS message of a valid event.
func message(ev Event) (topic.Message, error) {
	if err := ev.Validate(); err != nil {
		return topic.Message{}, fmt.Errorf("publish event %d of order %q: %w", ev.Seq, ev.OrderID, err)
	}
	body, err := jsonwire.Marshal(ev)
	if err != nil {
		return topic.Message{}, fmt.Errorf("publish event %d of order %s: encode: %w", ev.Seq, ev.OrderID, err)
	}
	return topic.Message{Body: string(body),
		Strings: map[string]string{
			AttrClientID: ev.ClientID, AttrOrderID: ev.OrderID, AttrState: string(ev.State), AttrStatus: string(ev.Status),
		},
		Numbers: map[string]int{AttrSeq: ev.Seq},
	}, nil
}
