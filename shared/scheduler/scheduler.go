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
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/recovery"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Store is the part of the state store the Scheduler writes.
type Store interface {
	Claim(ctx context.Context, c statestore.Claim) (workflow.State, error)
	Recover(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error)
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

// Redeliverer brings a failed message back after a wait of the handler's
// choosing instead of the queue's visibility timeout.
type Redeliverer interface {
	After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error
}

var (
	_ Store       = (*statestore.Store)(nil)
	_ Redeliverer = (*queue.Redeliverer)(nil)
)

// Handler processes the Scheduler queue (schedule messages) and the response
// queue (Agent replies); one Lambda consumes both.
type Handler struct {
	cfg       Config
	store     Store
	send      Sender
	alerts    alert.Sender
	clk       clock.Clock
	log       *slog.Logger
	redeliver Redeliverer
	recovery  recovery.Actions
}

// Option changes a Handler built by New.
type Option func(*Handler)

// WithRedelivery brings a message that failed for a reason that may pass
// (a throttled or unreachable store or queue) back within seconds, so a
// reply can still be committed before its step's CompleteBy; without it the
// message waits out the queue's visibility timeout.
func WithRedelivery(r Redeliverer) Option { return func(h *Handler) { h.redeliver = r } }

// New returns a Handler. cfg must be valid.
func New(cfg Config, store Store, send Sender, alerts alert.Sender, clk clock.Clock, log *slog.Logger, opts ...Option) *Handler {
	h := &Handler{cfg: cfg, store: store, send: send, alerts: alerts, clk: clk, log: log}
	h.recovery = recovery.Actions{Send: send, SchedulerQueueURL: cfg.SchedulerQueueURL, Alerts: alerts, Confirm: store,
		MaxFailures: cfg.Policy.MaxFailures, CLI: alert.CLI(cfg.OperatorAPIURL)}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle processes every record of the batch and reports the ones to
// redeliver. A record is reported when a retry can help (a store or queue
// error), and then comes back within seconds, or when it is poison, which the
// redrive policy then moves to the dead-letter queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	for _, rec := range ev.Records {
		log := h.log.With("requestId", requestID, "messageId", rec.MessageId)
		err := h.handleRecord(ctx, rec, requestID, log)
		if err == nil {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		if errors.Is(err, message.ErrPoison) {
			log.Error("record failed; left for redelivery", "error", err)
			alert.PoisonOnLastReceive(ctx, h.alerts, rec, err, h.cfg.MaxReceiveCount, h.clk.Now(), log)
			continue
		}
		wait := queue.RedeliveryDelay(queue.ReceiveCount(rec))
		var ra *retryAfter
		if errors.As(err, &ra) {
			wait = ra.wait
		}
		log.Warn("record failed; redelivered soon", "error", err, "in", wait)
		if h.redeliver != nil {
			if rerr := h.redeliver.After(ctx, rec, wait); rerr != nil {
				log.Warn("redelivery not brought forward; the queue's visibility timeout applies", "error", rerr)
			}
		}
	}
	return resp, nil
}

// retryAfter asks Handle to bring the message back after wait rather than
// the usual redelivery delay.
type retryAfter struct {
	err  error
	wait time.Duration
}

func (e *retryAfter) Error() string { return e.err.Error() }
func (e *retryAfter) Unwrap() error { return e.err }

func (h *Handler) handleRecord(ctx context.Context, rec events.SQSMessage, requestID string, log *slog.Logger) error {
	kind, err := message.Peek(rec.Body)
	if err != nil {
		return err
	}
	switch kind {
	case message.KindSchedule:
		m, err := message.DecodeSchedule(rec.Body)
		if err != nil {
			return err
		}
		return h.schedule(ctx, m, owner(requestID, rec.MessageId), log)
	case message.KindAgentReply:
		m, err := message.DecodeAgentReply(rec.Body)
		if err != nil {
			return err
		}
		return h.reply(ctx, m, owner(requestID, rec.MessageId), log)
	}
	return fmt.Errorf("%w: the Scheduler does not take %q messages", message.ErrPoison, kind)
}

// owner names the invocation that holds a claim: the Lambda request and the
// message it was handling.
func owner(requestID, messageID string) string {
	if requestID == "" {
		requestID = "local"
	}
	return "scheduler/" + requestID + "/" + messageID
}

func (h *Handler) schedule(ctx context.Context, m message.Schedule, owner string, log *slog.Logger) error {
	log = log.With("orderId", m.OrderID, "stepIndex", m.StepIndex, "reason", m.Reason, "compensate", m.Compensate)
	if m.StepIndex >= len(h.cfg.Workflow.Steps) {
		return fmt.Errorf("%w: step %d outside workflow %q", message.ErrPoison, m.StepIndex, h.cfg.Workflow.Name)
	}
	step := h.cfg.Workflow.Steps[m.StepIndex]
	if m.Compensate && !step.Compensable {
		return fmt.Errorf("%w: step %q of workflow %q has no compensation", message.ErrPoison, step.Name, h.cfg.Workflow.Name)
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
		return h.dispatchFailed(ctx, st, err, log)
	}
	return nil
}

// dispatchFailed hands back a claim whose request could not be sent: the
// failed dispatch counts as a failure of the step (workflow.Policy.
// DispatchFailed), retried after its backoff, or given up on at the
// threshold with an alert. A queue that refuses every request thus stops the
// order instead of cycling through claims forever. If even the hand-back
// cannot be written, the record stays claimed until its CompleteBy and the
// Supervisor counts the timeout; if it cannot be sent, the message that
// brought the claim comes back after the backoff.
func (h *Handler) dispatchFailed(ctx context.Context, st workflow.State, cause error, log *slog.Logger) error {
	now := h.clk.Now()
	r := h.cfg.Policy.DispatchFailed(h.cfg.Workflow, st, now, cause.Error())
	log.Warn("dispatch failed", "error", cause, "decision", r.Kind, "failureCount", r.FailureCount)
	written, err := h.store.Recover(ctx, st, r, now)
	if errors.Is(err, workflow.ErrStale) {
		log.Info("record moved on; left alone")
		return nil
	}
	if err != nil {
		return fmt.Errorf("hand back %s after a failed dispatch (%v): %w", st.OrderID, cause, err)
	}
	if _, err := h.recovery.Carry(ctx, written, r, now, log); err != nil {
		return &retryAfter{err: err, wait: max(r.Delay, time.Second)}
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
	req := message.AgentRequest{
		V: message.Version, Kind: message.KindAgentRequest,
		OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex, Attempt: st.Attempt,
		CompleteBy:     st.CompleteBy,
		IdempotencyKey: workflow.IdempotencyKey(st.OrderID, st.Step),
		Input:          st.Input,
		Previous:       previous,
	}
	if undo {
		req.Action = message.Compensate
		req.EffectKey = req.IdempotencyKey
		req.IdempotencyKey = workflow.CompensationKey(st.OrderID, st.Step)
	}
	if err := h.send.Send(ctx, queue, message.Encode(req), 0); err != nil {
		return fmt.Errorf("dispatch %s step %s attempt %d (compensate %v): %w", st.OrderID, st.Step, st.Attempt, undo, err)
	}
	return nil
}

// dispatchOrHandBack dispatches a record a commit just claimed. The commit
// stands, so redelivering the reply cannot help: a failed dispatch is handed
// back like a claim's (see dispatchFailed), and anything that fails after is
// left to the Supervisor.
func (h *Handler) dispatchOrHandBack(ctx context.Context, st workflow.State, log *slog.Logger) {
	if err := h.dispatch(ctx, st); err != nil {
		if err := h.dispatchFailed(ctx, st, err, log); err != nil {
			log.Warn("the Supervisor will recover the step", "error", err)
		}
	}
}

func (h *Handler) reply(ctx context.Context, m message.AgentReply, owner string, log *slog.Logger) error {
	log = log.With("orderId", m.OrderID, "step", m.Step, "attempt", m.Attempt)
	if m.StepIndex >= len(h.cfg.Workflow.Steps) || h.cfg.Workflow.Steps[m.StepIndex].Name != m.Step {
		return fmt.Errorf("%w: step %d %q is not in workflow %q", message.ErrPoison, m.StepIndex, m.Step, h.cfg.Workflow.Name)
	}
	now := h.clk.Now()
	if limit := h.cfg.Workflow.Steps[m.StepIndex].OutputLimit(); m.Outcome == message.Succeeded && len(m.Output) > limit {
		// Too large to carry in later requests or to keep in the record:
		// refused here, where it enters the state, whatever the agent
		// checked. An undo happened all the same, so it still commits,
		// without its output; a step's remote applied it, so its failure is
		// uncertain and it is undone with the others.
		log.Warn("output over the step's limit", "bytes", len(m.Output), "limit", limit, "compensate", m.Action.Undo())
		if !m.Action.Undo() {
			m.Outcome = message.Failed
			m.Fault = &message.Fault{Code: message.FaultOutputTooLarge, Message: workflow.OutputTooLarge(m.Step, len(m.Output), limit), Uncertain: true}
		}
		m.Output = nil
	}
	if m.Action.Undo() {
		return h.undone(ctx, m, owner, now, log)
	}
	if m.Outcome == message.Failed {
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
	h.dispatchOrHandBack(ctx, st, log)
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
func (h *Handler) undone(ctx context.Context, m message.AgentReply, owner string, now time.Time, log *slog.Logger) error {
	log = log.With("compensate", true)
	if m.Outcome == message.Failed {
		msg := "compensation " + FailureMessage(*m.Fault)
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
	h.dispatchOrHandBack(ctx, st, log)
	return nil
}

func (h *Handler) alertFor(kind alert.Kind, st workflow.State, now time.Time) alert.Alert {
	return alert.Alert{
		Kind: kind, OrderID: st.OrderID, Step: st.Step, StepIndex: st.StepIndex,
		FailureCount: st.FailureCount, MaxFailures: h.cfg.Policy.MaxFailures, Attempt: st.Attempt,
		LastError: st.LastError, At: now, CLI: alert.CLI(h.cfg.OperatorAPIURL),
	}
}

// FailureMessage is the LastError of a step an agent reported failed.
func FailureMessage(f message.Fault) string {
	msg := f.Code + ": " + f.Message
	if f.Uncertain {
		msg += " (outcome uncertain: the remote may have applied it)"
	}
	return msg
}

// fail commits a permanent fault: the order's compensation starts (claimed
// in the same write and dispatched) when a completed step must be undone,
// else the order is in Error and operators are alerted.
func (h *Handler) fail(ctx context.Context, m message.AgentReply, owner string, now time.Time, log *slog.Logger) error {
	msg := FailureMessage(*m.Fault)
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
		h.dispatchOrHandBack(ctx, st, log)
		return nil
	}
	log.Error("order failed permanently", workflow.TransitionFailed.Attr(), "fault", m.Fault.Code)
	alert.Deliver(ctx, h.alerts, h.store, h.alertFor(alert.KindPermanentFailure, st, now), now, log)
	return nil
}
