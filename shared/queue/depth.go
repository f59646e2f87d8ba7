package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DepthClient is the part of *sqs.Client a Depths uses.
type DepthClient interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ DepthClient = (*sqs.Client)(nil)

// Depths reads how many messages wait in a queue.
type Depths struct{ client DepthClient }

// NewDepths returns a Depths over c.
func NewDepths(c DepthClient) *Depths { return &Depths{client: c} }

// Depth is the queue's ApproximateNumberOfMessages: the messages visible,
// waiting for a consumer. Messages being worked on and delayed ones are
// not counted.
func (d *Depths) Depth(ctx context.Context, queueURL string) (int, error) {
	const attr = types.QueueAttributeNameApproximateNumberOfMessages
	out, err := d.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{attr},
	})
	if err != nil {
		return 0, fmt.Errorf("depth of %s: %w", queueURL, err)
	}
	n, err := strconv.Atoi(out.Attributes[string(attr)])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("depth of %s: %s is %q", queueURL, attr, out.Attributes[string(attr)])
	}
	return n, nil
}
