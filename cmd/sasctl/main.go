// Command sasctl is the operators' CLI of the system's HTTP API: list orders
// by state, show one with its step history and timeline, resubmit a failed
// one, cancel one in flight; of its dead-letter queues, which it reads and
// redrives through SQS directly; and of the upgrade that stamps older
// orders with their owner's unique ID, through DynamoDB and IAM directly.
// See package opsclient for the commands. Requests to the API are always SigV4-signed; against the local
// stack, without AWS credentials, as the access key local-operator.
//
//	go install github.com/sasflow/sas/cmd/sasctl@latest
//	sasctl --endpoint-url https://abc123.execute-api.eu-west-1.amazonaws.com list --state Error
//	sasctl --endpoint-url http://127.0.0.1:8080 show ORDER_ID
//	sasctl --region eu-west-1 dlq list --stage dev
//	sasctl --region eu-west-1 owners stamp --orders-table T --state-table S --dry-run
//	sasctl --endpoint-url https://abc123.execute-api.eu-west-1.amazonaws.com ui --stage dev
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/sasflow/sas/internal/console"
	"github.com/sasflow/sas/internal/opsclient"
)

func main() {
	// Ctrl-C cancels the request in flight, and a paging --all, cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, program(os.Args[0]))
	stop()
	os.Exit(code)
}

// run hands the process's arguments, environment and streams to the CLI.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, prog string) int {
	return opsclient.Run(ctx, args, opsclient.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr, Program: prog, Version: version(), UI: console.Run})
}

// version is the module version `go install ...@version` built this binary
// from; "(devel)" for a build from a checkout.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return ""
}

// program names this command in the follow-up commands it prints: under
// `go run` (a binary in a go-build temporary directory) as the alerts name
// it, else as installed.
func program(arg0 string) string {
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") {
		return "go run ./cmd/sasctl"
	}
	return "sasctl"
}
