// Package esm holds what the local event source mappings, sqsbridge and
// streambridge, do alike, as Lambda's mappings do: call a handler the way
// the Lambda runtime does, name an event's region after its source's ARN,
// and poll until stopped.
package esm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Call runs h with ev, turning a panic into an error as the Lambda runtime
// turns it into a failed invocation.
func Call[E, R any](ctx context.Context, h func(context.Context, E) (R, error), ev E) (resp R, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h(ctx, ev)
}

// Validate reports every problem of a mapping's configuration at once, as
// one error naming the mapping and its source, or nil: first those every
// mapping can have, no client and no handler (client and handler say
// whether it has them), then its own.
func Validate(mapping, source string, client, handler bool, own ...error) error {
	var errs []error
	if !client {
		errs = append(errs, errors.New("no Client"))
	}
	if !handler {
		errs = append(errs, errors.New("no Handler"))
	}
	if err := errors.Join(append(errs, own...)...); err != nil {
		return fmt.Errorf("%s for %q: %w", mapping, source, err)
	}
	return nil
}

// ARNRegion returns the region of arn:partition:service:region:account:resource,
// or "" if arn is not an ARN.
func ARNRegion(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return ""
	}
	return parts[3]
}

// Loop calls poll until ctx is done, waiting after each call as long as it
// returns. A poll that ctx ended should report nothing, as the mapping is
// stopping, not failing.
func Loop(ctx context.Context, poll func(context.Context) (pause time.Duration)) {
	for ctx.Err() == nil {
		pause := poll(ctx)
		if pause <= 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}
