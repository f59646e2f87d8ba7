package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sasflow/sas/internal/console"
	"github.com/sasflow/sas/internal/localstack"
)

// startConsole serves the operators' console on st until ctx ends, printing
// its URL; the channel closes once it has stopped.
func startConsole(ctx context.Context, st *localstack.Stack, region string, out io.Writer) (<-chan struct{}, error) {
	o, err := st.ConsoleOptions(region)
	if err != nil {
		return nil, err
	}
	ready, done := make(chan string, 1), make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(done)
		errs <- console.Serve(ctx, "127.0.0.1:0", o, func(u string) { ready <- u })
	}()
	select {
	case u := <-ready:
		fmt.Fprintf(out, "operators' console (sasctl ui): %s\n(its token opens one session, once; for another, run the stack's sasctl ui command, which prints a new URL)\n", u)
		return done, nil
	case err := <-errs:
		return nil, err
	}
}
