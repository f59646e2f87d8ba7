// Package supervisor is the Supervisor of the pattern: on a schedule it finds
// records whose CompleteBy passed and either hands the step back to the
// Scheduler, gives up on it with an alert, or re-sends what was lost.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// Store is the part of the state store the Supervisor uses: it finds the
// records whose CompleteBy passed and applies what the workflow's Machine
// decides for each.
type Store interface {
	Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error)
	Apply(ctx context.Context, c workflow.Change) (workflow.State, error)
	// PeekHead reads one record without its steps, eventually consistent,
	// for a Deadline of the fast path: most find the record out of the
	// phase they were sent for. One still in it is read whole (GetState)
	// for its recovery, whose write is fenced anyway.
	PeekHead(ctx context.Context, orderID string) (workflow.State, error)
	GetState(ctx context.Context, orderID string) (workflow.State, error)
}

var _ Store = (*statestore.Store)(nil)

// Sender puts a message on an SQS queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

// Report counts what one run did; each expired record lands in exactly one
// count (or in none when it was not due after all).
type Report struct {
	Expired, Retried, GaveUp, Waited, Requeued, AlertsResent, Lost, Failed int
}

// Handler runs the Supervisor.
type Handler struct {
	cfg      Config
	store    Store
	clk      clock.Clock
	log      *slog.Logger
	followup followup.Actions
	// redeliver brings a Deadline back early (HandleDeadlines); optional.
	redeliver Redeliverer
}

// New returns a Handler, or every problem of cfg and the ports at once.
func New(cfg Config, store Store, send Sender, alerts alert.Sender, deps actor.Deps, opts ...Option) (*Handler, error) {
	err := actor.Check("supervisor", cfg.Validate(), actor.Port{Name: "Store", Value: store},
		actor.Port{Name: "Sender", Value: send}, actor.Port{Name: "alert.Sender", Value: alerts})
	if err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	h := &Handler{cfg: cfg, store: store, clk: deps.Clock, log: deps.Log,
		followup: cfg.Actions(send, alerts, store)}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Handle is the entry point for the EventBridge schedule. The event carries
// nothing the Supervisor needs beyond the fact that it fired.
func (h *Handler) Handle(ctx context.Context, ev events.EventBridgeEvent) error {
	log := actor.InvocationLog(ctx, h.log)
	rep, err := h.Run(ctx, log)
	if err != nil && rep.Expired == 0 {
		// An error line for the alarm: a sweep that cannot list leaves
		// every recovery to the fast path.
		log.Error("expired records not listed; the next run tries again", slog.Any("error", err))
		return err
	}
	log.Info("supervisor run", slog.Int("expired", rep.Expired), slog.Int("retried", rep.Retried), slog.Int("gaveUp", rep.GaveUp), slog.Int("waited", rep.Waited),
		slog.Int("requeued", rep.Requeued), slog.Int("alertsResent", rep.AlertsResent), slog.Int("lostRace", rep.Lost), slog.Int("failed", rep.Failed))
	if rep.Failed > 0 {
		// Surface partial failure as a Lambda error so the error alarm sees it;
		// the next run retries the records.
		err = errors.Join(err, fmt.Errorf("supervisor: %d of %d expired records not recovered", rep.Failed, rep.Expired))
	}
	return err
}

// Run recovers every expired record it finds now.
func (h *Handler) Run(ctx context.Context, log *slog.Logger) (Report, error) {
	now := h.clk.Now()
	// A listing that failed in part still recovers what it found; the
	// error, returned after, makes the run fail for the alarm and the
	// asynchronous invocation's retry.
	expired, listErr := h.store.Expired(ctx, now, h.cfg.BatchLimit)
	if listErr != nil {
		listErr = fmt.Errorf("supervisor: list expired records: %w", listErr)
		if len(expired) == 0 {
			return Report{}, listErr
		}
		log.Warn("expired records listed in part; recovering those found", slog.Int("found", len(expired)), slog.Any("error", listErr))
	}
	rep := Report{Expired: len(expired)}
	for _, seen := range expired {
		rctx, rlog, span := trace.Begin(ctx, log.With(slog.String("orderId", seen.OrderID), slog.String("workflow", seen.Workflow), slog.String("step", seen.Step), slog.Int("attempt", seen.Attempt)), trace.Stored(seen.Trace), SegmentName)
		span.Annotate("order_id", seen.OrderID)
		h.recover(rctx, seen, now, &rep, rlog)
		span.End(false)
	}
	return rep, listErr
}

// SegmentName names a recovery the sweep makes in a recorded order's trace.
const SegmentName = "supervisor"

// decide is what recovering seen takes, by the workflow version it is
// pinned to; one the deployment does not run stops the order with an
// alert (workflow.Machine.Stranded) rather than leave it for every run to find.
func (h *Handler) decide(seen workflow.State, now time.Time, log *slog.Logger) (workflow.Change, bool) {
	mach, err := h.cfg.Machine(seen.Workflow)
	if err != nil {
		log.Error("the order's workflow version is not deployed", slog.Any("error", err))
		return workflow.Machine{Policy: h.cfg.Policy}.Stranded(seen, now)
	}
	return mach.Expired(seen, now)
}

func (h *Handler) recover(ctx context.Context, seen workflow.State, now time.Time, rep *Report, log *slog.Logger) {
	c, due := h.decide(seen, now, log)
	if !due {
		return
	}
	st, err := h.store.Apply(ctx, c)
	if errors.Is(err, workflow.ErrStale) {
		// Another Supervisor, or a Scheduler committing in time, got there
		// first.
		rep.Lost++
		log.Info("record moved on; left alone", slog.Any("decision", c.Transition))
		return
	}
	if err != nil {
		rep.Failed++
		log.Error("recover failed", slog.Any("decision", c.Transition), slog.Any("error", err))
		return
	}
	if err := h.followup.After(ctx, c, st, now, log); err != nil {
		// The record has a new CompleteBy; a later run re-sends it once
		// that passes. Each record counts in one bucket only.
		rep.Failed++
		return
	}
	switch c.Transition {
	case workflow.TransitionRetried:
		rep.Retried++
	case workflow.TransitionRequeued:
		rep.Requeued++
	case workflow.TransitionWaiting:
		rep.Waited++
	case "":
		rep.AlertsResent++
	default:
		rep.GaveUp++
	}
}
