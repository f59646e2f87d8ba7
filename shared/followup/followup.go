// Package followup carries out what a committed change asks of its actor
// beyond the write itself: the transition in the log, the schedule message
// the record waits for, and the alert it owes. The Scheduler, the Supervisor
// and the Submission's operator routes commit changes the workflow's Machine
// decided; this is where all of them act on the decision the same way.
package followup

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Sender puts a message on an SQS queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

// Actions are what carrying out a change needs.
type Actions struct {
	Send              Sender
	SchedulerQueueURL string
	// Alerts and Confirm deliver an alert and record it sent (the record's
	// outbox, alert.Deliver); without both, an alert a change owes is left
	// to the Supervisor, which delivers what a record owes.
	Alerts      alert.Sender
	Confirm     alert.Confirmer
	MaxFailures int
	// CLI is the operators' command line the alerts name (alert.CLI).
	CLI string
}

// After carries out what c, committed as st, asks: it logs the transition,
// sends the schedule message the record waits for, and delivers its alert.
// An error means the schedule message was not sent; the record is safe (its
// CompleteBy has moved on, so the Supervisor re-sends it once that passes),
// but the caller should report it.
func (a Actions) After(ctx context.Context, c workflow.Change, st workflow.State, now time.Time, log *slog.Logger) error {
	if c.Transition != "" {
		// The caller's logger names the step and attempt the event was
		// about; where the write left the record goes under its own key,
		// so no key is on the line twice.
		attrs := []any{c.Transition.Attr(), "state", st.ProcessState, "failureCount", st.FailureCount,
			slog.Group("written", slog.String("step", st.Step), slog.Int("stepIndex", st.StepIndex), slog.Int("attempt", st.Attempt))}
		if h := c.Handback; h != nil {
			attrs = append(attrs, slog.Group("handback", slog.String("reason", h.Reason), slog.Bool("compensate", h.Undo), slog.Duration("delay", h.Delay)))
		}
		log.Log(ctx, c.Transition.Level(), c.Transition.Message(), attrs...)
	}
	if c.Notice != "" && a.Alerts != nil {
		// A notice, not an alert: not through the outbox, since the record
		// goes on by itself (a wait, or a compensation its failed dispatch
		// started) and if it stops again it owes an alert of its own.
		if err := a.Alerts.Publish(ctx, a.alert(c.Notice, c.MaxFailures, st, now)); err != nil {
			log.Warn("alert not published", slog.Any("kind", c.Notice), slog.Any("error", err))
		}
	}
	if c.Alert != "" && a.Alerts != nil && a.Confirm != nil {
		kinds := workflow.AlertsOf(c.Alert, st)
		alerts := make([]alert.Alert, len(kinds))
		for i, k := range kinds {
			alerts[i] = a.alert(k, c.MaxFailures, st, now)
		}
		alert.Deliver(ctx, a.Alerts, a.Confirm, alerts, now, log)
	}
	if h := c.Handback; h != nil {
		msg := message.NewSchedule(st.OrderID, st.Workflow, h.StepIndex, h.Reason)
		msg.Compensate = h.Undo
		if err := a.Send.Send(ctx, a.SchedulerQueueURL, message.Encode(msg), h.Delay); err != nil {
			log.Warn("not handed back to the Scheduler; the Supervisor re-sends it", slog.Any("error", err))
			return fmt.Errorf("hand %s back to the Scheduler: %w", st.OrderID, err)
		}
	}
	return nil
}

// Request is the message that dispatches the step or undo st has claimed
// to its Agent. An undo gets the outputs of its own step and of those
// before it: the per-step results kept in the state record say what to undo
// (the reservation to release, the charge to refund). The Scheduler sends it
// for every claim, the Submission for the first step of a new order.
func Request(st workflow.State) message.AgentRequest {
	undo := st.ProcessState.Undoing()
	upTo := st.StepIndex
	if undo {
		upTo++
	}
	previous := map[string]json.RawMessage{}
	for _, s := range st.Steps[:min(upTo, len(st.Steps))] {
		if len(s.Output) > 0 {
			previous[s.Name] = s.Output
		}
	}
	// The keys of the rounds the record is at: a new round only after an
	// operator retried a certain rejection (workflow.Machine.Resubmit).
	stepKey, undoKey := st.Keys(st.StepIndex)
	req := message.AgentRequest{
		V: message.Version, Kind: message.KindAgentRequest,
		OrderID: st.OrderID, Workflow: st.Workflow, Step: st.Step, StepIndex: st.StepIndex, Attempt: st.Attempt,
		CompleteBy:     st.CompleteBy,
		IdempotencyKey: stepKey,
		Input:          st.Input,
		Previous:       previous,
	}
	if undo {
		req.Action = message.Compensate
		req.EffectKey, req.IdempotencyKey = stepKey, undoKey
	}
	return req
}

// alert is the alert of kind about st; maxFailures is the threshold of
// its step's retry policy (workflow.Change.MaxFailures), zero for the
// deployment's.
func (a Actions) alert(kind alert.Kind, maxFailures int, st workflow.State, now time.Time) alert.Alert {
	if maxFailures == 0 {
		maxFailures = a.MaxFailures
	}
	return alert.Alert{
		Kind: kind, OrderID: st.OrderID, Workflow: st.Workflow, Step: st.Step, StepIndex: st.StepIndex,
		FailureCount: st.FailureCount, MaxFailures: maxFailures, Attempt: st.Attempt, State: st.ProcessState,
		LastError: st.LastError, At: now, CLI: a.CLI,
	}
}
