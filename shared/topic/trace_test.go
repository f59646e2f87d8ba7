package topic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/shared/topic"
	"github.com/sasflow/sas/shared/trace"
)

// TestPublishSendsTheTraceHeader: each request carries its order's trace
// as X-Amzn-Trace-Id, the message's own before the context's; the answer
// does not matter here.
func TestPublishSendsTheTraceHeader(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(trace.HTTPHeader))
		mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	c := sns.New(sns.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	inCtx := trace.Header{Root: "1-5759e988-000000000000000000000001", Sampled: "1"}
	own := trace.Header{Root: "1-5759e988-000000000000000000000002", Parent: "53995c3f42cd8ad8"}
	ctx := trace.NewContext(context.Background(), inCtx)
	tp := topic.Topic{Client: c, ARN: "arn:aws:sns:us-east-1:123456789012:t"}
	_ = tp.Publish(ctx, topic.Message{Body: "a"})
	_ = tp.Publish(ctx, topic.Message{Body: "b", Trace: own})
	_ = tp.Publish(context.Background(), topic.Message{Body: "c"})
	_, _ = topic.Batcher{Client: c, ARN: tp.ARN}.Publish(context.Background(), []topic.Message{{Body: "d", Trace: own}, {Body: "e"}})
	want := []string{inCtx.String(), own.String(), "", own.String()}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("headers = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: X-Amzn-Trace-Id %q, want %q", i, got[i], want[i])
		}
	}
}
