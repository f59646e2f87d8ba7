package sqsbridge_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// recorder is a handler that keeps every record it is given and fails the
// message IDs fail says.
type recorder struct {
	mu      sync.Mutex
	records []events.SQSMessage
	fail    func(events.SQSMessage) bool
}

func (r *recorder) handle(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		r.records = append(r.records, m)
		if r.fail != nil && r.fail(m) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

func (r *recorder) seen() []events.SQSMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records)
}

func newBridge(c *sqs.Client, q enginetest.Queue, h sqsbridge.Handler) *sqsbridge.Bridge {
	return &sqsbridge.Bridge{Client: c, QueueURL: q.URL, QueueARN: q.ARN, BatchSize: 10, WaitTime: time.Second, Handler: h}
}

func send(t *testing.T, c *sqs.Client, url string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl:    aws.String(url),
			MessageBody: aws.String(b),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				"kind": {DataType: aws.String("String"), StringValue: aws.String("test")},
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// pollUntil calls PollOnce until n messages in all have been received.
func pollUntil(t *testing.T, b *sqsbridge.Bridge, n int) {
	t.Helper()
	got := 0
	await.Until(t, 20*time.Second, fmt.Sprintf("%d messages polled", n), func() (bool, error) {
		k, err := b.PollOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got += k
		return got >= n, fmt.Errorf("received %d of %d messages", got, n)
	})
}

// counts returns the visible and in-flight message counts, which change
// only by our own calls once the visibility timeout is long.
func counts(t *testing.T, c *sqs.Client, url string) (visible, inflight string) {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

func TestBridgeSuccessDeletes(t *testing.T) {
	t.Parallel()
	c := enginetest.SQS(t)
	q := enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), enginetest.QueueOptions{VisibilityTimeout: time.Minute})
	send(t, c, q.URL, "one", "two", "three")
	rec := &recorder{}
	pollUntil(t, newBridge(c, q, rec.handle), 3)

	if v, f := counts(t, c, q.URL); v != "0" || f != "0" {
		t.Errorf("after success: %s visible, %s in flight; want all deleted", v, f)
	}
	var bodies []string
	for _, m := range rec.seen() {
		bodies = append(bodies, m.Body)
		sum := md5.Sum([]byte(m.Body))
		if m.EventSource != "aws:sqs" || m.EventSourceARN != q.ARN || m.AWSRegion != enginetest.Region ||
			m.Md5OfBody != hex.EncodeToString(sum[:]) || m.MessageId == "" || m.ReceiptHandle == "" {
			t.Errorf("record = %+v", m)
		}
		if m.Attributes["ApproximateReceiveCount"] != "1" {
			t.Errorf("ApproximateReceiveCount = %q", m.Attributes["ApproximateReceiveCount"])
		}
		if _, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64); err != nil {
			t.Errorf("SentTimestamp = %q", m.Attributes["SentTimestamp"])
		}
		if a := m.MessageAttributes["kind"]; a.DataType != "String" || aws.ToString(a.StringValue) != "test" {
			t.Errorf("kind attribute = %+v", a)
		}
	}
	slices.Sort(bodies)
	if !slices.Equal(bodies, []string{"one", "three", "two"}) {
		t.Errorf("bodies = %q", bodies)
	}
}

func TestBridgeItemFailureComesBack(t *testing.T) {
	t.Parallel()
	c := enginetest.SQS(t)
	q := enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), enginetest.QueueOptions{VisibilityTimeout: time.Second})
	send(t, c, q.URL, "ok", "flaky")
	failed := false
	rec := &recorder{fail: func(m events.SQSMessage) bool {
		if m.Body == "flaky" && !failed {
			failed = true
			return true
		}
		return false
	}}
	b := newBridge(c, q, rec.handle)
	pollUntil(t, b, 2) // "flaky" fails once
	pollUntil(t, b, 1) // and returns once its visibility timeout ends

	seen := rec.seen()
	var flaky []string
	for _, m := range seen {
		if m.Body == "flaky" {
			flaky = append(flaky, m.Attributes["ApproximateReceiveCount"])
		}
	}
	if len(seen) != 3 || !slices.Equal(flaky, []string{"1", "2"}) {
		t.Errorf("handled %d records, flaky receive counts %v; want 3 and [1 2]", len(seen), flaky)
	}
	enginetest.AssertNoMessages(context.Background(), t, c, q.URL, 2*time.Second)
}

func TestBridgeHandlerErrorKeepsBatch(t *testing.T) {
	t.Parallel()
	c := enginetest.SQS(t)
	q := enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), enginetest.QueueOptions{VisibilityTimeout: time.Minute})
	send(t, c, q.URL, "a", "b")
	b := newBridge(c, q, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, errors.New("database down")
	})
	got := 0
	await.Until(t, 20*time.Second, "both messages polled", func() (bool, error) {
		n, err := b.PollOnce(context.Background())
		if n == 0 && err != nil {
			t.Fatal(err)
		}
		if n > 0 && !errors.Is(err, sqsbridge.ErrBatchFailed) {
			t.Fatalf("PollOnce = %d, %v; want ErrBatchFailed", n, err)
		}
		got += n
		return got >= 2, fmt.Errorf("received %d", got)
	})
	if v, f := counts(t, c, q.URL); got != 2 || v != "0" || f != "2" {
		t.Errorf("received %d; %s visible, %s in flight; want both kept in flight", got, v, f)
	}
}

func TestBridgeAlwaysFailingEndsInDLQ(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := enginetest.SQS(t)
	const maxReceives = 3
	q := enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), enginetest.QueueOptions{VisibilityTimeout: time.Second, MaxReceiveCount: maxReceives})
	send(t, c, q.URL, "poison")
	rec := &recorder{fail: func(events.SQSMessage) bool { return true }}
	b := newBridge(c, q, rec.handle)
	var runErrs []error
	var mu sync.Mutex
	b.OnError = func(err error) { mu.Lock(); runErrs = append(runErrs, err); mu.Unlock() }
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	dead := enginetest.ReceiveAll(ctx, t, c, q.DLQURL, 1, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := aws.ToString(dead[0].Body); got != "poison" {
		t.Errorf("DLQ body = %q", got)
	}
	var receives []string
	for _, m := range rec.seen() {
		receives = append(receives, m.Attributes["ApproximateReceiveCount"])
	}
	if !slices.Equal(receives, []string{"1", "2", "3"}) {
		t.Errorf("handler saw receive counts %v, want [1 2 3]", receives)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runErrs) != 0 {
		t.Errorf("Run reported %v; item failures are not errors", runErrs)
	}
}

// TestAReceiveTheMappingAbandonedLosesNoBatch: a poller stopped while the
// engine holds its long poll does not abandon the receive. The engine
// takes the messages that arrive during the wait whether or not the
// client is still listening, and would keep them invisible for the whole
// visibility timeout; the stopping poller waits for the answer instead
// and gives the batch back at once, unhandled, so the next poller gets it
// within seconds.
func TestAReceiveTheMappingAbandonedLosesNoBatch(t *testing.T) {
	t.Parallel()
	c := enginetest.SQS(t)
	q := enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), enginetest.QueueOptions{VisibilityTimeout: 5 * time.Minute})
	stopped := &recorder{}
	b := newBridge(c, q, stopped.handle)
	b.WaitTime = sqsbridge.MaxWaitTime

	// Stop the poller as soon as its receive is on the wire: the engine
	// holds it, waiting for a message.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var once sync.Once
	onTheWire := make(chan struct{})
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(onTheWire) }) },
	})
	polled := make(chan error, 1)
	go func() {
		_, err := b.PollOnce(ctx)
		polled <- err
	}()
	<-onTheWire
	stop()
	send(t, c, q.URL, "sent-while-the-poller-stopped")
	if err := <-polled; err != nil {
		t.Errorf("the stopped poll: %v", err)
	}
	if n := len(stopped.seen()); n != 0 {
		t.Errorf("the stopped poller handed %d message(s) to its handler", n)
	}

	next := &recorder{}
	pollUntil(t, newBridge(c, q, next.handle), 1)
	// Its second receive: the stopped poller's took it and gave it back.
	if got := next.seen(); len(got) != 1 || got[0].Body != "sent-while-the-poller-stopped" || got[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Errorf("the next poller handled %+v, want the message on its second receive", got)
	}
}

// loseFirstReceive is a transport on which the first ReceiveMessage
// reaches the engine and is answered, and the answer is lost on the way
// back, as a connection reset does.
type loseFirstReceive struct {
	next http.RoundTripper
	lost atomic.Bool
}

func (l *loseFirstReceive) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || req.Header.Get("X-Amz-Target") != "AmazonSQS.ReceiveMessage" || l.lost.Swap(true) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestAReceiveWhoseAnswerWasLostIsReported: a receive whose answer was
// lost after the engine took its batch is not retried, and the poller says
// so. The batch stays invisible until its visibility timeout whatever the
// poller does; a retry that came back empty (or with other messages) would
// only hide that it is missing.
func TestAReceiveWhoseAnswerWasLostIsReported(t *testing.T) {
	t.Parallel()
	lossy := &loseFirstReceive{next: http.DefaultTransport}
	c := enginetest.SQS(t, func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: lossy} })
	q := enginetest.CreateQueue(t, c, enginetest.UniqueName(t, "q"), enginetest.QueueOptions{VisibilityTimeout: 5 * time.Minute})
	send(t, c, q.URL, "answer-lost")
	rec := &recorder{}
	n, err := newBridge(c, q, rec.handle).PollOnce(context.Background())
	if !lossy.lost.Load() {
		t.Fatal("no receive was made")
	}
	if n != 0 || err == nil || !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("PollOnce = %d, %v; want 0 and the reset connection", n, err)
	}
	if v, f := counts(t, c, q.URL); v != "0" || f != "1" {
		t.Errorf("%s visible, %s in flight; want the lost batch in flight", v, f)
	}
}
