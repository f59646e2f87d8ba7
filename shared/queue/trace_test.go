package queue

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/shared/trace"
)

func traceOf(attrs map[string]types.MessageSystemAttributeValue) string {
	v, ok := attrs[trace.SQSAttribute]
	if !ok {
		return ""
	}
	return aws.ToString(v.StringValue)
}

func TestSendCarriesTheTrace(t *testing.T) {
	t.Parallel()
	order := trace.Header{Root: "1-5759e988-bd862e3fe1be46a994272793", Sampled: "1"}
	var got []*sqs.SendMessageInput
	s := NewSender(fakeClient{t: t, send: func(in *sqs.SendMessageInput) (*sqs.SendMessageOutput, error) {
		got = append(got, in)
		return &sqs.SendMessageOutput{}, nil
	}})
	if err := s.Send(trace.NewContext(context.Background(), order), testURL, "traced", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), testURL, "untraced", 0); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || traceOf(got[0].MessageSystemAttributes) != order.String() || got[1].MessageSystemAttributes != nil {
		t.Errorf("sent %+v, want the first with AWSTraceHeader %s and the second without", got, order)
	}
}

func TestSendBatchCarriesEachTrace(t *testing.T) {
	t.Parallel()
	inCtx := trace.Header{Root: "1-5759e988-000000000000000000000001"}
	own := trace.Header{Root: "1-5759e988-000000000000000000000002", Sampled: "0"}
	var got *sqs.SendMessageBatchInput
	s := NewSender(fakeClient{t: t, sendBatch: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		got = in
		var out sqs.SendMessageBatchOutput
		for _, e := range in.Entries {
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
		}
		return &out, nil
	}})
	err := s.SendBatch(trace.NewContext(context.Background(), inCtx), testURL, []Outgoing{{Body: "a"}, {Body: "b", Trace: own}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 2 || traceOf(got.Entries[0].MessageSystemAttributes) != inCtx.String() ||
		traceOf(got.Entries[1].MessageSystemAttributes) != own.String() {
		t.Errorf("entries = %+v, want the context's trace then the message's own", got.Entries)
	}
}
