package costrun

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/supervisor"
	"github.com/sasflow/sas/shared/trace"
)

// xraySink stands in for X-Ray's PutTraceSegments, which no local engine
// serves: the run's real X-Ray client (shared/segments) sends the
// recorded orders' segments to it over HTTP, and it keeps them, so the
// run measures what X-Ray would be sent and checks what it would show.
type xraySink struct {
	mu       sync.Mutex
	requests int
	segs     []trace.Segment
}

func (x *xraySink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var in struct{ TraceSegmentDocuments []string }
	if req.Method != http.MethodPost || req.URL.Path != "/TraceSegments" {
		http.Error(w, "not PutTraceSegments", http.StatusNotFound)
		return
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []trace.Segment
	for _, d := range in.TraceSegmentDocuments {
		var s trace.Segment
		if err := json.Unmarshal([]byte(d), &s); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = append(got, s)
	}
	x.mu.Lock()
	x.requests++
	x.segs = append(x.segs, got...)
	x.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"UnprocessedTraceSegments":[]}`)
}

// Traces is what the sink received, by trace ID.
type Traces map[string][]trace.Segment

func (x *xraySink) snapshot() (requests int, traces Traces) {
	x.mu.Lock()
	defer x.mu.Unlock()
	traces = Traces{}
	for _, s := range x.segs {
		traces[s.TraceID] = append(traces[s.TraceID], s)
	}
	return x.requests, traces
}

// Check reports how a trace fails to show one order's path: segments of
// more than one order, a parent that is not in the trace, or no segment
// of the Submission at its root (recoveries may add roots of their own).
func (t Traces) Check(id string) error {
	segs := t[id]
	ids := map[string]bool{}
	orders := map[string]bool{}
	for _, s := range segs {
		ids[s.ID] = true
		if o := s.Annotations["order_id"]; o != "" {
			orders[o] = true
		}
	}
	if len(orders) != 1 {
		return fmt.Errorf("trace %s holds the segments of %d orders", id, len(orders))
	}
	var roots []string
	for _, s := range segs {
		switch {
		case s.ParentID == "":
			roots = append(roots, s.Name)
		case !ids[s.ParentID]:
			return fmt.Errorf("trace %s: segment %s (%s) names parent %s, not in the trace", id, s.ID, s.Name, s.ParentID)
		}
	}
	// A recovery starts from the order's record, not from a message, so
	// its segment is a root of the order's trace too.
	sort.Strings(roots)
	submissions := 0
	for _, name := range roots {
		switch name {
		case submission.SegmentName:
			submissions++
		case supervisor.SegmentName, supervisor.DeadlineSegmentName:
		default:
			return fmt.Errorf("trace %s: %s has no parent (roots %v)", id, name, roots)
		}
	}
	if submissions != 1 {
		return fmt.Errorf("trace %s has %d Submission segments (roots %v), want one", id, submissions, roots)
	}
	return nil
}
