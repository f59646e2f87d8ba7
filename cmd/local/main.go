// Command local runs the whole system on this machine against DynamoDB Local
// and fauxqs (scripts/engines.sh run -- ... starts them and sets
// SAS_TEST_DYNAMODB_ENDPOINT and SAS_TEST_AWS_ENDPOINT):
//
//	local demo  [-orders 300] [fault flags]   submit orders with faults on, show progress, summarize
//	            [-versions 2]                 two workflow versions at once
//	local chaos [-orders 300] [-seed n]       the demo with every fault at once, checking the invariants
//	local serve [-api 127.0.0.1:8080]         keep the stack running for curl and the AWS CLI
//	            [-ui]                         demo and serve: the operators' console (sasctl ui) on the stack
//
// `make demo`, `make chaos` and `make local` run it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/catalog"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "recovery" {
		return recovery(args[1:], out)
	}
	if len(args) > 0 && args[0] == "load" {
		return load(args[1:], out)
	}
	if len(args) == 0 || (args[0] != "demo" && args[0] != "chaos" && args[0] != "serve") {
		return errors.New("usage: local demo|chaos|serve|recovery|load [flags] (-h for the flags)")
	}
	mode := args[0]
	fs := flag.NewFlagSet("local "+mode, flag.ContinueOnError)
	o := localstack.DemoOptions()
	rates := map[chaos.Point]float64{}
	if mode == "chaos" {
		o = localstack.ChaosOptions()
		for p, r := range localstack.ChaosRates() {
			rates[p] = r
			fs.Func(string(p), fmt.Sprintf("chaos: rate of %s (default %v)", p, r), func(v string) error {
				f, err := strconv.ParseFloat(v, 64)
				rates[p] = f
				return err
			})
		}
	}
	orders := fs.Int("orders", 300, "demo: orders to submit")
	clients := fs.Int("clients", 8, "demo: concurrent clients")
	rate := fs.Float64("rate", 0, "demo: most orders submitted a second (0: as fast as the clients go)")
	timeout := fs.Duration("timeout", 5*time.Minute, "demo: give up after this long")
	// Chaos runs two by default, so its invariants cover a step without
	// an undo: the derived v2's ship-order.
	defVersions := 1
	if mode == "chaos" {
		defVersions = 2
	}
	versions := fs.Int("versions", defVersions, "demo: workflow versions run at once, 1 or 2 (2: every other order names the older version; a single deployed version gets a v2 with ship-order added, which has no undo); chaos runs 2 by default")
	plain := fs.Bool("plain", false, "demo: print progress as lines, not a redrawn bar (CI logs)")
	admit := fs.Bool("admission", true, "demo: the stack as deployed with the local capacity model (localstack.DemoCapacity, WithCapacity): the Submission sheds orders past its backlog (429, resubmitted after Retry-After), each step's queue wait is allowed for beyond its budget, the Scheduler is not the bottleneck; false runs the chaos run's settings, where the demo's own burst outlives the budgets")
	wait := fs.Bool("wait", false, fmt.Sprintf("demo: instead of -orders, one order whose waiting step (a retry policy with \"onExhausted\": \"wait\") keeps timing out until the order waits, its wait shortened to %v; then the remote heals and the order comes back and finishes", localstack.DemoRetryWait))
	ui := fs.Bool("ui", false, "demo and serve: start the operators' console (sasctl ui) on the stack and print its URL; the demo then keeps the stack and the console up until Ctrl-C")
	logPath := fs.String("log", "local.log", "file for the handlers' JSON logs")
	api := fs.String("api", "", "loopback address of the HTTP API (serve default 127.0.0.1:8080, demo a free port)")
	remote := fs.String("remote", "", "loopback address of the remote simulator (serve default 127.0.0.1:9090, demo a free port)")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the simulator's faults and of agent crashes (0: random)")
	fs.Float64Var(&o.Crash, "crash", o.Crash, "probability an Agent invocation is killed before it starts")
	budget := fs.Duration("budget", o.Workflows.Definitions[0].Steps[0].Budget, "time budget of every step (CompleteBy = claim + budget)")
	fs.DurationVar(&o.SuperviseEvery, "supervise-every", o.SuperviseEvery, "the Supervisor's schedule")
	faults := remotesim.FaultFlags(fs, o.Faults)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var err error
	if o.Faults, err = faults(); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	// Before Scaled, so that a derived step gets the -budget of the others.
	vers, err := localstack.DemoVersions(o.Workflows, *versions)
	if err != nil {
		return err
	}
	o.Workflows = localstack.Scaled(vers.Catalog, *budget)
	if *wait {
		if mode != "demo" {
			return errors.New("-wait is a demo flag")
		}
		// The demo's own faults only: the waiting step's remote is down
		// until the order waits.
		o.Workflows = localstack.WithRetryWait(o.Workflows, catalog.MustDeployed(), localstack.DemoRetryWait)
		o.Faults, o.Crash = remotesim.Faults{}, 0
	} else if mode == "demo" && *admit {
		o = localstack.WithCapacity(o, localstack.DemoCapacity())
	}
	o.APIAddr, o.RemoteAddr = pick(*api, mode, "127.0.0.1:8080"), pick(*remote, mode, "127.0.0.1:9090")
	onEngines(&o)
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	if mode == "chaos" {
		if o.Chaos, err = chaos.New(o.Seed, rates); err != nil {
			return err
		}
	}
	if mode != "serve" {
		// The seed replays the same orders, and so their faults.
		o.OrderIDs = localstack.SeededOrderIDs(o.Seed)
	}

	logFile, err := os.Create(*logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	tap := &localstack.Tap{Next: logFile}
	o.Log = slog.New(slog.NewJSONHandler(tap, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := localstack.Start(ctx, o)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(out, "local stack up: API %s · remote simulator %s · seed %d · handler logs in %s\n", st.APIURL, strings.Join(st.RemoteURLs, " and "), o.Seed, *logPath)
	if *ui {
		if mode == "chaos" {
			return errors.New("-ui is a flag of demo and serve")
		}
		consoleDone, err := startConsole(ctx, st, o.Region, out)
		if err != nil {
			return err
		}
		defer func() { <-consoleDone }()
		defer stop() // the console stops with the run
	}

	if mode == "serve" {
		serveHelp(out, st, o)
		<-ctx.Done()
		fmt.Fprintln(out, "stopping")
		return nil
	}
	faultsJSON, _ := json.Marshal(o.Faults)
	if *wait {
		fmt.Fprintf(out, "demo -wait: one order, step budget %v, %s\n\n", *budget, vers)
		return localstack.WaitDemo{Stack: st, Progress: out, RunID: strconv.FormatUint(o.Seed, 36), Timeout: *timeout}.Run(ctx)
	}
	fmt.Fprintf(out, "%s: %d orders, %d clients, step budget %v, remote faults %s, agent crash %.3g, %s\n", mode, *orders, *clients, *budget, faultsJSON, o.Crash, vers)
	if c := o.Capacity; c != nil {
		fmt.Fprintf(out, "%s: capacity model %.0f orders/s (%d calls at once an Agent of %v each): the API sheds past %d queued requests an Agent (429 with Retry-After, the clients resubmit), each step may wait %v in its queue beyond its budget, the Scheduler runs %d invocations at once a queue, visibility %v\n",
			mode, c.OrdersPerSecond(), c.Slots(), c.RemoteLatency, c.Backlog(), localstack.QueueAllowance(*c), o.PollersPerQueue, o.Visibility)
	}
	if mode == "chaos" {
		replay := ""
		if *versions != defVersions {
			replay = fmt.Sprintf(" VERSIONS=%d", *versions)
		}
		fmt.Fprintf(out, "chaos: seed %d (replay: make chaos SEED=%d ORDERS=%d%s), %d Schedulers and %d Supervisors %v apart, agents %v behind, engines cut for %v every %v\n",
			o.Seed, o.Seed, *orders, replay, o.Schedulers, o.Supervisors, o.Skew, o.AgentLag, o.OutageFor, o.OutageEvery)
	}
	fmt.Fprintln(out)
	sum, err := localstack.Demo{
		Stack: st, Tap: tap, Orders: *orders, Clients: *clients, Rate: *rate, Timeout: *timeout,
		Progress: out, Live: !*plain && isTerminal(os.Stdout), RunID: strconv.FormatUint(o.Seed, 36),
		Workflows: vers.Refs,
	}.Run(ctx)
	if err != nil {
		return err
	}
	sum.Print(out)
	if *ui {
		fmt.Fprintln(out, "\nThe console and the stack stay up: look around, then Ctrl-C.")
		<-ctx.Done()
	}
	if mode == "chaos" {
		verdict := "PASS"
		if sum.Err() != nil {
			verdict = "FAIL"
		}
		fmt.Fprintf(out, "chaos seed=%d orders=%d terminal=%d compensated=%d lost=%d duplicated-effects=%d left-applied=%d not-undoable=%d unreported=%d stale-commits=%d over-threshold=%d unbounded=%d orphans=%d undo-breaches=%d event-gaps=%d alerts=%d/%d waits=%d supervisor-retries=%d replica-failed-tries=%d replica-repeats=%d replica-retries=%d code-effects=%d code-reruns=%d injected[%s] outages=%d: %s\n",
			o.Seed, sum.Submitted, sum.Submitted-sum.InFlight, sum.Compensated, sum.InFlight+len(sum.MissingEffects), len(sum.DuplicateEffects), len(sum.LeftApplied),
			sum.NotUndoable, len(sum.Unreported),
			len(sum.StaleCommits), len(sum.OverThreshold), len(sum.Unbounded), len(sum.Orphans), len(sum.UndoErrors), len(sum.EventErrors),
			sum.Alerts, sum.Errored+sum.CompensationFailed, sum.Waits, sum.SupervisorRetries, sum.ReplicaFailedTries, sum.ReplicaRepeats, sum.ReplicaRetries, sum.CodeSteps, sum.CodeReruns, sum.Injected, sum.Outages, verdict)
	}
	return sum.Err()
}

func pick(flagValue, mode, serveDefault string) string {
	switch {
	case flagValue != "":
		return flagValue
	case mode == "serve":
		return serveDefault
	}
	return "127.0.0.1:0"
}

func serveHelp(out io.Writer, st *localstack.Stack, o localstack.Options) {
	t := st.Sys.Tables
	fmt.Fprintf(out, `
Post an order and read it back (Ctrl-C stops the stack). Every route needs
a SigV4-signed request, as in AWS; the local API checks no signature, and the
access key you sign with names you (--user local:local is the client
arn:aws:iam::000000000000:user/local). A client sees only its own orders:

  curl -si --aws-sigv4 "aws:amz:us-east-1:execute-api" --user local:local -X POST %[1]s/orders \
    -H 'content-type: application/json' -H 'Idempotency-Key: my-first-order' \
    -d '{"customerId":"c-42","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2,"unitPriceCents":1250}]}'
  curl -s --aws-sigv4 "aws:amz:us-east-1:execute-api" --user local:local %[1]s/orders/<orderId>
  curl -s --aws-sigv4 "aws:amz:us-east-1:execute-api" --user local:local %[1]s/orders
  curl -s --aws-sigv4 "aws:amz:us-east-1:execute-api" --user other:other %[1]s/orders/<orderId>     (another client: 404)
  curl -s --aws-sigv4 "aws:amz:us-east-1:execute-api" --user local-operator:x '%[1]s/ops/orders?state=Compensated'   (the operators' view)

The operator routes are for local-operator, a session of the local operator
role; any other access key is a client, refused there with 403.

Change the remote service's faults while it runs:

  curl -s %[2]s/v1/faults
  curl -s -X POST %[2]s/v1/faults -d '{"transient":0.5}'

Operate it: make orders fail and their undo fail too, look, fix, resubmit
(the alerts on the alert topic print the same commands; sasctl signs as
local-operator when your credential chain has no keys, else run it with
AWS_ACCESS_KEY_ID=local-operator AWS_SECRET_ACCESS_KEY=x):

  curl -s -X POST %[2]s/v1/faults -d '{"rejectSteps":["charge-payment"],"rejectUndo":["reserve-inventory"]}'
  go run ./cmd/sasctl --endpoint-url %[1]s list --state CompensationFailed
  go run ./cmd/sasctl --endpoint-url %[1]s show <orderId>
  curl -s -X POST %[2]s/v1/faults -d '{}'
  go run ./cmd/sasctl --endpoint-url %[1]s retry <orderId>
  go run ./cmd/sasctl --endpoint-url %[1]s cancel <orderId>     (an order still in flight)

The same as a web page on this machine (or start the stack with -ui):

  go run ./cmd/sasctl --endpoint-url %[1]s ui --prefix %[11]s- --sqs-endpoint-url %[7]s

Its dead-letter queues, decoded, and their redrive (sasctl talks to the SQS
engine directly; the local one has no message move tasks, so it copies):

  go run ./cmd/sasctl dlq list --prefix %[11]s- --sqs-endpoint-url %[7]s
  go run ./cmd/sasctl dlq redrive --queue responses --prefix %[11]s- --sqs-endpoint-url %[7]s

Status events: post with "clientId":"%[10]s" and read that client's queue:

  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=%[3]s \
    aws --endpoint-url %[7]s sqs receive-message --max-number-of-messages 10 --queue-url %[9]s

Read the state with the AWS CLI (any credentials; the engines do not check them):

  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=%[3]s \
    aws --endpoint-url %[4]s dynamodb scan --table-name %[5]s
  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=%[3]s \
    aws --endpoint-url %[4]s dynamodb get-item --table-name %[6]s --key '{"OrderID":{"S":"<orderId>"}}'
  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=%[3]s \
    aws --endpoint-url %[7]s sqs receive-message --queue-url %[8]s

`, st.APIURL, st.RemoteURL, o.Region, o.DynamoDBEndpoint, t.State, t.Orders, o.AWSEndpoint, st.AlertWatchURL,
		st.EventsWatchURL, localstack.DemoClientID, strings.TrimSuffix(st.Sys.SchedulerQueue.Name, "-scheduler"))
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
