// Package dlq is the operators' view of the system's dead-letter queues:
// it finds each work queue's DLQ, peeks at what sits there without
// consuming it, decodes the messages with the system's own wire types, and
// moves them back to their source queue. It talks to SQS directly with
// the operator's credentials; the commands are `sasctl dlq ...`
// (internal/opsclient). No function uses it, so it lives here rather than
// in shared/queue.
package dlq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/shared/topology"
)

// Client is the part of *sqs.Client the package uses.
type Client interface {
	ListQueues(ctx context.Context, in *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
}

var _ Client = (*sqs.Client)(nil)

// Queue is one SQS queue.
type Queue struct {
	Name, URL, ARN string
}

// Pair is a work queue and its dead-letter queue, as the work queue's
// RedrivePolicy pairs them.
type Pair struct {
	// ID is the source's name without the scope's prefix: SchedulerQueue,
	// ReserveInventoryQueue, ... in a deployed stage.
	ID     string
	Source Queue
	DLQ    Queue
	// MaxReceiveCount is how often a message is received from Source
	// before SQS moves it to DLQ.
	MaxReceiveCount int
	// Depth is the DLQ's ApproximateNumberOfMessages (visible), InFlight
	// its ApproximateNumberOfMessagesNotVisible, as Discover read them.
	Depth, InFlight int
}

// Scope says which queues are the system's.
type Scope struct {
	// Prefix starts the name of every work queue.
	Prefix string
	// Stack, when set, is the deployed stack's name: only the queues it
	// names (topology.QueueName) count, not those of another stage whose
	// name starts the same.
	Stack string
}

// StageScope is the scope of a deployed stage.
func StageScope(stage string) Scope {
	stack := topology.StackName(stage)
	return Scope{Prefix: stack + "-", Stack: stack}
}

// PrefixScope is the scope of queues named prefix-..., such as the local
// stack's.
func PrefixScope(prefix string) Scope { return Scope{Prefix: prefix} }

// id is the work queue's ID in the scope and whether name is one of its
// work queues at all.
func (s Scope) id(name string) (string, bool) {
	if s.Stack != "" {
		return topology.QueueID(s.Stack, name)
	}
	id, ok := strings.CutPrefix(name, s.Prefix)
	return strings.TrimPrefix(id, "-"), ok && id != ""
}

// redrivePolicy is a queue's RedrivePolicy attribute.
type redrivePolicy struct {
	DeadLetterTargetARN string `json:"deadLetterTargetArn"`
	// MaxReceiveCount is a number in AWS and a string in some emulators.
	MaxReceiveCount json.Number `json:"maxReceiveCount"`
}

// Discover lists the scope's work queues that have a dead-letter queue,
// with each DLQ's depth, in name order. It finds them by the work queues'
// RedrivePolicy, so DLQs named by CloudFormation are found too.
func Discover(ctx context.Context, c Client, scope Scope) ([]Pair, error) {
	if scope.Prefix == "" {
		return nil, errors.New("discover dead-letter queues: no queue name prefix")
	}
	var urls []string
	in := &sqs.ListQueuesInput{QueueNamePrefix: aws.String(scope.Prefix), MaxResults: aws.Int32(1000)}
	for {
		out, err := c.ListQueues(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list queues named %s*: %w", scope.Prefix, err)
		}
		urls = append(urls, out.QueueUrls...)
		if aws.ToString(out.NextToken) == "" || aws.ToString(out.NextToken) == aws.ToString(in.NextToken) {
			break
		}
		in.NextToken = out.NextToken
	}
	var pairs []Pair
	for _, u := range urls {
		name := u[strings.LastIndex(u, "/")+1:]
		id, ok := scope.id(name)
		if !ok {
			continue
		}
		attrs, err := attributes(ctx, c, u, types.QueueAttributeNameQueueArn, types.QueueAttributeNameRedrivePolicy)
		if err != nil {
			return nil, err
		}
		raw := attrs[string(types.QueueAttributeNameRedrivePolicy)]
		if raw == "" {
			continue // a DLQ itself, or a queue without one
		}
		var rp redrivePolicy
		if err := json.Unmarshal([]byte(raw), &rp); err != nil || rp.DeadLetterTargetARN == "" {
			return nil, fmt.Errorf("queue %s: unreadable RedrivePolicy %q", name, raw)
		}
		maxReceives, _ := strconv.Atoi(rp.MaxReceiveCount.String())
		dlq, err := queueByARN(ctx, c, rp.DeadLetterTargetARN)
		if err != nil {
			return nil, fmt.Errorf("dead-letter queue of %s: %w", name, err)
		}
		depth, err := attributes(ctx, c, dlq.URL, types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
		if err != nil {
			return nil, err
		}
		p := Pair{ID: id, Source: Queue{Name: name, URL: u, ARN: attrs[string(types.QueueAttributeNameQueueArn)]}, DLQ: dlq, MaxReceiveCount: maxReceives}
		p.Depth, _ = strconv.Atoi(depth[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		p.InFlight, _ = strconv.Atoi(depth[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b Pair) int { return cmp.Compare(a.Source.Name, b.Source.Name) })
	return pairs, nil
}

// Select picks the pair name designates: its ID, its source's or its DLQ's
// name, or either's URL or ARN.
func Select(pairs []Pair, name string) (Pair, error) {
	for _, p := range pairs {
		for _, n := range []string{p.ID, p.Source.Name, p.Source.URL, p.Source.ARN, p.DLQ.Name, p.DLQ.URL, p.DLQ.ARN} {
			if n == name {
				return p, nil
			}
		}
	}
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = p.ID
	}
	if len(ids) == 0 {
		return Pair{}, fmt.Errorf("%w: no queue %q (no dead-letter queues found at all)", ErrNoQueue, name)
	}
	return Pair{}, fmt.Errorf("%w: no queue %q; one of %s", ErrNoQueue, name, strings.Join(ids, ", "))
}

// ErrNoQueue is a --queue that names none of the scope's queues.
var ErrNoQueue = errors.New("unknown queue")

func attributes(ctx context.Context, c Client, url string, names ...types.QueueAttributeName) (map[string]string, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return nil, fmt.Errorf("attributes of queue %s: %w", url, err)
	}
	return out.Attributes, nil
}

// queueByARN finds a queue's URL from its ARN
// (arn:aws:sqs:region:account:name).
func queueByARN(ctx context.Context, c Client, arn string) (Queue, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return Queue{}, fmt.Errorf("not an SQS queue ARN: %q", arn)
	}
	// The stack's DLQs are in its own account, the caller's.
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5])})
	if err != nil {
		return Queue{}, fmt.Errorf("URL of queue %s: %w", arn, err)
	}
	return Queue{Name: parts[5], URL: aws.ToString(out.QueueUrl), ARN: arn}, nil
}
