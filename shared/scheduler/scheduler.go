// Package scheduler is the Scheduler of the pattern: it claims Pending steps
// with a conditional write, dispatches them to their Agents, and commits the
// Agents' replies only while its claim (the Attempt) still holds.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// Store is the part of the state store the Scheduler uses: it applies the
// changes the workflow's Machine decides, and works from the record each
// write returns. It reads a record only to end a compensation, which ends
// differently when a cancel started it (workflow.Machine.UndoCompleted).
type Store interface {
	Apply(ctx context.Context, c workflow.Change) (workflow.State, error)
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
	followup  followup.Actions
}

// Option changes a Handler built by New.
type Option func(*Handler)

// WithRedelivery brings a message that failed for a reason that may pass
// (a throttled or unreachable store or queue) back within seconds, so a
// reply can still be committed before its step's CompleteBy; without it the
// message waits out the queue's visibility timeout.
func WithRedelivery(r Redeliverer) Option { return func(h *Handler) { h.redeliver = r } }

// New returns a Handler, or every problem of cfg and the ports at once.
func New(cfg Config, store Store, send Sender, alerts alert.Sender, deps actor.Deps, opts ...Option) (*Handler, error) {
	err := actor.Check("scheduler", cfg.Validate(), actor.Port{Name: "Store", Value: store},
		actor.Port{Name: "Sender", Value: send}, actor.Port{Name: "alert.Sender", Value: alerts})
	if err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	h := &Handler{cfg: cfg, store: store, send: send, alerts: alerts, clk: deps.Clock, log: deps.Log,
		followup: cfg.Actions(send, alerts, store)}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// SegmentName names the Scheduler's segments in a recorded order's trace.
const SegmentName = "scheduler"

// Handle processes every record of the batch and reports the ones to
// redeliver. A record is reported when a retry can help (a store or queue
// error), and then comes back within seconds, or when it is poison, which the
// redrive policy then moves to the dead-letter queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	requestID := actor.RequestID(ctx)
	for _, rec := range ev.Records {
		ctx, log, span := trace.BeginSQS(ctx, h.log.With(slog.String("requestId", requestID), slog.String("messageId", rec.MessageId)), rec, SegmentName)
		err := h.handleRecord(ctx, rec, requestID, log)
		span.End(err != nil)
		if err == nil {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		if errors.Is(err, message.ErrPoison) {
			log.Error(actor.BatchItemFailed, slog.String("reason", "poison; left for redelivery towards the dead-letter queue"), slog.Any("error", err))
			alert.PoisonOnLastReceive(ctx, h.alerts, rec, err, h.cfg.MaxReceiveCount, h.clk.Now(), log)
			continue
		}
		wait := queue.RedeliveryDelay(queue.ReceiveCount(rec))
		var ra *retryAfter
		if errors.As(err, &ra) {
			wait = ra.wait
		}
		log.Warn(actor.BatchItemFailed, slog.String("reason", "record failed; redelivered soon"), slog.Any("error", err), slog.Duration("in", wait))
		if h.redeliver != nil {
			if rerr := h.redeliver.After(ctx, rec, wait); rerr != nil {
				log.Warn("redelivery not brought forward; the queue's visibility timeout applies", slog.Any("error", rerr))
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
		return h.reply(ctx, m, rec.Attributes[SenderIDAttr], owner(requestID, rec.MessageId), log)
	}
	return fmt.Errorf("%w: the Scheduler does not take %q messages", message.ErrPoison, kind)
}

// ReplyRefused is the message of the ERROR line of a reply not sent by its
// step's Agent; the stack's ErrorLogLines alarm counts it.
const ReplyRefused = "reply refused: not sent by its step's Agent"

// SenderIDAttr is the SQS message system attribute that names who sent a
// message: "For an IAM role, returns the IAM role ID, for example
// ABCDE1F2GH3I4JK5LMNOP:i-a123b456" (ReceiveMessage, Amazon SQS API
// Reference,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html);
// a Lambda function's role session is its function's. Lambda's SQS event
// carries it among a record's attributes.
const SenderIDAttr = "SenderId"

// fromItsAgent reports whether a reply about step was sent by the role of
// the step's Agent: the role ID of its SenderId, the part before ":", is
// that step's (Config.ReplySenders).
func (h *Handler) fromItsAgent(senderID, step string) bool {
	want := h.cfg.ReplySenders[step]
	id, _, _ := strings.Cut(senderID, ":")
	return want != "" && id == want
}

// owner names the invocation that holds a claim: the Lambda request and the
// message it was handling.
func owner(requestID, messageID string) string {
	if requestID == "" {
		requestID = "local"
	}
	return "scheduler/" + requestID + "/" + messageID
}

// machine is the state machine of the workflow version a message's order
// is pinned to. A version the deployment does not run (removed while
// orders were still on it) makes the message poison: it goes to the
// dead-letter queue with an alert, to be redriven once the version is
// deployed again.
func (h *Handler) machine(id string) (workflow.Machine, error) {
	m, err := h.cfg.Machine(id)
	if err != nil {
		return workflow.Machine{}, fmt.Errorf("%w: %w", message.ErrPoison, err)
	}
	return m, nil
}

func (h *Handler) schedule(ctx context.Context, m message.Schedule, owner string, log *slog.Logger) error {
	log = log.With(slog.String("orderId", m.OrderID), slog.String("workflow", m.WorkflowID()), slog.Int("stepIndex", m.StepIndex), slog.String("reason", m.Reason), slog.Bool("compensate", m.Compensate))
	mach, err := h.machine(m.WorkflowID())
	if err != nil {
		return err
	}
	def := mach.Def
	if m.StepIndex >= len(def.Steps) {
		return fmt.Errorf("%w: step %d outside workflow %q", message.ErrPoison, m.StepIndex, def.ID())
	}
	step := def.Steps[m.StepIndex]
	if m.Compensate && !step.Compensable {
		return fmt.Errorf("%w: step %q of workflow %q has no compensation", message.ErrPoison, step.Name, def.ID())
	}
	now := h.clk.Now()
	c := mach.Claim(m.OrderID, m.StepIndex, m.Compensate, owner, now)
	st, err := h.store.Apply(ctx, c)
	if errors.Is(err, workflow.ErrStale) {
		// Another Scheduler holds it, or the message is a duplicate or stale.
		log.Info("claim lost")
		return nil
	}
	if err != nil {
		return err
	}
	return h.followUp(ctx, mach, c, st, now, log)
}

// followUp carries out a committed change: its log line, alert and
// schedule message (followup.Actions), and the dispatch of the step or undo
// it claimed. A failed dispatch of a claim (the schedule path) may ask for
// its message back; anything else that fails after a commit is left to the
// Supervisor, since redelivering a committed reply cannot help.
func (h *Handler) followUp(ctx context.Context, mach workflow.Machine, c workflow.Change, st workflow.State, now time.Time, log *slog.Logger) error {
	// After logs its own failure (a hand-back not sent), which the
	// Supervisor repairs; the dispatch goes on regardless.
	_ = h.followup.After(ctx, c, st, now, log)
	if !c.Dispatch {
		return nil
	}
	if err := h.dispatch(ctx, st); err != nil {
		return h.dispatchFailed(ctx, mach, st, err, log)
	}
	return nil
}

// dispatchFailed hands back a claim whose request could not be sent, as the
// Machine decides (workflow.Machine.DispatchFailed): a failure of the step,
// retried after its backoff, or given up on at the threshold with an alert.
// A queue that refuses every request thus stops the order instead of cycling
// through claims forever. If the hand-back cannot be written, the record
// stays claimed until its CompleteBy and the Supervisor counts the timeout;
// if its schedule message cannot be sent, the message that brought the
// claim comes back after the backoff.
func (h *Handler) dispatchFailed(ctx context.Context, mach workflow.Machine, claimed workflow.State, cause error, log *slog.Logger) error {
	now := h.clk.Now()
	c := mach.DispatchFailed(claimed, now, cause.Error())
	log.Warn("dispatch failed", slog.Any("error", cause), slog.Any("decision", c.Transition))
	st, err := h.store.Apply(ctx, c)
	if errors.Is(err, workflow.ErrStale) {
		log.Info("record moved on; left alone")
		return nil
	}
	if err != nil {
		return fmt.Errorf("hand back %s after a failed dispatch (%v): %w", claimed.OrderID, cause, err)
	}
	if err := h.followup.After(ctx, c, st, now, log); err != nil {
		wait := time.Second
		if c.Handback != nil {
			wait = max(c.Handback.Delay, wait)
		}
		return &retryAfter{err: err, wait: wait}
	}
	return nil
}

// dispatch sends the claimed step of st, or its undo, to its Agent.
func (h *Handler) dispatch(ctx context.Context, st workflow.State) error {
	if err := h.send.Send(ctx, h.cfg.AgentQueues[st.Step], message.Encode(followup.Request(st)), 0); err != nil {
		return fmt.Errorf("dispatch %s step %s attempt %d (compensate %v): %w", st.OrderID, st.Step, st.Attempt, st.ProcessState.Undoing(), err)
	}
	return nil
}

// reply commits an Agent's reply as the Machine decides it: a success
// commits the step (or undo) and claims the next; a failure stops the order
// (or its compensation). A reply the record no longer waits for (a zombie
// agent, a duplicate, a reply after the Supervisor stepped in) fails its
// fence and is dropped.
func (h *Handler) reply(ctx context.Context, m message.AgentReply, senderID, owner string, log *slog.Logger) error {
	log = log.With(slog.String("orderId", m.OrderID), slog.String("workflow", m.WorkflowID()), slog.String("step", m.Step), slog.Int("attempt", m.Attempt), slog.Bool("compensate", m.Action.Undo()))
	mach, err := h.machine(m.WorkflowID())
	if err != nil {
		return err
	}
	def := mach.Def
	if m.StepIndex >= len(def.Steps) || def.Steps[m.StepIndex].Name != m.Step {
		return fmt.Errorf("%w: step %d %q is not in workflow %q", message.ErrPoison, m.StepIndex, m.Step, def.ID())
	}
	if !h.fromItsAgent(senderID, m.Step) {
		// Any principal allowed to send to the response queue could have
		// written it; whoever did is not the step's Agent. It is deleted
		// unread: a step it left uncommitted times out, and the
		// Supervisor retries it.
		log.Error(ReplyRefused, slog.String("senderId", senderID), slog.String("want", h.cfg.ReplySenders[m.Step]))
		return nil
	}
	now := h.clk.Now()
	// The limit of the order's own version: the agent checks the largest
	// of the versions it serves.
	if limit := def.Steps[m.StepIndex].OutputLimit(); m.Outcome == message.Succeeded && len(m.Output) > limit {
		// Too large to carry in later requests or to keep in the record:
		// refused here, where it enters the state, whatever the agent
		// checked. An undo happened all the same, so it still commits,
		// without its output; a step's remote applied it, so its failure is
		// uncertain and it is undone with the others.
		log.Warn("output over the step's limit", slog.Int("bytes", len(m.Output)), slog.Int("limit", limit))
		if !m.Action.Undo() {
			m.Outcome = message.Failed
			m.Fault = &message.Fault{Code: message.FaultOutputTooLarge, Message: workflow.OutputTooLarge(m.Step, len(m.Output), limit), Uncertain: true}
		}
		m.Output = nil
	}
	if m.Outcome == message.Failed {
		log = log.With(slog.String("faultCode", m.Fault.Code))
	}
	var seen workflow.State
	if m.Action.Undo() && (m.Outcome == message.Failed || mach.LastUndo(m.StepIndex)) {
		// The last undo ends the order, and a failed undo stops its
		// compensation; how depends on who stopped it, on whether it
		// still owes an alert and on the step whose effect it leaves
		// (LastError), which the record says and the reply does not. A
		// compensation's start is committed before its first undo is
		// dispatched, and Cancelled and that LastError never change
		// within an attempt of the undo, so the read cannot be too old; an
		// alert confirmed since the read leaves the ended record in the
		// Supervisor's index, which takes it out (workflow.Machine.Expired).
		var err error
		seen, err = h.store.GetState(ctx, m.OrderID)
		if errors.Is(err, workflow.ErrNotFound) {
			log.Warn(workflow.TransitionStaleReply.Message(), workflow.TransitionStaleReply.Attr(), slog.Any("outcome", m.Outcome), slog.String("reason", "no such order"))
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s to end its compensation: %w", m.OrderID, err)
		}
	}
	c := decide(mach, m, seen, owner, now)
	st, err := h.store.Apply(ctx, c)
	if errors.Is(err, workflow.ErrStale) {
		log.Warn(workflow.TransitionStaleReply.Message(), workflow.TransitionStaleReply.Attr(), slog.Any("outcome", m.Outcome))
		return nil
	}
	if err != nil {
		return err
	}
	if err := h.followUp(ctx, mach, c, st, now, log); err != nil {
		// The reply is committed: the claim it made is the Supervisor's
		// to recover now.
		log.Warn("the Supervisor will recover the step", slog.Any("error", err))
	}
	return nil
}

// decide is the change a reply asks for, by its order's version;
// seen is the record, read for the last undo and a failed undo only.
func decide(mach workflow.Machine, m message.AgentReply, seen workflow.State, owner string, now time.Time) workflow.Change {
	switch {
	case m.Action.Undo() && m.Outcome == message.Failed:
		return mach.UndoRejected(m.OrderID, m.StepIndex, m.Attempt, workflow.UndoRejectedPrefix+FailureMessage(*m.Fault), m.Fault.Uncertain, seen, now)
	case m.Action.Undo():
		return mach.UndoCompleted(m.OrderID, m.StepIndex, m.Attempt, m.Output, seen, owner, now)
	case m.Outcome == message.Failed:
		return mach.StepRejected(m.OrderID, m.StepIndex, m.Attempt, FailureMessage(*m.Fault), m.Fault.Uncertain, owner, now)
	}
	return mach.StepCompleted(m.OrderID, m.StepIndex, m.Attempt, m.Output, owner, now)
}

// FailureMessage is the LastError of a step an agent reported failed
// (workflow.RejectionMessage, which workflow.ReasonOf reads back).
func FailureMessage(f message.Fault) string {
	return workflow.RejectionMessage(f.Code, f.Message, f.Uncertain)
}
