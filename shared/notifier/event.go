package notifier

import (
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

// EventOf returns the event a committed state record means. It lives here,
// not in api, because what a record tells a client is the notifier's
// decision: its status, and of a failure only its workflow.Reason, since
// LastError may quote what AWS answered (a queue URL, an account ID, a
// role's ARN) or what a remote service wrote; operators read that on GET
// /ops/orders/{id} and in their alerts.
func EventOf(st workflow.State) Event {
	r := workflow.ReasonOf(st)
	return Event{
		V:          Version,
		Kind:       KindOrderEvent,
		OrderID:    st.OrderID,
		ClientID:   st.ClientID,
		Seq:        st.EventSeq,
		Status:     workflow.StatusOf(st),
		Priority:   st.Priority.Or(),
		State:      st.ProcessState,
		Step:       st.Step,
		StepIndex:  st.StepIndex,
		Reason:     r.Code,
		ReasonText: r.Text,
		Cancelled:  st.Cancelled,
		At:         st.UpdatedAt,
	}
}
