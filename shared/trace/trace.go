// Package trace carries one X-Ray trace per order: the trace header
// (Root=1-<time>-<id>;Parent=<id>;Sampled=1). An order's trace, and whether
// it is recorded (Sample), are chosen once, at its Submission, and then
// travel with it: in the context of the code working on it, as the
// AWSTraceHeader system attribute of each SQS message, as the
// X-Amzn-Trace-Id header of each SNS publish and remote call, on its state
// record for the actors that start from a schedule or a stream, and as the
// traceId of every log line about it. For a recorded order each actor
// opens a segment of its work (Begin), under the order's trace ID, which
// shared/segments sends to X-Ray.
//
// It is a small package of its own rather than the X-Ray SDK (in maintenance
// mode) or the OpenTelemetry SDK: a segment is a small JSON document, and
// the rest is reading, making and passing on the header.
package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// HTTPHeader is the header AWS services and Lambda carry a trace in.
const HTTPHeader = "X-Amzn-Trace-Id"

// SQSAttribute is the SQS message system attribute that carries a trace;
// Lambda's SQS event shows it in events.SQSMessage.Attributes. (Lambda's
// own active tracing would start a new trace linked to it rather than
// continue it; the functions' tracing is PassThrough, and they record the
// order's segments themselves.)
const SQSAttribute = "AWSTraceHeader"

// LogKey is the attribute every log line of a traced order carries: the
// trace's Root.
const LogKey = "traceId"

// MaxHeaderBytes bounds a header read from outside. AWS's own stay well
// under it.
const MaxHeaderBytes = 1024

// ErrHeader marks a trace header that cannot be read.
var ErrHeader = errors.New("invalid trace header")

// Header is an X-Ray trace header. Only Root, Parent and Sampled are kept:
// other fields (Lineage, Self) are dropped, see Parse.
type Header struct {
	// Root is the trace ID: 1-<8 hex digits of Unix seconds>-<24 hex digits>.
	Root string
	// Parent is the ID of the segment that made the call, 16 hex digits;
	// empty when there is none.
	Parent string
	// Sampled is the sampling decision: "1", "0", "?" (ask downstream to
	// decide) or empty (no decision).
	Sampled string
}

// IsZero reports whether h names no trace.
func (h Header) IsZero() bool { return h.Root == "" }

// String is the header's wire form; empty for the zero Header.
func (h Header) String() string {
	if h.IsZero() {
		return ""
	}
	var b strings.Builder
	b.Grow(len("Root=;Parent=;Sampled=") + len(h.Root) + len(h.Parent) + len(h.Sampled))
	b.WriteString("Root=")
	b.WriteString(h.Root)
	if h.Parent != "" {
		b.WriteString(";Parent=")
		b.WriteString(h.Parent)
	}
	if h.Sampled != "" {
		b.WriteString(";Sampled=")
		b.WriteString(h.Sampled)
	}
	return b.String()
}

// Stored is the header kept with an order: its Root and sampling decision,
// without the Parent of the call that chose it.
func (h Header) Stored() Header { return Header{Root: h.Root, Sampled: h.Sampled} }

// Parse reads a trace header from outside (an SQS attribute, an HTTP header,
// Lambda's invocation, a state record). Root is required; Parent and Sampled
// are checked when present; fields it does not know (Lineage, Self) are
// skipped, as X-Ray's own parsers do, and not passed on. A field given
// twice is refused.
func Parse(s string) (Header, error) {
	if len(s) > MaxHeaderBytes {
		return Header{}, fmt.Errorf("%w: %d bytes, over %d", ErrHeader, len(s), MaxHeaderBytes)
	}
	var h Header
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return Header{}, fmt.Errorf("%w: %q is not key=value", ErrHeader, part)
		}
		if seen[k] {
			return Header{}, fmt.Errorf("%w: %s given twice", ErrHeader, k)
		}
		seen[k] = true
		switch k {
		case "Root":
			if !ValidRoot(v) {
				return Header{}, fmt.Errorf("%w: Root %q is not 1-<8 hex>-<24 hex>", ErrHeader, v)
			}
			h.Root = v
		case "Parent":
			if !isHex(v, 16) {
				return Header{}, fmt.Errorf("%w: Parent %q is not 16 hex digits", ErrHeader, v)
			}
			h.Parent = v
		case "Sampled":
			if v != "0" && v != "1" && v != "?" {
				return Header{}, fmt.Errorf("%w: Sampled %q is not 0, 1 or ?", ErrHeader, v)
			}
			h.Sampled = v
		}
	}
	if h.Root == "" {
		return Header{}, fmt.Errorf("%w: no Root", ErrHeader)
	}
	return h, nil
}

// ValidRoot reports whether s is an X-Ray trace ID.
func ValidRoot(s string) bool {
	return len(s) == 35 && s[:2] == "1-" && s[10] == '-' && isHex(s[2:10], 8) && isHex(s[11:], 24)
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// New starts a trace at now, for an order that came without one (outside
// Lambda). It has no sampling decision: the Submission makes it (Sample).
func New(now time.Time) Header {
	var id [12]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return Header{Root: fmt.Sprintf("1-%08x-%s", uint32(now.Unix()), hex.EncodeToString(id[:]))}
}

// lambdaKey is the context key aws-lambda-go stores the invocation's trace
// header under (and in _X_AMZN_TRACE_ID).
const lambdaKey = "x-amzn-trace-id"

// FromLambda returns the trace header of the Lambda invocation ctx belongs
// to, if it has a valid one.
func FromLambda(ctx context.Context) (Header, bool) {
	s, _ := ctx.Value(lambdaKey).(string)
	if s == "" {
		return Header{}, false
	}
	h, err := Parse(s)
	return h, err == nil
}

type ctxKey struct{}

// NewContext returns ctx carrying h; a zero h leaves ctx as it is.
func NewContext(ctx context.Context, h Header) context.Context {
	if h.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, h)
}

// FromContext returns the trace ctx carries, if any.
func FromContext(ctx context.Context) (Header, bool) {
	h, ok := ctx.Value(ctxKey{}).(Header)
	return h, ok && !h.IsZero()
}

// Log returns log with h's traceId; a zero h leaves log as it is.
func Log(log *slog.Logger, h Header) *slog.Logger {
	if h.IsZero() {
		return log
	}
	return log.With(slog.String(LogKey, h.Root))
}

// Join returns ctx carrying h and log with its traceId: what each actor
// does once it knows the order it works on. Lambda records no segment of
// its own (the functions' tracing is PassThrough), so what the actor sends
// names h's Parent, or the actor's own segment once it opens one (Begin).
func Join(ctx context.Context, log *slog.Logger, h Header) (context.Context, *slog.Logger) {
	return NewContext(ctx, h), Log(log, h)
}

// OfSQS returns the trace an SQS record carries, if it carries a valid one.
func OfSQS(rec events.SQSMessage) (Header, bool) {
	s := rec.Attributes[SQSAttribute]
	if s == "" {
		return Header{}, false
	}
	h, err := Parse(s)
	return h, err == nil
}

// JoinSQS is Join for the trace an SQS record carries, if any: each record
// of a batch is handled in its own order's trace.
func JoinSQS(ctx context.Context, log *slog.Logger, rec events.SQSMessage) (context.Context, *slog.Logger) {
	h, _ := OfSQS(rec)
	return Join(ctx, log, h)
}

// Stored reads the trace kept on a state record; a missing or unreadable
// one is the zero Header (a record written before tracing).
func Stored(s string) Header {
	if s == "" {
		return Header{}
	}
	h, err := Parse(s)
	if err != nil {
		return Header{}
	}
	return h
}
