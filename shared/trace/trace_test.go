package trace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/trace"
)

const root = "1-5759e988-bd862e3fe1be46a994272793"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     trace.Header
	}{
		{"root only", "Root=" + root, trace.Header{Root: root}},
		{"full", "Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1", trace.Header{Root: root, Parent: "53995c3f42cd8ad8", Sampled: "1"}},
		{"any order, spaces", " Sampled=0 ; Root=" + root + " ", trace.Header{Root: root, Sampled: "0"}},
		{"lineage and self skipped", "Self=1-67891234-12456789abcdef012345678;Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=?;Lineage=a87bd80c:1|68fd508a:5", trace.Header{Root: root, Parent: "53995c3f42cd8ad8", Sampled: "?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := trace.Parse(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"Parent=53995c3f42cd8ad8;Sampled=1",
		"Root=1-5759e988-bd862e3fe1be46a99427279",                                // short
		"Root=1-5759e988-BD862E3FE1BE46A994272793",                               // upper case
		"Root=2-5759e988-bd862e3fe1be46a994272793",                               // version
		"Root=" + root + ";Parent=53995c3f42cd8ad",                               // short parent
		"Root=" + root + ";Sampled=yes",                                          // decision
		"Root=" + root + ";Root=" + root,                                         // twice
		"Root=" + root + ";garbage",                                              // not key=value
		"Root=" + root + ";Lineage=" + strings.Repeat("a", trace.MaxHeaderBytes), // too long
	} {
		if h, err := trace.Parse(in); !errors.Is(err, trace.ErrHeader) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrHeader", in, h, err)
		}
	}
}

func TestStringRoundTrips(t *testing.T) {
	t.Parallel()
	for _, h := range []trace.Header{
		{Root: root},
		{Root: root, Sampled: "1"},
		{Root: root, Parent: "53995c3f42cd8ad8", Sampled: "0"},
	} {
		got, err := trace.Parse(h.String())
		if err != nil || got != h {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", h.String(), got, err, h)
		}
	}
	if s := (trace.Header{}).String(); s != "" {
		t.Errorf("zero Header = %q, want empty", s)
	}
	if got := (trace.Header{Root: root, Parent: "53995c3f42cd8ad8", Sampled: "1"}).Stored(); got != (trace.Header{Root: root, Sampled: "1"}) {
		t.Errorf("Stored = %+v, want no Parent", got)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	a, b := trace.New(at), trace.New(at)
	if !trace.ValidRoot(a.Root) || a.Parent != "" || a.Sampled != "" {
		t.Fatalf("New = %+v, want a valid Root alone", a)
	}
	if want := fmt.Sprintf("1-%08x-", at.Unix()); !strings.HasPrefix(a.Root, want) {
		t.Errorf("Root %s does not start with the time, %s", a.Root, want)
	}
	if a.Root == b.Root {
		t.Errorf("two traces share Root %s", a.Root)
	}
}

func TestFromLambda(t *testing.T) {
	t.Parallel()
	inv := "Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1"
	//lint:ignore SA1029 aws-lambda-go stores the invocation's header under this string key
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", inv)
	h, ok := trace.FromLambda(ctx)
	if !ok || h != (trace.Header{Root: root, Parent: "53995c3f42cd8ad8", Sampled: "1"}) {
		t.Errorf("FromLambda = %+v, %v", h, ok)
	}
	if _, ok := trace.FromLambda(context.Background()); ok {
		t.Errorf("FromLambda outside Lambda found a trace")
	}

	// Lambda records no segment (PassThrough), so a message keeps its own
	// Parent even in the invocation's trace.
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	own := trace.Header{Root: root, Parent: "1111111111111111", Sampled: "1"}
	same, _ := trace.Join(ctx, log, own)
	if got, _ := trace.FromContext(same); got != own {
		t.Errorf("same trace: %+v, want %+v", got, own)
	}
	other := trace.Header{Root: "1-5759e988-000000000000000000000001", Parent: "1111111111111111"}
	octx, olog := trace.Join(ctx, log, other)
	if got, _ := trace.FromContext(octx); got != other {
		t.Errorf("other trace: %+v, want %+v", got, other)
	}
	olog.Info("line")
	if recs := buf.Records(t); len(recs) != 1 || recs[0][trace.LogKey] != other.Root {
		t.Errorf("records = %v, want traceId %s", recs, other.Root)
	}
}

func TestContextAndLog(t *testing.T) {
	t.Parallel()
	if _, ok := trace.FromContext(context.Background()); ok {
		t.Error("a bare context carries a trace")
	}
	if ctx := trace.NewContext(context.Background(), trace.Header{}); ctx != context.Background() {
		t.Error("a zero Header changed the context")
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	if trace.Log(log, trace.Header{}) != log {
		t.Error("a zero Header changed the logger")
	}
}

func TestOfSQSAndStored(t *testing.T) {
	t.Parallel()
	rec := events.SQSMessage{Attributes: map[string]string{trace.SQSAttribute: "Root=" + root + ";Sampled=1"}}
	if h, ok := trace.OfSQS(rec); !ok || h.Root != root {
		t.Errorf("OfSQS = %+v, %v", h, ok)
	}
	for _, bad := range []string{"", "Root=nope"} {
		if h, ok := trace.OfSQS(events.SQSMessage{Attributes: map[string]string{trace.SQSAttribute: bad}}); ok {
			t.Errorf("OfSQS(%q) = %+v", bad, h)
		}
		if h := trace.Stored(bad); !h.IsZero() {
			t.Errorf("Stored(%q) = %+v", bad, h)
		}
	}
}

// FuzzParse: whatever comes in, Parse either refuses it with ErrHeader or
// returns a header whose wire form parses back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"Root=" + root,
		"Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1",
		"Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=?;Lineage=a87bd80c:1",
		"Sampled=0;Root=" + root,
		"Root=;Parent=",
		";;;",
		"Root=" + root + ";Root=" + root,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := trace.Parse(s)
		if err != nil {
			if !errors.Is(err, trace.ErrHeader) {
				t.Fatalf("Parse(%q) error %v is not ErrHeader", s, err)
			}
			return
		}
		if !trace.ValidRoot(h.Root) {
			t.Fatalf("Parse(%q) accepted Root %q", s, h.Root)
		}
		back, err := trace.Parse(h.String())
		if err != nil || back != h {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", s, back, err, h)
		}
	})
}
