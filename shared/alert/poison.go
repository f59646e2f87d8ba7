package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/message"
)

// PoisonOnLastReceive raises a poison-message alert for rec when this is
// its last receive: the handler is about to report it failed, and the
// queue's redrive policy then moves it to the dead-letter queue. The operator
// hears why, with the message ID to find it there, not only that a DLQ is
// no longer empty. It reports whether it published; a failed publish is
// logged, and the DLQ alarm of the deployed stack still fires.
func PoisonOnLastReceive(ctx context.Context, s Sender, rec events.SQSMessage, cause error, maxReceives int, now time.Time, log *slog.Logger) bool {
	n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if s == nil || err != nil || maxReceives < 1 || n < maxReceives {
		return false
	}
	a := Alert{
		Kind: KindPoisonMessage, MessageID: rec.MessageId, At: now,
		LastError: fmt.Sprintf("%v (receive %d of %d from %s; the message is now in the dead-letter queue)", cause, n, maxReceives, rec.EventSourceARN),
	}
	// Name the order if the body says which, so the operator can look it up.
	var ref struct {
		OrderID string `json:"orderId"`
	}
	if json.Unmarshal([]byte(rec.Body), &ref) == nil && message.ValidOrderID(ref.OrderID) {
		a.OrderID = ref.OrderID
	}
	if err := s.Publish(ctx, a); err != nil {
		log.Error("poison alert not published; the DLQ alarm remains", slog.Any("error", err))
		return false
	}
	log.Error("poison message set aside; operators alerted", slog.String("alertId", a.ID()))
	return true
}
