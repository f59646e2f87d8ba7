package workflow

import "log/slog"

// Transition names a committed change of a state record in the logs. Handlers
// log it under TransitionKey once the change is committed (before its
// follow-ups: a hand-back that then fails to send is re-sent by the
// Supervisor, and counted as its own requeue), and
// the CDK stack turns each one into a CloudWatch metric with a log metric
// filter, so the dashboard shows orders flowing through the states without a
// single extra API call.
type Transition string

// TransitionKey is the top-level key of the JSON log line that carries a
// Transition.
const TransitionKey = "transition"

const (
	// TransitionAccepted: Submission wrote the order and its Pending record.
	TransitionAccepted Transition = "accepted"
	// TransitionClaimed: a Scheduler claimed a Pending step (Processing).
	TransitionClaimed Transition = "claimed"
	// TransitionStepCompleted: a reply was committed and the next step claimed.
	TransitionStepCompleted Transition = "step-completed"
	// TransitionProcessed: the last step's reply was committed (Processed).
	TransitionProcessed Transition = "processed"
	// TransitionFailed: an Agent reported a permanent fault (Error).
	TransitionFailed Transition = "failed"
	// TransitionRetried: the Supervisor counted a timeout and handed the step
	// back (Pending).
	TransitionRetried Transition = "retried"
	// TransitionRequeued: the Supervisor re-sent a Pending step nobody claimed.
	TransitionRequeued Transition = "requeued"
	// TransitionGaveUp: the Supervisor counted the last allowed timeout (Error).
	TransitionGaveUp Transition = "gave-up"
	// TransitionStaleReply: a reply from an old attempt was refused.
	TransitionStaleReply Transition = "stale-reply"
	// TransitionCompensating: the order stopped and its compensation began
	// (CompensationPending or Compensating).
	TransitionCompensating Transition = "compensating"
	// TransitionUndone: a step's compensation was committed and the next one
	// claimed.
	TransitionUndone Transition = "step-undone"
	// TransitionCompensated: the last compensation was committed.
	TransitionCompensated Transition = "compensated"
	// TransitionCompensationFailed: a compensation failed permanently or
	// too often (CompensationFailed, alert).
	TransitionCompensationFailed Transition = "compensation-failed"
	// TransitionCancelled: a cancel request stopped the order.
	TransitionCancelled Transition = "cancelled"
	// TransitionResubmitted: an operator restarted a stopped order.
	TransitionResubmitted Transition = "resubmitted"
	// TransitionStranded: the Supervisor stopped an order pinned to a
	// workflow version the deployment no longer runs (Error or
	// CompensationFailed, alert).
	TransitionStranded Transition = "stranded"
	// TransitionWaiting: the Supervisor counted the last failure its retry
	// policy allows a step, which waits before it is tried again
	// (Waiting, a notice).
	TransitionWaiting Transition = "waiting"
)

// Transitions lists every Transition, for the stack's metric filters.
func Transitions() []Transition {
	return []Transition{
		TransitionAccepted, TransitionClaimed, TransitionStepCompleted, TransitionProcessed,
		TransitionFailed, TransitionRetried, TransitionRequeued, TransitionGaveUp, TransitionStaleReply,
		TransitionCompensating, TransitionUndone, TransitionCompensated, TransitionCompensationFailed,
		TransitionCancelled, TransitionResubmitted, TransitionStranded, TransitionWaiting,
	}
}

// Attr is the log attribute for t.
func (t Transition) Attr() slog.Attr { return slog.String(TransitionKey, string(t)) }

// Message is the log message of t.
func (t Transition) Message() string {
	if m, ok := transitionMessages[t]; ok {
		return m
	}
	return string(t)
}

// Level is the log level of t: an error for a transition that needs an
// operator, a warning for one that stops an order or refuses a reply.
func (t Transition) Level() slog.Level {
	switch t {
	case TransitionFailed, TransitionGaveUp, TransitionCompensationFailed, TransitionStranded:
		return slog.LevelError
	case TransitionCompensating, TransitionStaleReply, TransitionWaiting:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

var transitionMessages = map[Transition]string{
	TransitionAccepted:           "order accepted",
	TransitionClaimed:            "claimed",
	TransitionStepCompleted:      "step committed; next claimed",
	TransitionProcessed:          "order processed",
	TransitionFailed:             "order failed permanently; an operator must act",
	TransitionRetried:            "retried: handed back to the Scheduler after a backoff",
	TransitionRequeued:           "requeued: handed back to the Scheduler",
	TransitionGaveUp:             "failed too often; an operator must act",
	TransitionStaleReply:         "stale reply dropped",
	TransitionCompensating:       "order stopped; its compensation starts",
	TransitionUndone:             "step undone; next compensation claimed",
	TransitionCompensated:        "order compensated",
	TransitionCompensationFailed: "compensation failed; an operator must act",
	TransitionCancelled:          "order cancelled",
	TransitionResubmitted:        "order resubmitted",
	TransitionStranded:           "workflow version not deployed; an operator must act",
	TransitionWaiting:            "failed too often; waiting before the step is tried again",
}
