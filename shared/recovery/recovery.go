// Package recovery carries out a workflow.Recovery the state store has
// committed: it hands the record back to the Scheduler (a retry after its
// backoff, a requeue, the start of a compensation) or tells operators (a
// give-up, an alert that was never confirmed sent). The Supervisor runs it
// for records it found expired, the Scheduler for claims whose dispatch
// failed, so both act on a decision the same way.
package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Sender puts a message on an SQS queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

// Actions are what carrying out a decision needs.
type Actions struct {
	Send              Sender
	SchedulerQueueURL string
	Alerts            alert.Sender
	// Confirm records in the store that an alert went out.
	Confirm     alert.Confirmer
	MaxFailures int
	// CLI is the operators' command line the alerts name (alert.CLI).
	CLI string
}

// Outcome is what became of a committed decision; each has exactly one.
type Outcome int

const (
	// Retried: a failed step or undo goes back to the Scheduler after its
	// backoff.
	Retried Outcome = iota + 1
	// Requeued: an unclaimed step or undo was sent to the Scheduler again.
	Requeued
	// Compensating: a step was given up on and its order's compensation was
	// sent to the Scheduler.
	Compensating
	// GaveUp: the order is in Error or CompensationFailed and operators
	// were alerted.
	GaveUp
	// AlertResent: the alert of a record whose first one was never
	// confirmed went out.
	AlertResent
)

// Carry carries out r, which the store committed, leaving st. An error means
// the record could not be handed back to the Scheduler; it is safe (its
// CompleteBy has moved on, so the Supervisor re-sends it once that passes),
// but the caller should report it.
func (a Actions) Carry(ctx context.Context, st workflow.State, r workflow.Recovery, now time.Time, log *slog.Logger) (Outcome, error) {
	switch {
	case r.Kind == workflow.Retry || r.Kind == workflow.Requeue || r.Kind == workflow.GiveUp && st.ProcessState == workflow.CompensationPending:
		msg := message.NewSchedule(st.OrderID, st.StepIndex, string(r.Kind))
		msg.Compensate = st.ProcessState.Undoing()
		if err := a.Send.Send(ctx, a.SchedulerQueueURL, message.Encode(msg), r.Delay); err != nil {
			log.Error("not handed back to the Scheduler; the Supervisor re-sends it", "decision", r.Kind, "error", err)
			return 0, fmt.Errorf("hand %s back to the Scheduler: %w", st.OrderID, err)
		}
		out, t := Retried, workflow.TransitionRetried
		switch {
		case r.Kind == workflow.Requeue:
			out, t = Requeued, workflow.TransitionRequeued
		case r.Kind == workflow.GiveUp:
			out, t = Compensating, workflow.TransitionCompensating
			if r.Cause == workflow.CauseDispatch {
				// The compensation may well end in Compensated, which alerts
				// nobody, yet a queue that refuses requests stops every order
				// that reaches it: tell operators now. Not through the
				// outbox: the record is in flight, and its compensation
				// alerts through it if that fails too.
				if err := a.Alerts.Publish(ctx, a.alert(alert.KindDispatchFailed, st, now)); err != nil {
					log.Warn("dispatch-failed alert not published", "error", err)
				}
			}
		}
		log.Info("handed back to the Scheduler", t.Attr(), "decision", r.Kind, "cause", r.Cause, "compensate", msg.Compensate,
			"step", st.Step, "failureCount", st.FailureCount, "delay", r.Delay)
		return out, nil
	case r.Kind == workflow.GiveUp || r.Kind == workflow.ResendAlert:
		kind := a.kind(st)
		out := AlertResent
		if r.Kind == workflow.GiveUp {
			out = GaveUp
			t := workflow.TransitionGaveUp
			if kind == alert.KindCompensationFailed {
				t = workflow.TransitionCompensationFailed
			}
			log.Error("failed too often; an operator must act", t.Attr(), "cause", r.Cause, "state", st.ProcessState, "failureCount", st.FailureCount)
		}
		alert.Deliver(ctx, a.Alerts, a.Confirm, a.alert(kind, st, now), now, log)
		return out, nil
	}
	return 0, fmt.Errorf("recovery of %s: nothing to carry out for %q", st.OrderID, r.Kind)
}

// kind is the alert of a record that needs an operator.
func (a Actions) kind(st workflow.State) alert.Kind {
	switch {
	case st.ProcessState == workflow.CompensationFailed:
		return alert.KindCompensationFailed
	case strings.HasPrefix(st.LastError, workflow.DispatchFailurePrefix):
		return alert.KindDispatchFailed
	case st.FailureCount < a.MaxFailures:
		return alert.KindPermanentFailure
	}
	return alert.KindRetriesExhausted
}

func (a Actions) alert(kind alert.Kind, st workflow.State, now time.Time) alert.Alert {
	return alert.Alert{
		Kind: kind, OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex,
		FailureCount: st.FailureCount, MaxFailures: a.MaxFailures, Attempt: st.Attempt,
		LastError: st.LastError, At: now, CLI: a.CLI,
	}
}
