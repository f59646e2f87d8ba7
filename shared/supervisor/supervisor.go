// Package supervisor is the Supervisor of the pattern: on a schedule it finds
// records whose CompleteBy passed and either hands the step back to the
// Scheduler, gives up on it with an alert, or re-sends what was lost.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Store is the part of the state store the Supervisor uses: it finds the
// records whose CompleteBy passed and applies what the workflow's Machine
// decides for each.
type Store interface {
	Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error)
	Apply(ctx context.Context, c workflow.Change) (workflow.State, error)
}

var _ Store = (*statestore.Store)(nil)

// Config is the Supervisor's configuration. Validate holds every rule;
// LoadConfig reads it from the environment and applies the same rules.
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

// DefaultBatchLimit is BATCH_LIMIT when it is unset: a run reads at most
// this many expired records per GSI shard, and the next run the rest.
const DefaultBatchLimit = 200

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = map[string]string{
	"OrdersTable":       "ORDERS_TABLE",
	"StateTable":        "STATE_TABLE",
	"SchedulerQueueURL": "SCHEDULER_QUEUE_URL",
	"AlertTopicARN":     "ALERT_TOPIC_ARN",
	"BatchLimit":        "BATCH_LIMIT",
	"OperatorAPIURL":    "OPERATOR_API_URL",
}

// LoadConfig reads ORDERS_TABLE, STATE_TABLE, SCHEDULER_QUEUE_URL,
// ALERT_TOPIC_ARN, the optional BATCH_LIMIT and OPERATOR_API_URL, and the
// policy variables of workflow.LoadPolicy, and reports every problem at
// once, named by its variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	// The reader only parses; every rule is Validate's.
	cfg := Config{
		OrdersTable:       r.StringOr("ORDERS_TABLE", ""),
		StateTable:        r.StringOr("STATE_TABLE", ""),
		SchedulerQueueURL: r.StringOr("SCHEDULER_QUEUE_URL", ""),
		AlertTopicARN:     r.StringOr("ALERT_TOPIC_ARN", ""),
		BatchLimit:        r.Int("BATCH_LIMIT", DefaultBatchLimit, math.MinInt, math.MaxInt),
		OperatorAPIURL:    r.StringOr("OPERATOR_API_URL", ""),
		Workflow:          workflow.Default(),
		Policy:            workflow.LoadPolicy(r),
	}
	names := maps.Clone(variables)
	maps.Copy(names, workflow.PolicyVariables)
	if err := cfg.check(&config.Rules{Names: names}, r.Err()); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return c.check(&config.Rules{}, nil) }

// check applies the rules after the parse errors of LoadConfig, if any.
func (c Config) check(r *config.Rules, parsed error) error {
	r.Add(parsed)
	r.Tables("OrdersTable", c.OrdersTable, "StateTable", c.StateTable)
	r.URL("SchedulerQueueURL", c.SchedulerQueueURL)
	r.TopicARN("AlertTopicARN", c.AlertTopicARN)
	r.Count("BatchLimit", c.BatchLimit, 1, 10000)
	if c.OperatorAPIURL != "" {
		r.URL("OperatorAPIURL", c.OperatorAPIURL)
	}
	r.Add(c.Workflow.Validate())
	c.Policy.Check(r)
	return r.Err("supervisor config")
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
	machine  workflow.Machine
	followup followup.Actions
}

// New returns a Handler, or every problem of cfg and the ports at once.
func New(cfg Config, store Store, send Sender, alerts alert.Sender, deps actor.Deps) (*Handler, error) {
	err := actor.Check("supervisor", cfg.Validate(), actor.Port{Name: "Store", Value: store},
		actor.Port{Name: "Sender", Value: send}, actor.Port{Name: "alert.Sender", Value: alerts})
	if err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	return &Handler{cfg: cfg, store: store, clk: deps.Clock, log: deps.Log,
		machine: workflow.Machine{Def: cfg.Workflow, Policy: cfg.Policy},
		followup: followup.Actions{
			Send: send, SchedulerQueueURL: cfg.SchedulerQueueURL, Alerts: alerts, Confirm: store,
			MaxFailures: cfg.Policy.MaxFailures, CLI: alert.CLI(cfg.OperatorAPIURL),
		}}, nil
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
	c, due := h.machine.Expired(seen, now)
	if !due {
		return
	}
	st, err := h.store.Apply(ctx, c)
	if errors.Is(err, workflow.ErrStale) {
		// Another Supervisor, or a Scheduler committing in time, got there
		// first.
		rep.Lost++
		log.Info("record moved on; left alone", "decision", c.Transition)
		return
	}
	if err != nil {
		rep.Failed++
		log.Error("recover failed", "decision", c.Transition, "error", err)
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
	case "":
		rep.AlertsResent++
	default:
		rep.GaveUp++
	}
}
