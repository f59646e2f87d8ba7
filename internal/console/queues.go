package console

import (
	"context"

	"github.com/sasflow/sas/internal/dlq"
)

// SQSQueues are the dead-letter queues of a scope (a deployed stage, or
// the local stack's prefix), read and redriven through SQS as `sasctl
// dlq` does.
type SQSQueues struct {
	Client dlq.Client
	Scope  dlq.Scope
}

var _ Queues = SQSQueues{}

// Discover lists the scope's work queues that have a DLQ.
func (q SQSQueues) Discover(ctx context.Context) ([]dlq.Pair, error) {
	return dlq.Discover(ctx, q.Client, q.Scope)
}

// Peek reads a DLQ's messages without consuming them.
func (q SQSQueues) Peek(ctx context.Context, p dlq.Pair, limit int) ([]dlq.Message, error) {
	return dlq.Peek(ctx, q.Client, p.DLQ, limit)
}

// Redrive starts a message move task, or copies where the endpoint has
// none (dlq.Auto), at SQS's own rate.
func (q SQSQueues) Redrive(ctx context.Context, p dlq.Pair) (Redriven, error) {
	copied := false
	m, err := dlq.Auto{Task: dlq.MoveTask{Client: q.Client}, Copy: dlq.Copy{Client: q.Client}, Fallback: func(error) { copied = true }}.Move(ctx, p, 0)
	return Redriven{Copied: copied, Count: m.Count, Task: m.TaskHandle}, err
}
