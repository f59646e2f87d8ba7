package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// maxOutputBytes bounds a step's output as the page shows it; the API
// bounds it too (docs/workflows.md, size limits), but a page of several
// steps stays readable.
const maxOutputBytes = 4 << 10

// orderBody is the order page.
type orderBody struct {
	O api.Order
	// Graph is the workflow's steps, in order; Undos the undos asked for,
	// last step first, as they run.
	Graph, Undos []node
	Timeline     timeline
	Outputs      []output
	// CanRetry, CanCancel: the order's state allows it; RetryWhat and
	// CancelWhat say what it will do.
	CanRetry, CanCancel   bool
	RetryWhat, CancelWhat []string
	// LogsQuery finds the order's log lines in CloudWatch Logs Insights;
	// TraceQuery, when the API named the order's trace, every line of it.
	LogsQuery, TraceQuery string
}

// traceIDPattern is an X-Ray trace ID: 1-<8 hex digits of Unix
// seconds>-<24 hex digits>.
var traceIDPattern = regexp.MustCompile(`^1-[0-9a-f]{8}-[0-9a-f]{24}$`)

// node is one step (or undo) of the graph.
type node struct {
	Index   int
	Name    string
	State   workflow.StepState
	Current bool
	Detail  string
}

// output is a step's output, or its undo's, as the page shows it.
type output struct {
	Label string
	JSON  string
	Bytes int
	Cut   bool
}

func newOrderBody(o api.Order, now time.Time) orderBody {
	b := orderBody{O: o, Timeline: newTimeline(o, now)}
	for i, s := range o.Steps {
		n := node{Index: i, Name: s.Name, State: s.State, Current: i == o.StepIndex && !o.State.Ended(),
			Detail: fmt.Sprintf("%s, %d failed", plural(s.Attempts, "attempt"), s.Failures)}
		if n.State == "" {
			n.State = workflow.StepPending
		}
		b.Graph = append(b.Graph, n)
		if len(s.Output) > 0 {
			b.Outputs = append(b.Outputs, newOutput("Output of "+s.Name, s.Output))
		}
		if len(s.CompensationOutput) > 0 {
			b.Outputs = append(b.Outputs, newOutput("Output of the undo of "+s.Name, s.CompensationOutput))
		}
	}
	for i := len(o.Steps) - 1; i >= 0; i-- {
		s := o.Steps[i]
		if s.Compensation == "" {
			continue
		}
		b.Undos = append(b.Undos, node{Index: i, Name: s.Name, State: s.Compensation,
			Detail: fmt.Sprintf("%s, %d failed", plural(s.CompensationAttempts, "attempt"), s.CompensationFailures)})
	}
	b.CanRetry = o.State.NeedsOperator() || o.State == workflow.Waiting
	b.CanCancel = o.State.InFlight() || o.State == workflow.Error
	step := fmt.Sprintf("%s (step %d of %d)", o.Step, o.StepIndex+1, len(o.Steps))
	idem := "Its service gets the same idempotency key (order ID and step), so an effect it applied before is answered again, not applied twice."
	race := "The API applies it only if the order is still as this page read it: if another operator or the system moved it on first, the answer is a conflict and nothing changes."
	switch o.State {
	case workflow.Error:
		b.RetryWhat = []string{"Resubmits the order from its failed step, " + step + ": the Scheduler sends it to its Agent again as attempt " + fmt.Sprint(o.Attempt+1) + ", with a fresh failure count.", idem, race}
	case workflow.CompensationFailed:
		b.RetryWhat = []string{"Resumes the failed undo of " + step + ", with a fresh failure count; the undos still due run after it, last step first.", race}
	case workflow.Waiting:
		b.RetryWhat = []string{"Tries the waiting step " + step + " now instead of at the end of its wait (" + stamp(o.CompleteBy) + "), with a fresh threshold and set of waits.", idem, race}
	}
	undo := "Undoes every step that may have been applied, last first; a step that may have been applied and has no undo is named in an alert, to be undone by hand."
	if o.State == workflow.Error {
		b.CancelWhat = []string{"Closes the order, stopped in Error at " + step + ", instead of resuming it.", undo, "The order ends Cancelled.", race}
	} else {
		b.CancelWhat = []string{"Stops the order, now " + string(o.State) + " at " + step + ".", undo, "The order ends Cancelled.", race}
	}
	b.LogsQuery = `filter orderId = "` + o.OrderID + `" | fields @timestamp, function, msg, traceId | sort @timestamp`
	if traceIDPattern.MatchString(o.TraceID) {
		b.TraceQuery = `filter traceId = "` + o.TraceID + `" | sort @timestamp`
	}
	return b
}

func newOutput(label string, raw json.RawMessage) output {
	out := output{Label: label, Bytes: len(raw)}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Reset()
		buf.Write(raw)
	}
	text := buf.String()
	if len(text) > maxOutputBytes {
		text, out.Cut = strings.ToValidUTF8(text[:maxOutputBytes], ""), true
	}
	out.JSON = text
	return out
}

// timeline is an order's timeline drawn in SVG: each row's bars as x and
// width on a 0..1000 axis.
type timeline struct {
	From  string
	Total string
	Mid   string
	Rows  []timelineRow
}

// timelineRow is one row: its earlier attempts (dotted) and its last
// attempt (the bar), with how it ended.
type timelineRow struct {
	Index  int
	Step   string
	Undo   bool
	Ends   opsclient.TimelineEnd
	Note   string
	Dotted bool
	// EarlierX..BarW are in axis units (0..1000).
	EarlierX, EarlierW, BarX, BarW float64
	Title                          string
}

// axisWidth is the timeline's width in SVG user units.
const axisWidth = 1000

// minBar keeps a bar of a few milliseconds visible.
const minBar = 4

func newTimeline(o api.Order, now time.Time) timeline {
	t0, t1, rows := opsclient.TimelineRows(o, now)
	span := t1.Sub(t0)
	x := func(t time.Time) float64 { return axisWidth * float64(t.Sub(t0)) / float64(span) }
	tl := timeline{From: stamp(t0), Total: opsclient.Duration(span), Mid: opsclient.Duration(span / 2)}
	for _, r := range rows {
		v := timelineRow{Index: r.Index, Step: r.Step, Undo: r.Undo, Ends: r.Ends, Note: r.Note(), Dotted: r.Dotted}
		v.BarX = x(r.Start)
		v.BarW = max(x(r.End)-v.BarX, minBar)
		if v.BarX+v.BarW > axisWidth {
			v.BarX = axisWidth - v.BarW
		}
		if r.Dotted {
			v.EarlierX, v.EarlierW = x(r.From), max(x(r.Start)-x(r.From), 0)
		}
		what := "step"
		if r.Undo {
			what = "undo of"
		}
		v.Title = fmt.Sprintf("%s %s: %s, %s", what, r.Step, r.Ends, v.Note)
		tl.Rows = append(tl.Rows, v)
	}
	return tl
}

// stamp is t as the CLI prints it, "-" when unset.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// clip bounds free text (an error, a reason) on a page.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
