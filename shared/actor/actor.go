// Package actor holds what every actor (Submission, Scheduler, Agent,
// Supervisor, Notifier) takes besides its Config and its ports: the clock
// and the logger, with their defaults in this one place.
package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/shared/clock"
)

// Deps are an actor's dependencies that are not ports: a test swaps them,
// but no AWS service stands behind them. The zero value is ready to use.
type Deps struct {
	// Clock is where every deadline and timestamp is read; nil means the
	// system clock.
	Clock clock.Clock
	// Log receives the actor's JSON log lines; nil discards them.
	Log *slog.Logger
}

// WithDefaults returns d with every nil dependency replaced by its
// default, so no actor checks for nil itself.
func (d Deps) WithDefaults() Deps {
	if d.Clock == nil {
		d.Clock = clock.System{}
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return d
}

// Port is one port an actor's New needs, by the name a problem calls it.
type Port struct {
	Name  string
	Value any
}

// Check joins cfgErr (the Config's Validate) with a problem for every nil
// port, so New reports all that is wrong at once.
func Check(actorName string, cfgErr error, ports ...Port) error {
	errs := []error{cfgErr}
	for _, p := range ports {
		if p.Value == nil {
			errs = append(errs, fmt.Errorf("%s: New needs a %s", actorName, p.Name))
		}
	}
	return errors.Join(errs...)
}

// RequestID is the Lambda invocation's request ID, "" outside Lambda.
func RequestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}

// InvocationLog returns log with the invocation's requestId, when ctx
// carries one, so every line of one invocation can be found together.
func InvocationLog(ctx context.Context, log *slog.Logger) *slog.Logger {
	if id := RequestID(ctx); id != "" {
		return log.With(slog.String("requestId", id))
	}
	return log
}

// BatchItemFailed is the msg of the one line an SQS or stream handler logs
// for each record it reports as a batch item failure, with the record's
// messageId or sequenceNumber, a reason and the error: at WARN when the
// retry may succeed, at ERROR when it cannot (poison, a panic). The stack
// counts these lines into its BatchItemFailures metric.
const BatchItemFailed = "record reported as a batch item failure"

// RecordSkipped begins the msg of the ERROR line a stream handler logs for
// a record it skips as poison (its image unreadable, or no valid event in
// it): retrying could never succeed, so the record is passed over. The
// stack counts the Notifier's into its skipped-records metric.
const RecordSkipped = "poison stream record skipped"
