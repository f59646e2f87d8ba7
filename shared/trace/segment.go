package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultSampleRate is the share of orders recorded when the deployment
// names none: at $5 per million traces (https://aws.amazon.com/xray/pricing/)
// it costs 5 cents per million orders, and at a million orders a month
// still records one every few minutes.
const DefaultSampleRate = 0.01

// Sample makes the order's one sampling decision: whether its path is
// recorded. draw is uniform in [0, 1); rate is the share of orders
// recorded, from 0 (none) to 1 (all). The Submission calls it once per new
// order; every later actor reads the decision from the header it carries
// (Sampled=1) and never decides again, so an order is recorded whole or
// not at all, whatever each actor's own traffic.
func Sample(h Header, rate, draw float64) Header {
	if h.IsZero() {
		return h
	}
	h.Sampled = "0"
	if draw < rate {
		h.Sampled = "1"
	}
	return h
}

// ValidRate reports whether rate is a sampling rate Sample understands.
func ValidRate(rate float64) bool { return rate >= 0 && rate <= 1 && !math.IsNaN(rate) }

// Recorded reports whether h's order is one whose path is recorded.
func (h Header) Recorded() bool { return !h.IsZero() && h.Sampled == "1" }

// Segment is one actor's work on one recorded order, in X-Ray's segment
// document format
// (https://docs.aws.amazon.com/xray/latest/devguide/xray-api-segmentdocuments.html):
// every segment of an order has the order's trace ID, and ParentID names
// the segment that sent the message this one handled, so X-Ray shows the
// order as one trace whose segments form its path.
type Segment struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	TraceID  string `json:"trace_id"`
	ParentID string `json:"parent_id,omitempty"`
	// Start and End are seconds since the Unix epoch.
	Start float64 `json:"start_time"`
	End   float64 `json:"end_time"`
	// Error marks work that failed (X-Ray's "error" flag).
	Error bool `json:"error,omitempty"`
	// Annotations are indexed: an operator finds an order's trace with the
	// filter expression annotation.order_id = "...".
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MaxSegmentBytes bounds one segment document; X-Ray takes up to 64 KB.
// The annotations are the only unbounded part: each is cut to
// maxAnnotationBytes.
const (
	MaxSegmentBytes    = 64 << 10
	maxAnnotationBytes = 256
)

// Document is the segment as PutTraceSegments sends it.
func (s Segment) Document() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("trace segment: %w", err)
	}
	if len(b) > MaxSegmentBytes {
		return "", fmt.Errorf("trace segment: %d bytes, over %d", len(b), MaxSegmentBytes)
	}
	return string(b), nil
}

// Recording collects the segments of one invocation, to be sent when it
// ends (see shared/segments). Without one in the context, nothing is
// recorded: tests and the local stack run the actors without it.
type Recording struct {
	now  func() time.Time
	mu   sync.Mutex
	segs []Segment
}

// NewRecording starts an invocation's recording; now stamps the segments.
func NewRecording(now func() time.Time) *Recording { return &Recording{now: now} }

// Segments returns what was recorded and empties the recording.
func (r *Recording) Segments() []Segment {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.segs
	r.segs = nil
	return out
}

func (r *Recording) add(s Segment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.segs = append(r.segs, s)
}

type recordingKey struct{}

// WithRecording returns ctx recording into r.
func WithRecording(ctx context.Context, r *Recording) context.Context {
	return context.WithValue(ctx, recordingKey{}, r)
}

func recordingOf(ctx context.Context) *Recording {
	r, _ := ctx.Value(recordingKey{}).(*Recording)
	return r
}

// Span is an open segment. A nil Span records nothing, so callers need not
// ask whether their order is recorded.
type Span struct {
	rec *Recording
	seg Segment
}

// Begin is Join that also opens the segment name of the work that follows
// (Open).
func Begin(ctx context.Context, log *slog.Logger, h Header, name string) (context.Context, *slog.Logger, *Span) {
	ctx, log = Join(ctx, log, h)
	ctx, sp := Open(ctx, name)
	return ctx, log, sp
}

// Open opens the segment name for the work that follows, when ctx carries
// a recorded order's trace and a Recording: what the actor then sends
// names the segment as its parent, so the next actor's segment hangs under
// it. End the span when the work ends. Otherwise the span is nil and ctx
// unchanged.
func Open(ctx context.Context, name string) (context.Context, *Span) {
	rec := recordingOf(ctx)
	h, ok := FromContext(ctx)
	if rec == nil || !ok || !h.Recorded() {
		return ctx, nil
	}
	sp := &Span{rec: rec, seg: Segment{
		Name: name, ID: newSegmentID(), TraceID: h.Root, ParentID: h.Parent,
		Start: epochSeconds(rec.now()),
	}}
	h.Parent = sp.seg.ID
	return NewContext(ctx, h), sp
}

// BeginSQS is Begin for the trace an SQS record carries, if any.
func BeginSQS(ctx context.Context, log *slog.Logger, rec events.SQSMessage, name string) (context.Context, *slog.Logger, *Span) {
	h, _ := OfSQS(rec)
	return Begin(ctx, log, h, name)
}

// Annotate adds an indexed key to the segment; empty values are left out.
func (s *Span) Annotate(key, value string) {
	if s == nil || value == "" {
		return
	}
	if len(value) > maxAnnotationBytes {
		value = value[:maxAnnotationBytes]
	}
	if s.seg.Annotations == nil {
		s.seg.Annotations = map[string]string{}
	}
	s.seg.Annotations[key] = value
}

// End closes the segment, marked as an error when failed.
func (s *Span) End(failed bool) {
	if s == nil {
		return
	}
	s.seg.End = math.Max(s.seg.Start, epochSeconds(s.rec.now()))
	s.seg.Error = failed
	s.rec.add(s.seg)
}

func epochSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// newSegmentID is a segment ID: 16 hex digits.
func newSegmentID() string {
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(id[:])
}
