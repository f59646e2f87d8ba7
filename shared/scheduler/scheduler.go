// Package scheduler is the Scheduler of the pattern: it claims Pending steps
// with a conditional write, dispatches them to their Agents, and commits the
// Agents' replies only while its claim (the Attempt) still holds.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/messages"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Store is the part of the state store the Scheduler writes.
type Store interface {
	Claim(ctx context.Context, c statestore.Claim) (workflow.State, error)
	Release(ctx context.Context, st workflow.State, now, claimBy time.Time) error
	Advance(ctx context.Context, a statestore.Advance) (workflow.State, error)
	Fail(ctx context.Context, f statestore.Failure) (workflow.State, error)
	Undone(ctx context.Context, u statestore.Undone) (workflow.State, error)
	FailCompensation(ctx context.Context, f statestore.Failure) (workflow.State, error)
	AlertSent(ctx context.Context, orderID string, attempt int, now time.Time) error
	GetState(ctx context.Context, orderID string) (workflow.State, error)
}

// Sender puts a message on an SQS queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

var _ Store = (*statestore.Store)(nil)

// Handler processes the Scheduler queue (schedule messages) and the response
// queue (Agent replies); one Lambda consumes both.
type Handler struct {
	cfg    Config
	store  Store
	send   Sender
	alerts alert.Sender
	clk    clock.Clock
	log    *slog.Logger
}

// New returns a Handler. cfg must be valid.
func New(cfg Config, store Store, send Sender, alerts alert.Sender, clk clock.Clock, log *slog.Logger) *Handler {
	return &Handler{cfg: cfg, store: store, send: send, alerts: alerts, clk: clk, log: log}
}

// Handle processes every record of the batch and reports the ones to
// redeliver. A record is reported when a retry can help (a store or queue
// error) or when it is poison, which the redrive policy then moves to the
// dead-letter queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	for _, rec := range ev.Records {
		log := h.log.With("requestId", requestID, "messageId", rec.MessageId)
		if err := h.handleRecord(ctx, rec, requestID, log); err != nil {
			level := slog.LevelWarn
			if errors.Is(err, messages.ErrPoison) {
				level = slog.LevelError
			}
			log.Log(ctx, level, "record failed; left for redelivery", "error", err)
			if errors.Is(err, messages.ErrPoison) {
				alert.PoisonOnLastReceive(ctx, h.alerts, rec, err, h.cfg.MaxReceiveCount, h.clk.Now(), log)
			}
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

func (h *Handler) handleRecord(ctx context.Context, rec events.SQSMessage, requestID string, log *slog.Logger) error {
	kind, err := messages.Peek(rec.Body)
	if err != nil {
		return err
	}
	switch kind {
	case messages.KindSchedule:
		m, err := messages.DecodeSchedule(rec.Body)
		if err != nil {
			return err
		}
		return h.schedule(ctx, m, owner(requestID, rec.MessageId), log)
	case messages.KindAgentReply:
		m, err := messages.DecodeAgentReply(rec.Body)
		if err != nil {
			return err
		}
		return h.reply(ctx, m, owner(requestID, rec.MessageId), log)
	}
	return fmt.Errorf("%w: the Scheduler does not take %q messages", messages.ErrPoison, kind)
}

// owner names the invocation that holds a claim: the Lambda request and the
// message it was handling.
func owner(requestID, messageID string) string {
	if requestID == "" {
		requestID = "local"
	}
	return "scheduler/" + requestID + "/" + messageID
}

func (h *Handler) schedule(ctx context.Context, m messages.Schedule, owner string, log *slog.Logger) error {
	log = log.With("orderId", m.OrderID, "stepIndex", m.StepIndex, "reason", m.Reason, "compensate", m.Compensate)
	if m.StepIndex >= len(h.cfg.Workflow.Steps) {
		return fmt.Errorf("%w: step %d outside workflow %q", messages.ErrPoison, m.StepIndex, h.cfg.Workflow.Name)
	}
	step := h.cfg.Workflow.Steps[m.StepIndex]
	if m.Compensate && !step.Compensable {
		return fmt.Errorf("%w: step %q of workflow %q has no compensation", messages.ErrPoison, step.Name, h.cfg.Workflow.Name)
	}
	now := h.clk.Now()
	st, err := h.store.Claim(ctx, statestore.Claim{
		OrderID: m.OrderID, StepIndex: m.StepIndex, Compensate: m.Compensate, Owner: owner,
		Now: now, CompleteBy: now.Add(step.Budget),
	})
	if errors.Is(err, workflow.ErrClaimLost) {
		// Another Scheduler holds it, or the message is a duplicate or stale.
		log.Info("claim lost")
		return nil
	}
	if err != nil {
		return err
	}
	log.Info("claimed", workflow.TransitionClaimed.Attr(), "step", st.Step, "attempt", st.Attempt, "completeBy", st.CompleteBy)
	if err := h.dispatch(ctx, st); err != nil {
		// Hand the step back so the redelivered schedule message can claim
		// it again; if even that fails the Supervisor recovers it after
		// CompleteBy.
		if rerr := h.store.Release(ctx, st, h.clk.Now(), h.clk.Now().Add(h.cfg.Policy.ClaimTimeout)); rerr != nil {
			log.Warn("release after failed dispatch failed", "error", rerr)
		}
		return err
	}
	return nil
}

// dispatch sends the claimed step of st, or its compensation, to its Agent.
// A compensation gets the outputs of its own step and of those before it:
// the per-step results kept in the state record say what to undo (the
// reservation to release, the charge to refund).
func (h *Handler) dispatch(ctx context.Context, st workflow.State) error {
	queue := h.cfg.AgentQueues[st.Step]
	undo := st.ProcessState == workflow.Compensating
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
	req := messages.AgentRequest{
		V: messages.Version, Kind: messages.KindAgentRequest,
		OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex, Attempt: st.Attempt,
		CompleteBy:     st.CompleteBy,
		IdempotencyKey: workflow.IdempotencyKey(st.OrderID, st.Step),
		Input:          st.Input,
		Previous:       previous,
	}
	if undo {
		req.Action = messages.Compensate
		req.EffectKey = req.IdempotencyKey
		req.IdempotencyKey = workflow.CompensationKey(st.OrderID, st.Step)
	}
	if err := h.send.Send(ctx, queue, messages.Encode(req), 0); err != nil {
		return fmt.Errorf("dispatch %s step %s attempt %d (compensate %v): %w", st.OrderID, st.Step, st.Attempt, undo, err)
	}
	return nil
}

// dispatchOrRelease dispatches a record a commit just claimed. The commit
// stands, so redelivering the reply cannot help: on failure the claim is
// released and the Supervisor re-sends it once ClaimTimeout passes.
func (h *Handler) dispatchOrRelease(ctx context.Context, st workflow.State, log *slog.Logger) {
	if err := h.dispatch(ctx, st); err != nil {
		if rerr := h.store.Release(ctx, st, h.clk.Now(), h.clk.Now().Add(h.cfg.Policy.ClaimTimeout)); rerr != nil {
			log.Warn("release after failed dispatch failed", "error", rerr)
		}
		log.Warn("dispatch failed; the Supervisor will re-send it", "error", err)
	}
}

func (h *Handler) reply(ctx context.Context, m messages.AgentReply, owner string, log *slog.Logger) error {
	log = log.With("orderId", m.OrderID, "step", m.Step, "attempt", m.Attempt)
	if m.StepIndex >= len(h.cfg.Workflow.Steps) || h.cfg.Workflow.Steps[m.StepIndex].Name != m.Step {
		return fmt.Errorf("%w: step %d %q is not in workflow %q", messages.ErrPoison, m.StepIndex, m.Step, h.cfg.Workflow.Name)
	}
	now := h.clk.Now()
	if m.Action.Undo() {
		return h.undone(ctx, m, owner, now, log)
	}
	if m.Outcome == messages.Failed {
		return h.fail(ctx, m, owner, now, log)
	}
	a := statestore.Advance{OrderID: m.OrderID, StepIndex: m.StepIndex, Attempt: m.Attempt, Now: now, Output: m.Output}
	if next := m.StepIndex + 1; next < len(h.cfg.Workflow.Steps) {
		step := h.cfg.Workflow.Steps[next]
		a.Next = &statestore.NextClaim{Step: step.Name, Owner: owner, CompleteBy: now.Add(step.Budget)}
	}
	st, err := h.store.Advance(ctx, a)
	if errors.Is(err, workflow.ErrStale) {
		log.Warn("stale reply dropped", workflow.TransitionStaleReply.Attr(), "outcome", m.Outcome)
		return nil
	}
	if err != nil {
		return err
	}
	if a.Next == nil {
		log.Info("order processed", workflow.TransitionProcessed.Attr())
		return nil
	}
	log.Info("step committed; next claimed", workflow.TransitionStepCompleted.Attr(), "next", st.Step, "nextAttempt", st.Attempt)
	h.dispatchOrRelease(ctx, st, log)
	return nil
}

// undoClaim is the claim of the compensation of step i, or nil for none.
func (h *Handler) undoClaim(i int, owner string, now time.Time) *statestore.UndoClaim {
	if i < 0 {
		return nil
	}
	step := h.cfg.Workflow.Steps[i]
	return &statestore.UndoClaim{StepIndex: i, Step: step.Name, Owner: owner, CompleteBy: now.Add(step.Budget)}
}

// undone commits a compensation's reply: the next compensation (claimed in
// the same write and dispatched), Compensated after the last, or
// CompensationFailed with an alert for a permanent fault.
func (h *Handler) undone(ctx context.Context, m messages.AgentReply, owner string, now time.Time, log *slog.Logger) error {
	log = log.With("compensate", true)
	if m.Outcome == messages.Failed {
		msg := "compensation " + m.Fault.Code + ": " + m.Fault.Message
		st, err := h.store.FailCompensation(ctx, statestore.Failure{
			OrderID: m.OrderID, StepIndex: m.StepIndex, Attempt: m.Attempt, Now: now,
			Error: msg, AlertBy: now.Add(h.cfg.Policy.AlertTimeout),
		})
		if errors.Is(err, workflow.ErrStale) {
			log.Warn("stale reply dropped", workflow.TransitionStaleReply.Attr(), "outcome", m.Outcome)
			return nil
		}
		if err != nil {
			return err
		}
		log.Error("compensation failed permanently; an operator must act", workflow.TransitionCompensationFailed.Attr(), "fault", m.Fault.Code)
		alert.Deliver(ctx, h.alerts, h.store, h.alertFor(alert.KindCompensationFailed, st, now), now, log)
		return nil
	}
	next := h.undoClaim(h.cfg.Workflow.NextCompensation(m.StepIndex), owner, now)
	st, err := h.store.Undone(ctx, statestore.Undone{
		OrderID: m.OrderID, StepIndex: m.StepIndex, Attempt: m.Attempt, Now: now, Output: m.Output, Next: next,
	})
	if errors.Is(err, workflow.ErrStale) {
		log.Warn("stale reply dropped", workflow.TransitionStaleReply.Attr(), "outcome", m.Outcome)
		return nil
	}
	if err != nil {
		return err
	}
	if next == nil {
		log.Info("order compensated", workflow.TransitionCompensated.Attr())
		return nil
	}
	log.Info("step undone; next compensation claimed", workflow.TransitionUndone.Attr(), "next", st.Step, "nextAttempt", st.Attempt)
	h.dispatchOrRelease(ctx, st, log)
	return nil
}

func (h *Handler) alertFor(kind alert.Kind, st workflow.State, now time.Time) alert.Alert {
	return alert.Alert{
		Kind: kind, OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex,
		FailureCount: st.FailureCount, MaxFailures: h.cfg.Policy.MaxFailures, Attempt: st.Attempt,
		LastError: st.LastError, At: now, CLI: alert.CLI(h.cfg.OperatorAPIURL),
	}
}

// fail commits a permanent fault: the order's compensation starts (claimed
// in the same write and dispatched) when a completed step must be undone,
// else the order is in Error and operators are alerted.
func (h *Handler) fail(ctx context.Context, m messages.AgentReply, owner string, now time.Time, log *slog.Logger) error {
	msg := m.Fault.Code + ": " + m.Fault.Message
	// The plan depends on the step's history (did an earlier attempt time
	// out?), so read the record; the write below is fenced by Attempt, so a
	// record that moved on since is refused, not overwritten.
	seen, err := h.store.GetState(ctx, m.OrderID)
	if err != nil {
		return fmt.Errorf("read %s before committing its failure: %w", m.OrderID, err)
	}
	f := statestore.Failure{
		OrderID: m.OrderID, StepIndex: m.StepIndex, Attempt: m.Attempt, Now: now,
		Error: msg, AlertBy: now.Add(h.cfg.Policy.AlertTimeout),
	}
	if seen.StepIndex == m.StepIndex {
		f.Undo = h.undoClaim(h.cfg.Workflow.StopAt(seen, workflow.StopPermanent).UndoFrom, owner, now)
	}
	st, err := h.store.Fail(ctx, f)
	if errors.Is(err, workflow.ErrStale) {
		log.Warn("stale reply dropped", workflow.TransitionStaleReply.Attr(), "outcome", m.Outcome)
		return nil
	}
	if err != nil {
		return err
	}
	if f.Undo != nil {
		log.Warn("step failed permanently; compensation claimed", workflow.TransitionCompensating.Attr(), "fault", m.Fault.Code,
			"undo", st.Step, "undoAttempt", st.Attempt)
		h.dispatchOrRelease(ctx, st, log)
		return nil
	}
	log.Error("order failed permanently", workflow.TransitionFailed.Attr(), "fault", m.Fault.Code)
	alert.Deliver(ctx, h.alerts, h.store, h.alertFor(alert.KindPermanentFailure, st, now), now, log)
	return nil
}
