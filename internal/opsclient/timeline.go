package opsclient

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// Timeline widths.
const (
	DefaultTimelineWidth = 80
	MinTimelineWidth     = 40
	MaxTimelineWidth     = 400
	timelineLabelWidth   = 26
	timelineNoteWidth    = 30
	minTimelineBar       = 10
)

// The marks of the timeline.
const (
	markRun     = '=' // the step's last attempt, from its claim to its end
	markEarlier = '.' // earlier attempts and the waits between them
	markUndo    = '-' // an undo
	markDone    = ']' // succeeded (an undo: undone)
	markFailed  = 'X' // failed for good
	markCancel  = 'C' // cancelled while pending or running
	markRunning = '>' // still running at the time drawn
)

// timelineLegend explains the marks and what the record does not keep.
const timelineLegend = "= last attempt  . earlier attempts, retry waits  - undo  ] done  X failed\n" +
	"C cancelled  > running. The record keeps a step's last claim and its end,\n" +
	"and an undo's end: an undo is drawn from the end of what came before it."

// TimelineEnd says how a timeline row ended.
type TimelineEnd string

// How a row of the timeline ends.
const (
	EndDone      TimelineEnd = "done"      // succeeded (an undo: undone)
	EndFailed    TimelineEnd = "failed"    // failed for good
	EndCancelled TimelineEnd = "cancelled" // cancelled while pending or running
	EndRunning   TimelineEnd = "running"   // still running at the time drawn
)

// TimelineRow is one row of an order's timeline: a step that ran, or an
// undo. From is where its time starts (the end of what came before it),
// Start its last attempt's claim, End its end (clamped to the timeline).
type TimelineRow struct {
	// Index is the step's position in the workflow, from 0.
	Index int
	Step  string
	Undo  bool
	// Attempts and Failures are the step's, or its undo's.
	Attempts, Failures int
	From, Start, End   time.Time
	// Dotted: earlier attempts and retry waits ran from From to Start.
	Dotted bool
	Ends   TimelineEnd
}

// Note says where the row's time went: "853ms, 1 attempt, 1 failed".
func (r TimelineRow) Note() string {
	note := fmt.Sprintf("%s, %s", duration(r.End.Sub(r.From)), plural(r.Attempts, "attempt"))
	if r.Failures > 0 {
		note += fmt.Sprintf(", %d failed", r.Failures)
	}
	return note
}

// TimelineRows lays the order's steps and undos on one time axis, from its
// creation (from) to its last change (to; to now while it is in flight): a
// row per step that ran, then a row per undo, in the order they ended. It
// is a pure function of the order and now; Timeline draws it in text, the
// console in SVG.
func TimelineRows(o api.Order, now time.Time) (from, to time.Time, rows []TimelineRow) {
	t0 := o.CreatedAt
	t1 := o.UpdatedAt
	for _, s := range o.Steps {
		for _, t := range []*time.Time{s.StartedAt, s.FinishedAt, s.CompensatedAt} {
			if t != nil && t.After(t1) {
				t1 = *t
			}
		}
	}
	if o.State.InFlight() && now.After(t1) {
		t1 = now
	}
	if !t1.After(t0) {
		t1 = t0.Add(time.Millisecond)
	}
	clamp := func(t time.Time) time.Time {
		if t.Before(t0) {
			return t0
		}
		if t.After(t1) {
			return t1
		}
		return t
	}
	ptr := func(t *time.Time, or time.Time) time.Time {
		if t == nil {
			return or
		}
		return clamp(*t)
	}
	// events are the ends seen so far, in time: an undo starts at the
	// latest one before its own end.
	var ends []time.Time
	ready := t0
	for i, s := range o.Steps {
		if s.Attempts == 0 && s.StartedAt == nil {
			continue
		}
		start := ptr(s.StartedAt, ready)
		end := ptr(s.FinishedAt, t1)
		last := EndDone
		switch s.State {
		case workflow.StepFailed:
			last = EndFailed
		case workflow.StepCancelled:
			last = EndCancelled
		case workflow.StepPending, workflow.StepProcessing:
			last = EndRunning
			if !o.State.InFlight() {
				end = ptr(s.FinishedAt, clamp(o.UpdatedAt))
			}
		}
		if start.Before(ready) {
			ready = start
		}
		rows = append(rows, TimelineRow{Index: i, Step: s.Name, Attempts: s.Attempts, Failures: s.Failures,
			From: ready, Start: start, End: end, Dotted: s.Attempts > 1 || s.Failures > 0, Ends: last})
		if s.FinishedAt != nil {
			ends = append(ends, end)
			ready = end
		}
	}
	// Undos run from the last step back: the one that ended first first,
	// those still running last.
	type undo struct {
		index      int
		s          api.StepHistory
		end        time.Time
		inProgress bool
	}
	var undos []undo
	for i, s := range o.Steps {
		if s.Compensation == "" {
			continue
		}
		u := undo{index: i, s: s, end: ptr(s.CompensatedAt, t1), inProgress: s.CompensatedAt == nil}
		if u.inProgress && s.Compensation != workflow.StepPending && s.Compensation != workflow.StepProcessing {
			u.end = clamp(o.UpdatedAt) // failed: it ended at the record's last change
		}
		undos = append(undos, u)
	}
	for i := 1; i < len(undos); i++ { // insertion sort: stable, few rows
		for j := i; j > 0 && undos[j].end.Before(undos[j-1].end); j-- {
			undos[j], undos[j-1] = undos[j-1], undos[j]
		}
	}
	for _, u := range undos {
		start := t0
		for _, e := range ends {
			if !e.After(u.end) && e.After(start) {
				start = e
			}
		}
		last := EndDone
		switch u.s.Compensation {
		case workflow.StepFailed:
			last = EndFailed
		case workflow.StepPending, workflow.StepProcessing:
			last = EndRunning
		}
		rows = append(rows, TimelineRow{Index: u.index, Step: u.s.Name, Undo: true, Attempts: u.s.CompensationAttempts,
			Failures: u.s.CompensationFailures, From: start, Start: start, End: u.end, Ends: last})
		ends = append(ends, u.end)
	}
	return t0, t1, rows
}

// Timeline draws the order's steps and undos on one time axis, from its
// creation to its last change (to now while it is in flight), in width
// columns of plain ASCII: a row per step that ran, with its last attempt
// as a bar and its earlier attempts and retry waits dotted before it, then
// a row per undo, each labelled with where its time went (TimelineRows).
// It is a pure function of the order and now.
func Timeline(o api.Order, now time.Time, width int) []string {
	width = min(max(width, MinTimelineWidth), MaxTimelineWidth)
	t0, t1, timeline := TimelineRows(o, now)
	type row struct {
		label, note      string
		from, start, end time.Time
		dotted           bool
		fill, last       rune
	}
	marks := map[TimelineEnd]rune{EndDone: markDone, EndFailed: markFailed, EndCancelled: markCancel, EndRunning: markRunning}
	rows := make([]row, 0, len(timeline))
	for _, r := range timeline {
		label, fill := fmt.Sprintf("%d %s", r.Index+1, cell(r.Step, timelineLabelWidth)), markRun
		if r.Undo {
			label, fill = "  undo "+cell(r.Step, timelineLabelWidth-7), markUndo
		}
		rows = append(rows, row{label: label, note: r.Note(), from: r.From, start: r.Start, end: r.End, dotted: r.Dotted, fill: fill, last: marks[r.Ends]})
	}

	if len(rows) == 0 {
		return []string{fmt.Sprintf("Timeline from %s: no step has run yet.", stamp(t0))}
	}
	labelW, noteW := 0, 0
	for _, r := range rows {
		labelW = max(labelW, utf8.RuneCountInString(r.label))
		noteW = max(noteW, utf8.RuneCountInString(r.note))
	}
	labelW, noteW = min(labelW, timelineLabelWidth), min(noteW, timelineNoteWidth)
	bar := max(width-labelW-noteW-5, minTimelineBar)
	span := t1.Sub(t0)
	col := func(t time.Time) int {
		// In floating point: a span of centuries times the width would
		// overflow an int64 of nanoseconds.
		return min(max(int(float64(bar-1)*float64(t.Sub(t0))/float64(span)), 0), bar-1)
	}

	lines := []string{
		fmt.Sprintf("Timeline from %s, %s in all (one column is %s):", stamp(t0), duration(span), duration(span/time.Duration(bar))),
	}
	total := duration(span)
	axis := []rune(strings.Repeat(" ", bar))
	copy(axis, []rune("0s"))
	if n := utf8.RuneCountInString(total); n+3 <= bar {
		copy(axis[bar-n:], []rune(total))
	}
	if mid := duration(span / 2); bar >= 3*len(mid)+8 {
		copy(axis[bar/2-len(mid)/2:], []rune(mid))
	}
	lines = append(lines, fmt.Sprintf("%-*s  %s", labelW, "", string(axis)))
	for _, r := range rows {
		cells := []rune(strings.Repeat(" ", bar))
		if r.dotted {
			for c := col(r.from); c < col(r.start); c++ {
				cells[c] = markEarlier
			}
		}
		for c := col(r.start); c <= col(r.end); c++ {
			cells[c] = r.fill
		}
		cells[col(r.end)] = r.last
		lines = append(lines, fmt.Sprintf("%-*s |%s|  %s", labelW, truncate(r.label, labelW), string(cells), truncate(r.note, noteW)))
	}
	return append(lines, strings.Split(timelineLegend, "\n")...)
}

// duration is d for a person: 120ms, 4.2s, 2m05s, 1h02m.
func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Duration is d as the timeline writes it for a person: 120ms, 4.2s,
// 2m05s, 1h02m.
func Duration(d time.Duration) string { return duration(d) }
