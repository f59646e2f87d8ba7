// Package sqstrace makes a local SQS engine carry the AWSTraceHeader
// message system attribute as SQS does. fauxqs (1.9) ignores
// MessageSystemAttributes on SendMessage and SendMessageBatch and never
// returns AWSTraceHeader, so without this the local stack would lose every
// order's trace at its first queue. Carry, an option of the local stack's
// SQS clients, moves the attribute into a message attribute of the same
// name on the way in, and back into the message's Attributes on the way
// out, where Lambda's SQS event shows it. The handlers and queue.Sender
// stay as they run in AWS.
package sqstrace

import (
	"context"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/sasflow/sas/shared/trace"
)

// Name is the message attribute the trace travels in through the engine.
const Name = trace.SQSAttribute

// Carry is an sqs.Options function: sqs.New(c.Options(), sqstrace.Carry).
func Carry(o *sqs.Options) {
	o.APIOptions = append(slices.Clip(o.APIOptions), func(s *middleware.Stack) error {
		return s.Initialize.Add(carrier{}, middleware.Before)
	})
}

type carrier struct{}

func (carrier) ID() string { return "sasflow.LocalTraceCarrier" }

// HandleInitialize runs before the SDK's own middleware, so the message
// attribute checksums it validates are of what the engine sees.
func (carrier) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	wanted := false
	switch p := in.Parameters.(type) {
	case *sqs.SendMessageInput:
		c := *p
		c.MessageSystemAttributes, c.MessageAttributes = moveIn(c.MessageSystemAttributes, c.MessageAttributes)
		in.Parameters = &c
	case *sqs.SendMessageBatchInput:
		c := *p
		c.Entries = slices.Clone(c.Entries)
		for i := range c.Entries {
			e := &c.Entries[i]
			e.MessageSystemAttributes, e.MessageAttributes = moveIn(e.MessageSystemAttributes, e.MessageAttributes)
		}
		in.Parameters = &c
	case *sqs.ReceiveMessageInput:
		c := *p
		wanted = slices.Contains(c.MessageSystemAttributeNames, types.MessageSystemAttributeNameAll) ||
			slices.Contains(c.MessageSystemAttributeNames, types.MessageSystemAttributeNameAWSTraceHeader)
		c.MessageAttributeNames = append(slices.Clip(c.MessageAttributeNames), Name)
		in.Parameters = &c
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil {
		for i := range r.Messages {
			moveOut(&r.Messages[i], wanted)
		}
	}
	return out, md, err
}

// moveIn puts the AWSTraceHeader system attribute among the message
// attributes.
func moveIn(sys map[string]types.MessageSystemAttributeValue, attrs map[string]types.MessageAttributeValue) (map[string]types.MessageSystemAttributeValue, map[string]types.MessageAttributeValue) {
	v, ok := sys[string(types.MessageSystemAttributeNameForSendsAWSTraceHeader)]
	if !ok {
		return sys, attrs
	}
	sys = maps.Clone(sys)
	delete(sys, string(types.MessageSystemAttributeNameForSendsAWSTraceHeader))
	if len(sys) == 0 {
		sys = nil
	}
	attrs = maps.Clone(attrs)
	if attrs == nil {
		attrs = map[string]types.MessageAttributeValue{}
	}
	attrs[Name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: v.StringValue}
	return sys, attrs
}

// moveOut takes the carried trace out of m's message attributes, where SQS
// would not show it, and into its Attributes when the receive asked for it.
func moveOut(m *types.Message, wanted bool) {
	v, ok := m.MessageAttributes[Name]
	if !ok {
		return
	}
	delete(m.MessageAttributes, Name)
	if len(m.MessageAttributes) == 0 {
		m.MessageAttributes = nil
		m.MD5OfMessageAttributes = nil
	}
	if wanted {
		if m.Attributes == nil {
			m.Attributes = map[string]string{}
		}
		m.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)] = aws.ToString(v.StringValue)
	}
}
