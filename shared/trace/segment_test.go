package trace

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestSampleDecidesOnce(t *testing.T) {
	t.Parallel()
	root := Header{Root: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6", Parent: "53995c3f42cd8ad8"}
	for _, tc := range []struct {
		name       string
		rate, draw float64
		want       string
	}{
		{"none recorded", 0, 0, "0"},
		{"all recorded", 1, 0.999999, "1"},
		{"draw under the rate", 0.01, 0.009, "1"},
		{"draw at the rate", 0.01, 0.01, "0"},
		{"draw over the rate", 0.01, 0.5, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Sample(root, tc.rate, tc.draw)
			if got.Sampled != tc.want || got.Root != root.Root {
				t.Errorf("Sample(%v, %v) = %+v, want Sampled=%s on the same root", tc.rate, tc.draw, got, tc.want)
			}
			if got.Recorded() != (tc.want == "1") {
				t.Errorf("Recorded() = %v", got.Recorded())
			}
		})
	}
	if got := Sample(Header{}, 1, 0); !got.IsZero() {
		t.Errorf("Sample of no trace = %+v, want none", got)
	}
}

func TestValidRate(t *testing.T) {
	t.Parallel()
	for rate, want := range map[float64]bool{0: true, 0.01: true, 1: true, -0.1: false, 1.5: false, 5: false} {
		if ValidRate(rate) != want {
			t.Errorf("ValidRate(%v) = %v", rate, !want)
		}
	}
}

// steps is a clock that moves a millisecond each time it is read.
func steps(start time.Time) func() time.Time {
	now := start
	return func() time.Time {
		now = now.Add(time.Millisecond)
		return now
	}
}

// TestSpansChainAnOrdersPath: each actor's segment names the one before
// as its parent, through the header it sends on, and all share the
// order's trace ID.
func TestSpansChainAnOrdersPath(t *testing.T) {
	t.Parallel()
	order := Header{Root: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6", Sampled: "1"}
	rec := NewRecording(steps(time.Unix(1700000000, 0)))
	ctx := WithRecording(context.Background(), rec)
	log := slog.New(slog.DiscardHandler)

	sctx, _, sub := Begin(ctx, log, order, "submission")
	sub.Annotate("order_id", "o-1")
	sent, _ := FromContext(sctx) // what the Submission sends on
	sub.End(false)
	actx, _, agent := Begin(ctx, log, sent, "agent reserve")
	agent.End(true)
	if h, _ := FromContext(actx); h.Parent == sent.Parent {
		t.Error("the agent's messages name the Submission's segment, not its own")
	}

	segs := rec.Segments()
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	if segs[0].ParentID != "" || segs[1].ParentID != segs[0].ID {
		t.Errorf("parents %q, %q: want none, then the Submission's %q", segs[0].ParentID, segs[1].ParentID, segs[0].ID)
	}
	for _, s := range segs {
		if s.TraceID != order.Root || len(s.ID) != 16 || s.End < s.Start {
			t.Errorf("segment %+v: want the order's trace, a 16-digit ID, an end after its start", s)
		}
	}
	if segs[0].Error || !segs[1].Error || segs[0].Annotations["order_id"] != "o-1" {
		t.Errorf("flags and annotations: %+v", segs)
	}
	if len(rec.Segments()) != 0 {
		t.Error("Segments did not empty the recording")
	}
}

func TestNothingRecordedUnlessSampledAndRecording(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	rec := NewRecording(time.Now)
	for name, c := range map[string]struct {
		ctx context.Context
		h   Header
	}{
		"unsampled order":    {WithRecording(context.Background(), rec), Header{Root: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6", Sampled: "0"}},
		"no decision":        {WithRecording(context.Background(), rec), Header{Root: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6"}},
		"no trace":           {WithRecording(context.Background(), rec), Header{}},
		"outside a recorder": {context.Background(), Header{Root: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6", Sampled: "1"}},
	} {
		ctx, _, sp := Begin(c.ctx, log, c.h, "scheduler")
		if sp != nil {
			t.Errorf("%s: a span was opened", name)
		}
		sp.Annotate("order_id", "o-1") // nil-safe
		sp.End(true)
		if h, ok := FromContext(ctx); ok && h.Parent != c.h.Parent {
			t.Errorf("%s: the header changed to %+v", name, h)
		}
	}
	if n := len(rec.Segments()); n != 0 {
		t.Errorf("%d segments recorded", n)
	}
}

// TestSegmentDocumentGolden pins the segment document PutTraceSegments
// sends (go test ./shared/trace -run Golden -update rewrites it).
func TestSegmentDocumentGolden(t *testing.T) {
	t.Parallel()
	doc, err := Segment{
		Name: "agent reserve-inventory", ID: "70de5b6f19ff9a0a", TraceID: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6",
		ParentID: "53995c3f42cd8ad8", Start: 1700000000.125, End: 1700000000.25, Error: true,
		Annotations: map[string]string{"order_id": "o-1"},
	}.Document()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "segment.json")
	if *update {
		if err := os.WriteFile(path, []byte(doc+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if doc != strings.TrimSpace(string(want)) {
		t.Errorf("document\n%s\nwant\n%s", doc, want)
	}
	var back Segment
	if err := json.Unmarshal([]byte(doc), &back); err != nil || back.ParentID != "53995c3f42cd8ad8" {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestAnnotationsAreBounded(t *testing.T) {
	t.Parallel()
	rec := NewRecording(time.Now)
	ctx := WithRecording(context.Background(), rec)
	_, _, sp := Begin(ctx, slog.New(slog.DiscardHandler), Header{Root: "1-5f84c7a0-1b2c3d4e5f60718293a4b5c6", Sampled: "1"}, "submission")
	sp.Annotate("order_id", strings.Repeat("x", 10_000))
	sp.End(false)
	segs := rec.Segments()
	doc, err := segs[0].Document()
	if err != nil || len(doc) > 1024 {
		t.Errorf("document of %d bytes, %v: an annotation is not bounded", len(doc), err)
	}
}
