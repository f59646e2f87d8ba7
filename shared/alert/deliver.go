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

// Deliver publishes the alert of a record that owes one and confirms it in
// the store. Failures are logged, not returned: the record keeps
// AlertPending and the Supervisor publishes the alert once AlertTimeout
// passes. A crash between publish and confirm sends it twice, which the
// alertId attribute lets subscribers de-duplicate.
func Deliver(ctx context.Context, s Sender, c Confirmer, a Alert, now time.Time, log *slog.Logger) {
	if err := s.Publish(ctx, a); err != nil {
		log.Warn("alert not published; the Supervisor will retry", slog.Any("error", err))
		return
	}
	if _, err := c.Apply(ctx, workflow.Machine{}.AlertSent(a.OrderID, a.Attempt, a.State, now)); err != nil && !errors.Is(err, workflow.ErrStale) {
		log.Warn("alert published but not confirmed; it may be sent again", slog.Any("error", err))
	}
}
