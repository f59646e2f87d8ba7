package opsclient

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/topology"
)

// DLQUsage is the help of the dlq commands, part of Usage.
const DLQUsage = `  dlq list [--queue NAME] [--max N]
                      each dead-letter queue: its source queue, depth and up
                      to N (default 10, at most 100) of its messages decoded:
                      kind, order, step, attempt, why it is there. Peeking
                      does not consume: messages are received with a 30 s
                      visibility timeout, then made visible again at once
                      (each peek counts as a receive in ApproximateReceiveCount)
  dlq redrive --queue NAME [--max-per-second N] [--method auto|task|copy]
                      move a DLQ's messages back to its source queue: an SQS
                      message move task (task), or receive, send to the
                      source, then delete (copy; a crash duplicates, never
                      loses). auto tries a task and copies where the endpoint
                      has none (the local stack)
  dlq tasks --queue NAME
                      the DLQ's recent message move tasks and their progress

dlq flags (SQS is called directly, with the AWS credential chain):
  --stage S           the deployed stage whose queues to use (default dev):
                      the queues named ` + topology.StackNamePrefix + `-S-*
  --prefix P          instead, the queues named P* (the local stack's)
  --sqs-endpoint-url URL
                      the SQS endpoint (default $AWS_ENDPOINT_URL_SQS, else
                      the SDK's for --region); a loopback one needs no
                      credentials
  --queue NAME        a source queue's ID (SchedulerQueue, ...), or its or
                      its DLQ's name, URL or ARN
`

// dlqFlags are the flags of the dlq commands.
type dlqFlags struct {
	stage, prefix, endpoint, queue, method string
	max, perSecond                         int
}

func (f *dlqFlags) register(fs *flag.FlagSet, action string) {
	fs.StringVar(&f.stage, "stage", "", "")
	fs.StringVar(&f.prefix, "prefix", "", "")
	fs.StringVar(&f.endpoint, "sqs-endpoint-url", "", "")
	fs.StringVar(&f.queue, "queue", "", "")
	switch action {
	case "list":
		fs.IntVar(&f.max, "max", 10, "")
	case "redrive":
		fs.IntVar(&f.perSecond, "max-per-second", 0, "")
		fs.StringVar(&f.method, "method", "auto", "")
	}
}

var stageExpr = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

func (f *dlqFlags) check(action string) error {
	switch {
	case f.stage != "" && f.prefix != "":
		return usagef("dlq: --stage and --prefix exclude each other")
	case f.stage != "" && !stageExpr.MatchString(f.stage):
		return usagef("dlq: --stage %q is no stage name (a lower-case letter, then up to 15 lower-case letters, digits or hyphens)", f.stage)
	case action != "list" && f.queue == "":
		return usagef("dlq %s needs --queue", action)
	case f.max < 0 || f.max > dlq.MaxPeek:
		return usagef("dlq list: --max %d outside 0..%d", f.max, dlq.MaxPeek)
	case f.perSecond < 0 || f.perSecond > dlq.MaxPerSecondLimit:
		return usagef("dlq redrive: --max-per-second %d outside 1..%d", f.perSecond, dlq.MaxPerSecondLimit)
	}
	if action == "redrive" && f.method != "auto" && f.method != "task" && f.method != "copy" {
		return usagef("dlq redrive: --method %q is none of auto, task, copy", f.method)
	}
	return nil
}

func (f *dlqFlags) scope() (dlq.Scope, string) {
	if f.prefix != "" {
		return dlq.PrefixScope(f.prefix), "prefix " + f.prefix
	}
	stage := f.stage
	if stage == "" {
		stage = topology.DefaultStage
	}
	return dlq.StageScope(stage), "stage " + stage
}

// runDLQ runs `dlq ACTION ...`.
func runDLQ(ctx context.Context, g globals, root *flag.FlagSet, args []string, env Env) error {
	// Global flags may come between "dlq" and the action too.
	pre := flag.NewFlagSet("dlq", flag.ContinueOnError)
	pre.SetOutput(io.Discard)
	g.register(pre)
	if err := pre.Parse(args); err != nil {
		return flagError(err)
	}
	if args = pre.Args(); len(args) == 0 {
		return usagef("dlq needs an action: list, redrive or tasks")
	}
	action := args[0]
	switch action {
	case "list", "redrive", "tasks":
	case "help", "-h", "--help", "-help":
		return flag.ErrHelp
	default:
		return usagef("unknown dlq action %q: list, redrive or tasks", action)
	}
	sub := flag.NewFlagSet("dlq "+action, flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	g.register(sub)
	var f dlqFlags
	f.register(sub, action)
	pos, err := parseInterspersed(sub, args[1:])
	if err != nil {
		return flagError(err)
	}
	if len(pos) > 0 {
		return usagef("dlq %s takes no arguments, got %q", action, pos)
	}
	if err := f.check(action); err != nil {
		return err
	}
	c, err := newSQSClient(ctx, g, f, env)
	if err != nil {
		return err
	}
	scope, what := f.scope()
	pairs, err := dlq.Discover(ctx, c, scope)
	if err != nil {
		return err
	}
	if f.queue != "" {
		p, err := dlq.Select(pairs, f.queue)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		pairs = []dlq.Pair{p}
	}
	d := dlqCommand{client: c, out: env.Stdout, errOut: env.Stderr, json: g.json, hint: newDLQHint(env.Program, g, f, root, pre, sub), what: what}
	switch action {
	case "list":
		return d.list(ctx, pairs, f.max)
	case "redrive":
		return d.redrive(ctx, pairs[0], f)
	default:
		return d.tasks(ctx, pairs[0])
	}
}

// dlqHint is how the follow-up commands invoke a dlq action: the program,
// --region when given, and after the action the flags that chose the
// queues and the endpoint (the API's --endpoint-url means nothing here).
type dlqHint struct{ prefix, flags string }

func newDLQHint(program string, g globals, f dlqFlags, fs ...*flag.FlagSet) dlqHint {
	parts := []string{cmp.Or(program, "sasctl")}
	set := given(fs...)
	if set["region"] {
		parts = append(parts, "--region", shellQuote(g.region))
	}
	var flags []string
	if f.stage != "" {
		flags = append(flags, "--stage", shellQuote(f.stage))
	}
	if f.prefix != "" {
		flags = append(flags, "--prefix", shellQuote(f.prefix))
	}
	if f.endpoint != "" {
		flags = append(flags, "--sqs-endpoint-url", shellQuote(f.endpoint))
	}
	return dlqHint{prefix: strings.Join(parts, " "), flags: strings.Join(flags, " ")}
}

// command is the dlq action on queue id.
func (h dlqHint) command(action, id string) string {
	return strings.TrimSpace(fmt.Sprintf("%s dlq %s --queue %s %s", h.prefix, action, shellQuote(id), h.flags))
}

// newSQSClient builds the SQS client from the credential chain, for
// --sqs-endpoint-url or $AWS_ENDPOINT_URL_SQS when one is given.
func newSQSClient(ctx context.Context, g globals, f dlqFlags, env Env) (dlq.Client, error) {
	if env.SQSClient != nil {
		return env.SQSClient, nil
	}
	endpoint, source := f.endpoint, "--sqs-endpoint-url"
	if endpoint == "" {
		endpoint, source = strings.TrimSpace(env.Getenv("AWS_ENDPOINT_URL_SQS")), "$AWS_ENDPOINT_URL_SQS"
	}
	local := false
	if endpoint != "" {
		u, err := parseEndpoint(endpoint)
		if err != nil {
			return nil, usagef("%s: %v", source, err)
		}
		local = IsLoopback(u.Hostname())
		if u.Scheme != "https" && !local {
			return nil, usagef("%s: refusing plain http to %s; use https", source, u.Host)
		}
		endpoint = u.String()
	}
	load := env.configLoader(local)
	cfg, err := load(ctx, g.region)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration for SQS: %w", err)
	}
	if local {
		cfg.Credentials = aws.NewCredentialsCache(localCredentials{chain: cfg.Credentials})
		if cfg.Region == "" {
			cfg.Region = localRegion
		}
	}
	if cfg.Region == "" {
		return nil, usagef("no region for SQS: pass --region or set AWS_REGION")
	}
	// sasctl reads $AWS_ENDPOINT_URL as the API's endpoint, so the SDK must
	// not take it for SQS's too: only --sqs-endpoint-url or
	// $AWS_ENDPOINT_URL_SQS point SQS elsewhere.
	cfg.BaseEndpoint = nil
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// dlqCommand runs one dlq command.
type dlqCommand struct {
	client      dlq.Client
	out, errOut io.Writer
	json        bool
	hint        dlqHint
	what        string
}

// queueReport is one DLQ in `dlq list`.
type queueReport struct {
	ID              string        `json:"id"`
	Source          string        `json:"source"`
	DLQ             string        `json:"dlq"`
	MaxReceiveCount int           `json:"maxReceiveCount"`
	Depth           int           `json:"depth"`
	InFlight        int           `json:"inFlight"`
	Messages        []dlq.Message `json:"messages"`
}

func (d dlqCommand) list(ctx context.Context, pairs []dlq.Pair, max int) error {
	reports := make([]queueReport, len(pairs))
	for i, p := range pairs {
		msgs, err := dlq.Peek(ctx, d.client, p.DLQ, max)
		if err != nil {
			return err
		}
		if msgs == nil {
			msgs = []dlq.Message{}
		}
		reports[i] = queueReport{ID: p.ID, Source: p.Source.Name, DLQ: p.DLQ.Name, MaxReceiveCount: p.MaxReceiveCount,
			Depth: p.Depth, InFlight: p.InFlight, Messages: msgs}
	}
	if d.json {
		b, err := jsonwire.Marshal(struct {
			Queues []queueReport `json:"queues"`
		}{reports})
		if err != nil {
			return err
		}
		return writeJSON(d.out, b)
	}
	return writeDLQs(d.out, d.what, reports, d.hint)
}

// writeDLQs prints the DLQs as a table, then each non-empty one's messages.
func writeDLQs(w io.Writer, what string, reports []queueReport, hint dlqHint) error {
	if len(reports) == 0 {
		_, err := fmt.Fprintf(w, "No dead-letter queues found for %s.\n", what)
		return err
	}
	fmt.Fprintf(w, "Dead-letter queues of %s:\n\n", what)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tMESSAGES\tIN FLIGHT\tMAX RECEIVES\tDLQ")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", cell(r.ID, cellWidth), r.Depth, r.InFlight, r.MaxReceiveCount, cell(r.DLQ, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reports {
		if len(r.Messages) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: %d peeked (made visible again), from %s\n", cell(r.ID, cellWidth), len(r.Messages), cell(r.Source, 80))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MESSAGE ID\tSENT\tRECEIVES\tKIND\tORDER\tSTEP\tATTEMPT\tDETAIL")
		for _, m := range r.Messages {
			step := m.Body.Step
			if step == "" && m.Body.OrderID != "" {
				step = "#" + strconv.Itoa(m.Body.StepIndex+1)
			}
			attempt := "-"
			if m.Body.Attempt > 0 {
				attempt = strconv.Itoa(m.Body.Attempt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(m.ID, cellWidth), stamp(m.SentAt), m.ReceiveCount,
				cell(string(m.Body.Kind), cellWidth), cell(m.Body.OrderID, 64), cell(step, cellWidth), attempt, cell(m.Body.Summary(), lastErrorWidth))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		poison := 0
		fmt.Fprintln(w, "Why:")
		for _, m := range r.Messages {
			reason := m.Reason(r.MaxReceiveCount)
			if m.SourceARN != "" {
				reason += "; dead-lettered from " + m.SourceARN
			}
			if m.Body.Poison != "" {
				poison++
			}
			fmt.Fprintf(w, "  %s: %s\n", cell(m.ID, cellWidth), sanitize(reason, fullTextWidth))
		}
		if poison > 0 {
			fmt.Fprintf(w, "%d poison: a redrive brings them straight back; fix their sender, or let the DLQ's retention expire them.\n", poison)
		}
		if poison < len(r.Messages) {
			fmt.Fprintf(w, "Fix the cause, then: %s\n", hint.command("redrive", r.ID))
		}
	}
	return nil
}

func (d dlqCommand) redrive(ctx context.Context, p dlq.Pair, f dlqFlags) error {
	task := dlq.MoveTask{Client: d.client}
	cp := dlq.Copy{Client: d.client}
	var mover dlq.Mover
	copied := false
	switch f.method {
	case "task":
		mover = task
	case "copy":
		mover, copied = cp, true
	default:
		mover = dlq.Auto{Task: task, Copy: cp, Fallback: func(err error) {
			copied = true
			fmt.Fprintf(d.errOut, "sasctl: %s; copying the messages instead (receive, send to the source, delete)\n", sanitize(err.Error(), fullTextWidth))
		}}
	}
	moved, err := mover.Move(ctx, p, f.perSecond)
	if errors.Is(err, dlq.ErrUnsupported) {
		return fmt.Errorf("%w; use --method copy", err)
	}
	if copied {
		if err != nil {
			return fmt.Errorf("%d moved before: %w", moved.Count, err)
		}
		_, err = fmt.Fprintf(d.out, "Moved %s from %s back to %s.\nCheck: %s\n", plural(moved.Count, "message"), p.DLQ.Name, p.Source.Name, d.hint.command("list", p.ID))
		return err
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(d.out, "Started a message move task from %s back to %s.\nTask: %s\nProgress: %s\n", p.DLQ.Name, p.Source.Name, moved.TaskHandle, d.hint.command("tasks", p.ID))
	return err
}

func (d dlqCommand) tasks(ctx context.Context, p dlq.Pair) error {
	tasks, err := dlq.Tasks(ctx, d.client, p)
	if err != nil {
		return err
	}
	if len(tasks) == 0 {
		_, err := fmt.Fprintf(d.out, "No message move tasks of %s.\n", p.DLQ.Name)
		return err
	}
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tSTATUS\tMOVED\tTO MOVE\tFAILURE")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", stamp(t.Started), cell(t.Status, cellWidth), t.Moved, t.ToMove, cell(t.Failure, lastErrorWidth))
	}
	return tw.Flush()
}
