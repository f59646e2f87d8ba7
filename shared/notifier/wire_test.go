package notifier_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/workflow"
)

// TestEventsCarryErrorTextAsItIs: a status event writes its text as it is,
// not HTML-escaped (a reason's text names a step and a fault code).
func TestEventsCarryErrorTextAsItIs(t *testing.T) {
	t.Parallel()
	ev := event(workflow.StatusCompensating, workflow.Compensating, 4)
	ev.Reason, ev.ReasonText = workflow.ReasonRejected, "step <b>charge</b> & gone é😀 was refused"
	var body string
	p := notifier.NewPublisher(batchClient(func(_ context.Context, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		body = aws.ToString(in.PublishBatchRequestEntries[0].Message)
		return allPublished(in), nil
	}), topicARN)
	if n, err := p.PublishBatch(context.Background(), []notifier.Event{ev}); n != 1 || err != nil {
		t.Fatalf("PublishBatch = %d, %v", n, err)
	}
	if want := `"reasonText":"` + ev.ReasonText + `"`; !strings.Contains(body, want) {
		t.Errorf("published %s, want %s in it as it is", body, want)
	}
}
