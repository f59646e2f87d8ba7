package sqstrace_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/internal/localstack/sqstrace"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/trace"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// TestCarriesTheTraceThroughTheEngine: what queue.Sender sends as the
// AWSTraceHeader system attribute comes back in the message's Attributes,
// as from SQS, and not among its message attributes; other attributes and
// untraced messages are left as they are.
func TestCarriesTheTraceThroughTheEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := enginetest.SQS(t, sqstrace.Carry)
	q := enginetest.CreateQueue(t, client, enginetest.UniqueName(t, "trace"), enginetest.QueueOptions{})
	a := trace.Header{Root: "1-5759e988-000000000000000000000001", Sampled: "1"}
	b := trace.Header{Root: "1-5759e988-000000000000000000000002", Parent: "53995c3f42cd8ad8"}
	send := queue.NewSender(client)
	if err := send.Send(trace.NewContext(ctx, a), q.URL, "one", 0); err != nil {
		t.Fatal(err)
	}
	if err := send.SendBatch(ctx, q.URL, []queue.Outgoing{{Body: "two", Trace: b}, {Body: "three"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"one": a.String(), "two": b.String(), "three": ""}
	for _, m := range enginetest.ReceiveAll(ctx, t, client, q.URL, 3, 10*time.Second) {
		body := aws.ToString(m.Body)
		if got := m.Attributes[trace.SQSAttribute]; got != want[body] {
			t.Errorf("%s: AWSTraceHeader %q, want %q", body, got, want[body])
		}
		if _, ok := m.MessageAttributes[sqstrace.Name]; ok {
			t.Errorf("%s: the carrier shows among the message attributes", body)
		}
		delete(want, body)
	}
	if len(want) != 0 {
		t.Errorf("not received: %v", want)
	}
}
