package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/sasflow/sas/internal/localstack"
)

// measurement parses the flags of a measurement in the deployed timing
// (`local recovery`, `local load`), adding -log, and opens the handlers'
// log file and a context that Ctrl-C ends; done closes both.
func measurement(fs *flag.FlagSet, args []string) (ctx context.Context, logs *os.File, done func(), err error) {
	logPath := fs.String("log", "local.log", "file for the handlers' JSON logs")
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, err
	}
	logs, err = os.Create(*logPath)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx, logs, func() { stop(); logs.Close() }, nil
}

// onEngines points o at the engines scripts/engines.sh started.
func onEngines(o *localstack.Options) {
	o.DynamoDBEndpoint, o.AWSEndpoint = os.Getenv("SAS_TEST_DYNAMODB_ENDPOINT"), os.Getenv("SAS_TEST_AWS_ENDPOINT")
}
