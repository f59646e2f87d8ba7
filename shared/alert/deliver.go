package alert

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

// Sender publishes an alert; *Publisher is one.
type Sender interface {
	Publish(ctx context.Context, a Alert) error
}

var _ Sender = (*Publisher)(nil)

// Confirmer records in the state store that an order's alert went out, by
// applying workflow.Machine.AlertSent.
type Confirmer interface {
	Apply(ctx context.Context, c workflow.Change) (workflow.State, error)
}

// Deliver publishes the alerts of a record that owes them
// (workflow.AlertsOf: one, or two about one Attempt) and confirms them in
// the store once all went out. Failures are logged, not returned: the
// record keeps AlertPending and the Supervisor publishes them again once
// AlertTimeout passes. A crash between publish and confirm sends them
// twice, which the alertId attribute lets subscribers de-duplicate.
func Deliver(ctx context.Context, s Sender, c Confirmer, alerts []Alert, now time.Time, log *slog.Logger) {
	if len(alerts) == 0 {
		return
	}
	for _, a := range alerts {
		if err := s.Publish(ctx, a); err != nil {
			log.Warn("alert not published; the Supervisor will retry", slog.Any("kind", a.Kind), slog.Any("error", err))
			return
		}
	}
	a := alerts[0]
	if _, err := c.Apply(ctx, workflow.Machine{}.AlertSent(a.OrderID, a.Attempt, a.State, now)); err != nil && !errors.Is(err, workflow.ErrStale) {
		log.Warn("alert published but not confirmed; it may be sent again", slog.Any("error", err))
	}
}
