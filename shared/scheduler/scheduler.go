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
	AlertSent(ctx context.Context, orderID string, attempt int, now time.Time) error
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
	log = log.With("orderId", m.OrderID, "stepIndex", m.StepIndex, "reason", m.Reason)
	if m.StepIndex >= len(h.cfg.Workflow.Steps) {
		return fmt.Errorf("%w: step %d outside workflow %q", messages.ErrPoison, m.StepIndex, h.cfg.Workflow.Name)
	}
	step := h.cfg.Workflow.Steps[m.StepIndex]
	now := h.clk.Now()
	st, err := h.store.Claim(ctx, statestore.Claim{
		OrderID: m.OrderID, StepIndex: m.StepIndex, Owner: owner,
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

// dispatch sends the claimed step of st to its Agent.
func (h *Handler) dispatch(ctx context.Context, st workflow.State) error {
	queue := h.cfg.AgentQueues[st.Step]
	previous := map[string]json.RawMessage{}
	for _, s := range st.Steps[:min(st.StepIndex, len(st.Steps))] {
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
	if err := h.send.Send(ctx, queue, messages.Encode(req), 0); err != nil {
		return fmt.Errorf("dispatch %s step %s attempt %d: %w", st.OrderID, st.Step, st.Attempt, err)
	}
	return nil
}

func (h *Handler) reply(ctx context.Context, m messages.AgentReply, owner string, log *slog.Logger) error {
	log = log.With("orderId", m.OrderID, "step", m.Step, "attempt", m.Attempt)
	if m.StepIndex >= len(h.cfg.Workflow.Steps) || h.cfg.Workflow.Steps[m.StepIndex].Name != m.Step {
		return fmt.Errorf("%w: step %d %q is not in workflow %q", messages.ErrPoison, m.StepIndex, m.Step, h.cfg.Workflow.Name)
	}
	now := h.clk.Now()
	if m.Outcome == messages.Failed {
		return h.fail(ctx, m, now, log)
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
	if err := h.dispatch(ctx, st); err != nil {
		// The reply is committed, so redelivering it cannot help: release the
		// next step and let the Supervisor re-send it once ClaimTimeout passes.
		if rerr := h.store.Release(ctx, st, h.clk.Now(), h.clk.Now().Add(h.cfg.Policy.ClaimTimeout)); rerr != nil {
			log.Warn("release after failed dispatch failed", "error", rerr)
		}
		log.Warn("dispatch of next step failed; the Supervisor will re-send it", "error", err)
	}
	return nil
}

func (h *Handler) fail(ctx context.Context, m messages.AgentReply, now time.Time, log *slog.Logger) error {
	msg := m.Fault.Code + ": " + m.Fault.Message
	st, err := h.store.Fail(ctx, statestore.Failure{
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
	log.Error("order failed permanently", workflow.TransitionFailed.Attr(), "fault", m.Fault.Code)
	a := alert.Alert{
		Kind: alert.KindPermanentFailure, OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex,
		FailureCount: st.FailureCount, MaxFailures: h.cfg.Policy.MaxFailures, Attempt: st.Attempt,
		LastError: st.LastError, At: now,
	}
	alert.Deliver(ctx, h.alerts, h.store, a, now, log)
	return nil
}
