package segments

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/xray"
	xraytypes "github.com/aws/aws-sdk-go-v2/service/xray/types"

	"github.com/sasflow/sas/shared/trace"
)

// putFunc is a function-type fake of the X-Ray client.
type putFunc func(ctx context.Context, in *xray.PutTraceSegmentsInput, opts ...func(*xray.Options)) (*xray.PutTraceSegmentsOutput, error)

func (f putFunc) PutTraceSegments(ctx context.Context, in *xray.PutTraceSegmentsInput, opts ...func(*xray.Options)) (*xray.PutTraceSegmentsOutput, error) {
	return f(ctx, in, opts...)
}

// calls records what reached the fake.
type calls struct {
	mu   sync.Mutex
	docs [][]string
}

func (c *calls) put(err error, unprocessed int) putFunc {
	return func(_ context.Context, in *xray.PutTraceSegmentsInput, _ ...func(*xray.Options)) (*xray.PutTraceSegmentsOutput, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.docs = append(c.docs, in.TraceSegmentDocuments)
		out := &xray.PutTraceSegmentsOutput{}
		for range unprocessed {
			out.UnprocessedTraceSegments = append(out.UnprocessedTraceSegments, xraytypes.UnprocessedTraceSegment{})
		}
		return out, err
	}
}

const root = "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6"

func segs(n int) []trace.Segment {
	out := make([]trace.Segment, n)
	for i := range out {
		out[i] = trace.Segment{Name: "scheduler", ID: "70de5b6f19ff9a0a", TraceID: root, Start: 1, End: 2}
	}
	return out
}

func TestSendSplitsIntoRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want []int
	}{{1, []int{1}}, {PerRequest, []int{PerRequest}}, {PerRequest + 1, []int{PerRequest, 1}}, {0, nil}} {
		var c calls
		if err := New(c.put(nil, 0), slog.New(slog.DiscardHandler)).Send(context.Background(), segs(tc.n)); err != nil {
			t.Fatalf("%d segments: %v", tc.n, err)
		}
		var got []int
		for _, d := range c.docs {
			got = append(got, len(d))
		}
		if len(got) != len(tc.want) || (len(got) > 0 && (got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1])) {
			t.Errorf("%d segments sent as %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestSendReportsFailures(t *testing.T) {
	t.Parallel()
	var c calls
	s := New(c.put(errors.New("throttled"), 0), slog.New(slog.DiscardHandler))
	if err := s.Send(context.Background(), segs(1)); err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Errorf("error %v, want the client's", err)
	}
	s = New(c.put(nil, 1), slog.New(slog.DiscardHandler))
	if err := s.Send(context.Background(), segs(2)); err == nil || !strings.Contains(err.Error(), "1 of 2 unprocessed") {
		t.Errorf("error %v, want the unprocessed count", err)
	}
}

// TestWrapSendsOncePerInvocation: the segments an invocation opened go in
// one request when it ends; an invocation of unrecorded orders sends none;
// a failed send is logged and the handler's answer stands.
func TestWrapSendsOncePerInvocation(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	handler := func(ctx context.Context, sampled []string) (string, error) {
		for _, s := range sampled {
			_, _, sp := trace.Begin(ctx, log, trace.Header{Root: root, Sampled: s}, "scheduler")
			sp.End(false)
		}
		return "answer", nil
	}
	var c calls
	h := Wrap(New(c.put(nil, 0), log), time.Now, handler)
	if out, err := h(context.Background(), []string{"1", "0", "1"}); out != "answer" || err != nil {
		t.Fatalf("answer %q, %v", out, err)
	}
	if _, err := h(context.Background(), []string{"0", "0"}); err != nil {
		t.Fatal(err)
	}
	if len(c.docs) != 1 || len(c.docs[0]) != 2 {
		t.Errorf("requests %v, want one of the two recorded orders' segments", c.docs)
	}

	var failing calls
	h = Wrap(New(failing.put(errors.New("down"), 0), log), time.Now, handler)
	if out, err := h(context.Background(), []string{"1"}); out != "answer" || err != nil {
		t.Errorf("a failed send changed the answer: %q, %v", out, err)
	}

	var none calls
	errFn := WrapErr(New(none.put(nil, 0), log), time.Now, func(ctx context.Context, _ struct{}) error {
		_, _, sp := trace.Begin(ctx, log, trace.Header{Root: root, Sampled: "1"}, "supervisor")
		sp.End(false)
		return errors.New("sweep failed")
	})
	if err := errFn(context.Background(), struct{}{}); err == nil || len(none.docs) != 1 {
		t.Errorf("WrapErr: error %v and %d requests, want the handler's error and one request", err, len(none.docs))
	}
}

func TestWrapWithoutClientRecordsNothing(t *testing.T) {
	t.Parallel()
	called := false
	h := Wrap(New(nil, slog.New(slog.DiscardHandler)), time.Now, func(ctx context.Context, _ int) (int, error) {
		_, sp := trace.Open(trace.NewContext(ctx, trace.Header{Root: root, Sampled: "1"}), "x")
		called = sp == nil
		return 0, nil
	})
	_, _ = h(context.Background(), 0)
	if !called {
		t.Error("a span was opened without a client to send it")
	}
}
