package notifier

import (
	"unicode/utf8"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// Event is the status event a client receives; its wire format, Validate
// and the client's decoder live in shared/api, with the other documents
// clients read.
type Event = api.Event

// Version and KindOrderEvent are api's: the event this package writes.
const (
	Version        = api.EventVersion
	KindOrderEvent = api.KindOrderEvent
)

// DecodeEvent reads an Event from the body of a message on a client's
// queue, raw or in an SNS envelope; see api.DecodeEvent.
func DecodeEvent(body string) (Event, error) { return api.DecodeEvent(body) }

// maxLastError caps LastError: a client needs the gist, and SNS messages
// stop at 256 KiB.
const maxLastError = 1024

// EventOf returns the event a committed state record means. It lives here,
// not in api, because what a record tells a client (which status, how much
// of the error) is the notifier's decision.
func EventOf(st workflow.State) Event {
	return Event{
		V:         Version,
		Kind:      KindOrderEvent,
		OrderID:   st.OrderID,
		ClientID:  st.ClientID,
		Seq:       st.EventSeq,
		Status:    workflow.StatusOf(st),
		State:     st.ProcessState,
		Step:      st.Step,
		StepIndex: st.StepIndex,
		LastError: clip(st.LastError, maxLastError),
		Cancelled: st.Cancelled,
		At:        st.UpdatedAt,
	}
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " [truncated]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
