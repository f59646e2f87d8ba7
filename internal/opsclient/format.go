package opsclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/workflow"
)

// Widths of free text in tables; `show` and --json give it in full.
const (
	lastErrorWidth = 60
	cellWidth      = 40
	fullTextWidth  = 2000
)

// writeOrders prints a page (or all pages) of orders as a table.
func writeOrders(w io.Writer, orders []api.OrderSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER ID\tSTATE\tPRIORITY\tSTEP\tFAILURES\tUPDATED\tLAST ERROR")
	for _, o := range orders {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", o.OrderID, o.State, cell(string(o.Priority.Or()), cellWidth), cell(o.Step, cellWidth),
			o.FailureCount, stamp(o.UpdatedAt), cell(o.LastError, lastErrorWidth))
	}
	return tw.Flush()
}

// writeWorkflows prints the workflow versions and what each one's open
// orders mean for removing it from the catalog, then what a truncated
// count or stranded orders ask of the operator. hint starts the commands
// it suggests.
func writeWorkflows(w io.Writer, ws api.Workflows, hint string) error {
	if len(ws.Workflows) == 0 {
		_, err := fmt.Fprintln(w, "No workflow versions.")
		return err
	}
	// A truncated count is a lower bound.
	plus := ""
	if ws.Truncated {
		plus = "+"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tCURRENT\tIN FLIGHT\tWAITING FOR AN OPERATOR\tREMOVAL")
	stranded := 0
	for _, v := range ws.Workflows {
		open := v.InFlight + v.NeedsOperator
		current := yesNo(v.Current)
		var removal string
		switch {
		case !v.Deployed:
			current = "-"
			stranded += open
			removal = fmt.Sprintf("NOT DEPLOYED: %d%s open orders stranded", open, plus)
		case v.CanRemove:
			removal = "can be removed"
		case v.Current:
			removal = "keep: current"
			if open > 0 {
				removal += fmt.Sprintf(", %d%s open", open, plus)
			}
		case open == 0:
			removal = "keep: count incomplete"
		default:
			removal = fmt.Sprintf("keep: %d%s open", open, plus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d%s\t%d%s\t%s\n", cell(v.ID, cellWidth), current, v.InFlight, plus, v.NeedsOperator, plus, removal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if ws.Default != "" {
		fmt.Fprintf(w, "\nNew orders that name no workflow run %s.\n", cell(ws.Default, cellWidth))
	}
	if ws.Truncated {
		fmt.Fprintln(w, "The API stopped counting at its bound: every count is a lower bound, and no version can be removed on it.")
	}
	if stranded > 0 {
		fmt.Fprintf(w, "Stranded orders cannot move on (the Supervisor stops them in Error or CompensationFailed):\ndeploy their version again (shared/catalog/workflows.json), then retry them:\n  %s list --state Error\n  %s list --state CompensationFailed\n", hint, hint)
	}
	return nil
}

// writeOrder prints an order's summary, its step history and every error in
// full, then the commands that apply to its state.
func writeOrder(w io.Writer, o Order, cmd string, now time.Time, width int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	state := string(o.State)
	if o.Status != "" {
		state += " (client status " + cell(string(o.Status), cellWidth) + ")"
	}
	step := cell(o.Step, cellWidth)
	if len(o.Steps) > 0 {
		step += fmt.Sprintf(" (step %d of %d)", o.StepIndex+1, len(o.Steps))
	}
	rows := [][2]string{
		{"Order", o.OrderID},
		{"Workflow", cell(o.Workflow, cellWidth)},
		{"State", state},
		{"Priority", cell(string(o.Priority.Or()), cellWidth)},
		{"Step", step},
		{"Attempt", strconv.Itoa(o.Attempt)},
		{"Failures", strconv.Itoa(o.FailureCount) + " (of the current step)"},
		{"Complete by", stamp(o.CompleteBy)},
		{"Last error", cell(o.LastError, fullTextWidth)},
		{"Client", cell(o.ClientID, cellWidth)},
		{"Owner", cell(o.Owner, fullTextWidth)},
		{"Owner ID", cell(o.OwnerID, fullTextWidth)},
		{"Cancelled", yesNo(o.Cancelled)},
		{"Resubmits", strconv.Itoa(o.Resubmits)},
		{"Created", stamp(o.CreatedAt)},
		{"Updated", stamp(o.UpdatedAt)},
	}
	if o.State == workflow.Waiting {
		// The step is tried again at Complete by; a retry does it now.
		rows = append(rows, [2]string{"Waiting", fmt.Sprintf("wait %d; the step is tried again at %s", o.WaitRound, stamp(o.CompleteBy))})
	}
	if o.ExpiresAt != nil {
		// A terminal order: deleted then, and answered as missing from then on.
		rows = append(rows, [2]string{"Expires", stampOf(o.ExpiresAt)})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(o.Steps) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tSTEP\tSTATE\tATTEMPTS\tFAILURES\tSTARTED\tFINISHED\tCOMPENSATION\tC.ATTEMPTS\tC.FAILURES\tCOMPENSATED")
		for i, s := range o.Steps {
			// Counts of a compensation never asked for would read as "tried 0 times".
			cAttempts, cFailures := "-", "-"
			if s.Compensation != "" {
				cAttempts, cFailures = strconv.Itoa(s.CompensationAttempts), strconv.Itoa(s.CompensationFailures)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, cell(s.Name, cellWidth), cell(string(s.State), cellWidth),
				s.Attempts, s.Failures, stampOf(s.StartedAt), stampOf(s.FinishedAt),
				cell(string(s.Compensation), cellWidth), cAttempts, cFailures, stampOf(s.CompensatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s\n", strings.Join(Timeline(o.Order, now, width), "\n"))
	}
	var errs []string
	for _, s := range o.Steps {
		if s.Error != "" {
			errs = append(errs, fmt.Sprintf("  %s: %s", cell(s.Name, cellWidth), cell(s.Error, fullTextWidth)))
		}
		if s.CompensationError != "" {
			errs = append(errs, fmt.Sprintf("  %s (compensation): %s", cell(s.Name, cellWidth), cell(s.CompensationError, fullTextWidth)))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nStep errors:\n%s\n", strings.Join(errs, "\n"))
	}
	var next []string
	if o.State.NeedsOperator() || o.State == workflow.Waiting {
		next = append(next, cmd+" retry "+o.OrderID)
	}
	if o.State.InFlight() {
		next = append(next, cmd+" cancel "+o.OrderID)
	}
	if len(next) > 0 {
		_, err := fmt.Fprintf(w, "\nNext: %s\n", strings.Join(next, "\n      "))
		return err
	}
	return nil
}

// writeJSON prints a body as the API sent it, indented for a person; jq
// reads it the same.
func writeJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("indent JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// ordersJSON joins the orders of several pages into one document shaped like
// a last page.
func ordersJSON(raws []json.RawMessage) ([]byte, error) {
	if raws == nil {
		raws = []json.RawMessage{}
	}
	b, err := jsonwire.Marshal(struct {
		Orders []json.RawMessage `json:"orders"`
	}{raws})
	if err != nil {
		return nil, fmt.Errorf("join pages: %w", err)
	}
	return b, nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// stampOf is stamp of a time the API may omit.
func stampOf(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// cell is text from the API made fit for a table cell: one line, no terminal
// control sequences, at most width runes, "-" when empty.
func cell(s string, width int) string {
	if s == "" {
		return "-"
	}
	return sanitize(s, width)
}

// sanitize makes text from outside safe to print on a terminal: line breaks
// and tabs become spaces, and control and bidirectional-override characters
// (which could rewrite what the operator sees) become U+FFFD. It then
// truncates to width runes.
func sanitize(s string, width int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
			return utf8.RuneError
		}
		return r
	}, s)
	return truncate(s, width)
}

// truncate cuts s to at most width runes, marking the cut with an ellipsis.
func truncate(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	if width <= 1 {
		return "…"
	}
	n := 0
	for i := range s {
		if n == width-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
