package opsclient

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/sasflow/sas/internal/dlq"
)

// UIUsage is the help of the ui command, part of Usage.
const UIUsage = `  ui [--listen 127.0.0.1:PORT] [--stage S | --prefix P | --no-dlq] [--idle-timeout D]
                      a web console on this machine over the same API and
                      dead-letter queues, with the same credentials: the
                      orders needing a person, each order's steps and
                      timeline, retry, cancel and redrive behind a
                      confirmation. It listens on loopback only (default a
                      free port) and prints the URL to open, whose token
                      opens one session, once; the session ends after
                      --idle-timeout (30m) without a request, and a restart
                      prints a new URL. It logs refusals and actions to
                      stderr as JSON lines; --stage, --prefix and
                      --sqs-endpoint-url choose the queues as for dlq
`

// UISession is what `sasctl ui` hands the console: the API's client and
// the queues, built from the command line and the credential chain as the
// other commands build them.
type UISession struct {
	Client *Client
	// Endpoint is the API's base URL, for the page header.
	Endpoint string
	// SQS is nil with --no-dlq.
	SQS       dlq.Client
	Scope     dlq.Scope
	ScopeName string
	// Listen is the loopback host:port to serve on.
	Listen string
	// IdleTimeout ends a session without a request for this long.
	IdleTimeout time.Duration
	// Out gets the URL to open; Log the refusals and actions (stderr, as
	// JSON lines).
	Out io.Writer
	Log *slog.Logger
	Now func() time.Time
}

// DefaultIdleTimeout is how long a console session lasts without a
// request of the operator's, unless --idle-timeout says.
const DefaultIdleTimeout = 30 * time.Minute

// DefaultListen is where the console listens unless --listen says: a free
// port on the IPv4 loopback.
const DefaultListen = "127.0.0.1:0"

// runUI parses `ui ...`, builds the clients and runs the console
// (Env.UI) until ctx ends.
func runUI(ctx context.Context, g globals, args []string, env Env) error {
	sub := flag.NewFlagSet("ui", flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	g.register(sub)
	var f dlqFlags
	f.register(sub, "ui")
	listen := sub.String("listen", DefaultListen, "")
	noDLQ := sub.Bool("no-dlq", false, "")
	idle := sub.Duration("idle-timeout", DefaultIdleTimeout, "")
	pos, err := parseInterspersed(sub, args)
	if err != nil {
		return flagError(err)
	}
	if len(pos) > 0 {
		return usagef("ui takes no arguments, got %q", pos)
	}
	if err := f.check("list"); err != nil {
		return usageError{"ui: " + err.Error()}
	}
	if f.queue != "" {
		return usagef("ui: --queue is a flag of dlq; the console shows every queue")
	}
	if *noDLQ && (f.stage != "" || f.prefix != "" || f.endpoint != "") {
		return usagef("ui: --no-dlq excludes --stage, --prefix and --sqs-endpoint-url")
	}
	if *idle <= 0 {
		return usagef("ui: --idle-timeout %v: a session needs a positive idle timeout (Go's duration syntax: 30m, 2h)", *idle)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usagef("ui: --listen %q: %v", *listen, err)
	}
	if !IsLoopback(host) {
		return usagef("ui: --listen %s is not a loopback address: the console acts with your AWS credentials, so it serves this machine only", *listen)
	}
	if env.UI == nil {
		return errors.New("ui: this build of sasctl has no console")
	}
	s := UISession{Listen: *listen, IdleTimeout: *idle, Out: env.Stdout, Log: slog.New(slog.NewJSONHandler(env.Stderr, nil)), Now: env.Now}
	if s.Client, err = newCLIClient(ctx, g, env); err != nil {
		return err
	}
	s.Endpoint = s.Client.base.Redacted()
	if !*noDLQ {
		if s.SQS, err = newSQSClient(ctx, g, f, env); err != nil {
			return err
		}
		s.Scope, s.ScopeName = f.scope()
	}
	if err := env.UI(ctx, s); err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	return nil
}
