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
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/recovery"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Store is the part of the state store the Supervisor uses.
type Store interface {
	Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error)
	Recover(ctx context.Context, seen workflow.State, r workflow.Recovery, now time.Time) (workflow.State, error)
	AlertSent(ctx context.Context, orderID string, attempt int, now time.Time) error
}

var _ Store = (*statestore.Store)(nil)

// Config is the Supervisor's configuration.
type Config struct {
	OrdersTable       string
	StateTable        string
	SchedulerQueueURL string
	AlertTopicARN     string
	Workflow          workflow.Definition
	Policy            workflow.Policy
	// BatchLimit caps the records read per GSI shard in one run.
	BatchLimit int
	// OperatorAPIURL is the HTTP API the operators' CLI talks to, named in
	// alerts' ready-to-run commands; optional.
	OperatorAPIURL string
}

// LoadConfig reads ORDERS_TABLE, STATE_TABLE, SCHEDULER_QUEUE_URL,
// ALERT_TOPIC_ARN and the optional MAX_FAILURES, CLAIM_TIMEOUT,
// BACKOFF_BASE, BACKOFF_MAX, ALERT_TIMEOUT, BATCH_LIMIT and OPERATOR_API_URL.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	cfg := Config{
		OrdersTable:       r.String("ORDERS_TABLE"),
		StateTable:        r.String("STATE_TABLE"),
		SchedulerQueueURL: r.URL("SCHEDULER_QUEUE_URL"),
		AlertTopicARN:     r.String("ALERT_TOPIC_ARN"),
		BatchLimit:        r.Int("BATCH_LIMIT", 200, 1, 10000),
		OperatorAPIURL:    r.StringOr("OPERATOR_API_URL", ""),
		Workflow:          workflow.Default(),
	}
	cfg.Policy = workflow.LoadPolicy(r)
	if err := cfg.Policy.Validate(); err != nil {
		r.Fail("%v", err)
	}
	return cfg, r.Err()
}

// Sender puts a message on an SQS queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

// Report counts what one run did; each expired record lands in exactly one
// count (or in none when it was not due after all).
type Report struct {
	Expired, Retried, GaveUp, Requeued, AlertsResent, Lost, Failed int
}

// Handler runs the Supervisor.
type Handler struct {
	cfg      Config
	store    Store
	clk      clock.Clock
	log      *slog.Logger
	recovery recovery.Actions
}

// New returns a Handler. cfg must be valid.
func New(cfg Config, store Store, send Sender, alerts alert.Sender, clk clock.Clock, log *slog.Logger) *Handler {
	return &Handler{cfg: cfg, store: store, clk: clk, log: log, recovery: recovery.Actions{
		Send: send, SchedulerQueueURL: cfg.SchedulerQueueURL, Alerts: alerts, Confirm: store,
		MaxFailures: cfg.Policy.MaxFailures, CLI: alert.CLI(cfg.OperatorAPIURL),
	}}
}

// Handle is the entry point for the EventBridge schedule. The event carries
// nothing the Supervisor needs beyond the fact that it fired.
func (h *Handler) Handle(ctx context.Context, ev events.EventBridgeEvent) error {
	log := h.log
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("requestId", lc.AwsRequestID)
	}
	rep, err := h.Run(ctx, log)
	if err != nil {
		return err
	}
	log.Info("supervisor run", "expired", rep.Expired, "retried", rep.Retried, "gaveUp", rep.GaveUp,
		"requeued", rep.Requeued, "alertsResent", rep.AlertsResent, "lostRace", rep.Lost, "failed", rep.Failed)
	if rep.Failed > 0 {
		// Surface partial failure as a Lambda error so the error alarm sees it;
		// the next run retries the records.
		return fmt.Errorf("supervisor: %d of %d expired records not recovered", rep.Failed, rep.Expired)
	}
	return nil
}

// Run recovers every expired record it finds now.
func (h *Handler) Run(ctx context.Context, log *slog.Logger) (Report, error) {
	now := h.clk.Now()
	expired, err := h.store.Expired(ctx, now, h.cfg.BatchLimit)
	if err != nil {
		return Report{}, fmt.Errorf("supervisor: list expired records: %w", err)
	}
	rep := Report{Expired: len(expired)}
	for _, seen := range expired {
		h.recover(ctx, seen, now, &rep, log.With("orderId", seen.OrderID, "step", seen.Step, "attempt", seen.Attempt))
	}
	return rep, nil
}

func (h *Handler) recover(ctx context.Context, seen workflow.State, now time.Time, rep *Report, log *slog.Logger) {
	r := h.cfg.Policy.Recover(h.cfg.Workflow, seen, now)
	if r.Kind == workflow.Skip {
		return
	}
	st, err := h.store.Recover(ctx, seen, r, now)
	if errors.Is(err, workflow.ErrStale) {
		// Another Supervisor, or a Scheduler committing in time, got there
		// first.
		rep.Lost++
		log.Info("record moved on; left alone", "decision", r.Kind)
		return
	}
	if err != nil {
		rep.Failed++
		log.Error("recover failed", "decision", r.Kind, "error", err)
		return
	}
	out, err := h.recovery.Carry(ctx, st, r, now, log)
	if err != nil {
		// The record has a new CompleteBy; a later run re-sends it once
		// that passes. Each record counts in one bucket only.
		rep.Failed++
		return
	}
	switch out {
	case recovery.Retried:
		rep.Retried++
	case recovery.Requeued:
		rep.Requeued++
	case recovery.Compensating, recovery.GaveUp:
		rep.GaveUp++
	case recovery.AlertResent:
		rep.AlertsResent++
	}
}
