package opsclient

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/internal/ownerstamp"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// Exit codes of the CLI.
const (
	ExitOK       = 0
	ExitError    = 1 // the API or the network failed
	ExitUsage    = 2
	ExitConflict = 3 // 409
	ExitNotFound = 4 // no such order
)

// Usage is the CLI's help text.
var Usage = `usage: sasctl [--endpoint-url URL] [--region R] [--no-sign] [--json] <command>

commands:
  list --state STATE [--limit N] [--cursor C] [--all]
                      orders in STATE, newest entry into it first; --all
                      follows every page, else the next page's command is shown
  show ORDER_ID [--width N]
                      an order's state, errors and per-step history, and its
                      timeline: each step's attempts and undo on one time
                      axis, N columns wide (default $COLUMNS, else 80)
  retry ORDER_ID      resubmit an order in Error or CompensationFailed
  cancel ORDER_ID     compensate an order still in flight
  workflows           the workflow versions, the open orders pinned to each
                      (in flight, waiting for an operator) and whether a
                      version can be removed from the catalog
  version             the version this sasctl was built from
` + UIUsage + DLQUsage + OwnersUsage + `
flags:
  --endpoint-url URL  the HTTP API (default $SAS_API_URL, else $AWS_ENDPOINT_URL)
  --region R          region to sign for (default: the endpoint's, else the SDK's)
  --no-sign           send unsigned requests (an API without IAM authorization)
  --json              print the API's JSON instead of tables

states listed: ` + statesList() + `
(orders in flight and Processed ones are not listed: show them by ID)

Requests are signed with SigV4 from the AWS credential chain. To a loopback
endpoint (the local stack, which checks no signature) they go over plain
http, signed with the chain's credentials or, if it has none, as the access
key ` + LocalAccessKey + `, the local stack's operator (any other key is a
client there: AWS_ACCESS_KEY_ID=` + LocalAccessKey + ` signs as it anyway).

exit codes: 0 ok, 1 API, SQS, DynamoDB, IAM or network error, 2 usage error,
3 conflict, 4 not found (an order, or the queue of dlq --queue)
`

// Env is what one run of the CLI takes from its process, so tests run it
// in-process.
type Env struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
	// Program is how the follow-up commands the CLI prints invoke it;
	// "" means "sasctl".
	Program string
	// HTTPClient sends the requests; nil means one with DefaultTimeout.
	HTTPClient *http.Client
	// LoadAWSConfig loads the credentials (and, when region is "", the
	// region) that sign requests; nil means the SDK's standard chain,
	// config.LoadDefaultConfig (without the EC2 instance metadata service
	// for a loopback endpoint, so a machine without credentials does not
	// wait for it). It is called only when requests are signed.
	LoadAWSConfig func(ctx context.Context, region string) (aws.Config, error)
	// Now is the time an order in flight is drawn up to; nil means
	// time.Now.
	Now func() time.Time
	// Version is what `sasctl version` prints: the module version the
	// binary was built from ("" means "(devel)").
	Version string
	// SQSClient, when set, is what the dlq commands call instead of an SQS
	// client built from LoadAWSConfig.
	SQSClient dlq.Client
	// StampStore and Directory, when both are set, are what owners stamp
	// stamps and asks IAM with instead of the DynamoDB and IAM clients
	// built from LoadAWSConfig.
	StampStore ownerstamp.Store
	Directory  ownerstamp.Directory
	// UI serves the console of `sasctl ui` until ctx ends: package console,
	// which cmd/sasctl wires in (it imports this package, so this one
	// cannot import it).
	UI func(ctx context.Context, s UISession) error
}

// usageError is a mistake on the command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

var errNoCommand = usageError{"no command"}

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// ExitCode maps an error of Run's commands to the CLI's exit code.
func ExitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	case errors.Is(err, ErrConflict):
		return ExitConflict
	case errors.Is(err, ErrNotFound), errors.Is(err, dlq.ErrNoQueue):
		return ExitNotFound
	}
	return ExitError
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	endpoint string
	region   string
	noSign   bool
	json     bool
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoint, "endpoint-url", g.endpoint, "")
	fs.StringVar(&g.region, "region", g.region, "")
	fs.BoolVar(&g.noSign, "no-sign", g.noSign, "")
	fs.BoolVar(&g.json, "json", g.json, "")
}

// given names the flags set on the command line, of any of fs.
func given(fs ...*flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	for _, f := range fs {
		f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	}
	return set
}

// hintPrefix is the start of the commands the CLI suggests: the program and
// the global flags given on the command line (not the environment's), so a
// hint runs as-is in the same shell.
func (g *globals) hintPrefix(program string, fs ...*flag.FlagSet) string {
	parts := []string{cmp.Or(program, "sasctl")}
	set := given(fs...)
	if set["endpoint-url"] {
		parts = append(parts, "--endpoint-url", shellQuote(g.endpoint))
	}
	if set["region"] {
		parts = append(parts, "--region", shellQuote(g.region))
	}
	if g.noSign {
		parts = append(parts, "--no-sign")
	}
	return strings.Join(parts, " ")
}

// Run runs the CLI with args (without the program name) and returns its exit
// code. Results go to env.Stdout, errors and usage to env.Stderr.
func Run(ctx context.Context, args []string, env Env) int {
	err := run(ctx, args, env)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(env.Stdout, Usage)
		return ExitOK
	case err == nil:
		return ExitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		if ue == errNoCommand {
			fmt.Fprintf(env.Stderr, "sasctl: %v\n\n%s", err, Usage)
		} else {
			fmt.Fprintf(env.Stderr, "sasctl: %v\nRun 'sasctl --help' for usage.\n", err)
		}
		return ExitUsage
	}
	fmt.Fprintf(env.Stderr, "sasctl: %s\n", sanitize(err.Error(), fullTextWidth))
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusForbidden {
		fmt.Fprintln(env.Stderr, "sasctl: API Gateway refused the request: check the AWS credentials, that they may invoke the API, and --region")
	}
	return ExitCode(err)
}

func run(ctx context.Context, args []string, env Env) error {
	var g globals
	root := flag.NewFlagSet("sasctl", flag.ContinueOnError)
	root.SetOutput(io.Discard)
	g.register(root)
	if err := root.Parse(args); err != nil {
		return flagError(err)
	}
	if root.NArg() == 0 {
		return errNoCommand
	}
	name, rest := root.Arg(0), root.Args()[1:]
	if name == "help" {
		return flag.ErrHelp
	}
	switch name {
	case "dlq":
		return runDLQ(ctx, g, root, rest, env)
	case "owners":
		return runOwners(ctx, g, rest, env)
	case "ui":
		return runUI(ctx, g, rest, env)
	case "version":
		if len(rest) > 0 {
			return usagef("version takes no arguments, got %q", rest)
		}
		_, err := fmt.Fprintf(env.Stdout, "sasctl %s\n", cmp.Or(env.Version, "(devel)"))
		return err
	}
	sub := flag.NewFlagSet(name, flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	g.register(sub)
	var l listFlags
	switch name {
	case "list":
		sub.StringVar(&l.state, "state", "", "")
		sub.IntVar(&l.limit, "limit", 0, "")
		sub.StringVar(&l.cursor, "cursor", "", "")
		sub.BoolVar(&l.all, "all", false, "")
	case "show":
		sub.IntVar(&l.width, "width", 0, "")
	case "retry", "cancel", "workflows":
	default:
		return usagef("unknown command %q", name)
	}
	pos, err := parseInterspersed(sub, rest)
	if err != nil {
		return flagError(err)
	}
	cmd := command{out: env.Stdout, json: g.json, hint: g.hintPrefix(env.Program, root, sub), now: env.Now}
	if cmd.now == nil {
		cmd.now = time.Now
	}
	if name == "show" {
		if cmd.width, err = timelineWidth(l.width, env.Getenv("COLUMNS")); err != nil {
			return err
		}
	}
	var orderID string
	switch name {
	case "workflows":
		if len(pos) > 0 {
			return usagef("workflows takes no arguments, got %q", pos)
		}
	case "list":
		if len(pos) > 0 {
			return usagef("list takes no arguments, got %q", pos)
		}
		sub.Visit(func(f *flag.Flag) { l.limitSet = l.limitSet || f.Name == "limit" })
		if err := l.check(); err != nil {
			return err
		}
	default:
		if len(pos) != 1 {
			return usagef("%s takes one ORDER_ID, got %d arguments", name, len(pos))
		}
		orderID = pos[0]
		if err := checkOrderID(orderID); err != nil {
			return usageError{err.Error()}
		}
	}
	if cmd.client, err = newCLIClient(ctx, g, env); err != nil {
		return err
	}
	switch name {
	case "list":
		return cmd.list(ctx, l)
	case "show":
		return cmd.show(ctx, orderID)
	case "retry":
		return cmd.retry(ctx, orderID)
	case "workflows":
		return cmd.workflows(ctx)
	default:
		return cmd.cancel(ctx, orderID)
	}
}

func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err.Error()}
}

// parseInterspersed parses flags anywhere among the positional arguments,
// so `show ID --json` works like `--json show ID`; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// Parse stops at the first positional argument, or just after a
		// "--" it consumed: everything after that is positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// newCLIClient resolves the endpoint, decides whether to sign, and builds
// the client.
func newCLIClient(ctx context.Context, g globals, env Env) (*Client, error) {
	endpoint, source := g.endpoint, "--endpoint-url"
	for _, name := range []string{"SAS_API_URL", "AWS_ENDPOINT_URL"} {
		if endpoint != "" {
			break
		}
		endpoint, source = strings.TrimSpace(env.Getenv(name)), "$"+name
	}
	if endpoint == "" {
		return nil, usagef("no API endpoint: pass --endpoint-url or set SAS_API_URL (the stack's operator API URL, or http://127.0.0.1:PORT for the local stack)")
	}
	u, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, usagef("%s: %v", source, err)
	}
	opts := Options{HTTPClient: env.HTTPClient}
	if !g.noSign {
		// The local stack authorizes like API Gateway, so it is signed for
		// too; it checks no signature, so plain http and any key will do.
		local := IsLoopback(u.Hostname())
		if u.Scheme != "https" && !local {
			return nil, usagef("%s: refusing to send signed requests over plain http to %s; use https (or --no-sign)", source, u.Host)
		}
		region := g.region
		if region == "" {
			region = RegionFromHost(u.Hostname())
		}
		load := env.configLoader(local)
		cfg, err := load(ctx, region)
		if err != nil {
			return nil, fmt.Errorf("load AWS configuration to sign requests: %w", err)
		}
		if region == "" {
			region = cfg.Region
		}
		if region == "" && local {
			region = localRegion
		}
		if region == "" {
			return nil, usagef("no region to sign requests for %s: pass --region or set AWS_REGION", u.Host)
		}
		creds := cfg.Credentials
		if local {
			creds = aws.NewCredentialsCache(localCredentials{chain: creds})
		}
		if creds == nil {
			return nil, errors.New("no AWS credentials to sign requests: configure the standard chain (AWS_PROFILE, environment, SSO), or --no-sign for an API without authorization")
		}
		opts.Credentials, opts.Region = creds, region
	}
	c, err := NewClient(u.String(), opts)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return c, nil
}

// configLoader is how the CLI loads its AWS configuration: the caller's
// LoadAWSConfig when it gives one, else the local engines' static
// credentials for a local endpoint, else the SDK's standard chain.
func (env Env) configLoader(local bool) func(ctx context.Context, region string) (aws.Config, error) {
	switch {
	case env.LoadAWSConfig != nil:
		return env.LoadAWSConfig
	case local:
		return loadLocalConfig
	}
	return loadDefaultConfig
}

func loadDefaultConfig(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}

// loadLocalConfig is the standard chain without the EC2 instance metadata
// service, whose timeouts a machine without credentials would sit through
// before falling back to LocalAccessKey.
func loadLocalConfig(ctx context.Context, region string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithEC2IMDSClientEnableState(imds.ClientDisabled)}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}

// LocalAccessKey is the access key sasctl signs with for a loopback
// endpoint when the credential chain has none: the local stack's operator,
// a session of its operator role (any other key is a client there).
const LocalAccessKey = "local-operator"

// localSecret goes with LocalAccessKey; the local stack checks no
// signature, so it is no secret.
const localSecret = "local-operator-secret-not-checked"

// localRegion is what a loopback endpoint is signed for when nothing names
// a region; the local stack takes any.
const localRegion = "us-east-1"

// localCredentials are the chain's credentials when it has some, else
// LocalAccessKey's.
type localCredentials struct{ chain aws.CredentialsProvider }

func (p localCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	if p.chain != nil {
		if c, err := p.chain.Retrieve(ctx); err == nil && c.HasKeys() {
			return c, nil
		}
	}
	return aws.Credentials{AccessKeyID: LocalAccessKey, SecretAccessKey: localSecret, Source: "sasctl local fallback"}, nil
}

type listFlags struct {
	// width is show's --width.
	width  int
	state  string
	limit  int
	cursor string
	all    bool
	// limitSet tells an explicit --limit 0 (a mistake) from none given.
	limitSet bool
	parsed   workflow.ProcessState
}

func (l *listFlags) check() error {
	if l.state == "" {
		return usagef("list needs --state, one of %s", statesList())
	}
	// Case-insensitive, since operators type "error" as often as "Error".
	for _, s := range workflow.ProcessStates() {
		if strings.EqualFold(string(s), l.state) {
			l.parsed = s
		}
	}
	switch {
	case l.parsed == "":
		return usagef("unknown state %q: one of %s", l.state, statesList())
	case !l.parsed.Listed():
		return usagef("orders in %s are not listed, only those in %s; show one by its ID", l.parsed, statesList())
	}
	if l.limitSet && (l.limit < 1 || l.limit > MaxLimit) {
		return usagef("--limit %d outside 1..%d", l.limit, MaxLimit)
	}
	if l.cursor != "" {
		if err := api.CheckCursor(l.cursor); err != nil {
			return usagef("--cursor: %v", err)
		}
	}
	return nil
}

// statesList names the states the API lists.
func statesList() string {
	names := make([]string, 0, len(workflow.ListedStates()))
	for _, s := range workflow.ListedStates() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// command runs one command against the client.
type command struct {
	client *Client
	out    io.Writer
	json   bool
	// hint starts the follow-up commands printed for the operator.
	hint string
	// now and width are the timeline's (show).
	now   func() time.Time
	width int
}

// timelineWidth is --width if given, else $COLUMNS if it is a width, else
// DefaultTimelineWidth.
func timelineWidth(flagged int, columns string) (int, error) {
	if flagged != 0 {
		if flagged < MinTimelineWidth || flagged > MaxTimelineWidth {
			return 0, usagef("--width %d outside %d..%d", flagged, MinTimelineWidth, MaxTimelineWidth)
		}
		return flagged, nil
	}
	if n, err := strconv.Atoi(strings.TrimSpace(columns)); err == nil && n >= MinTimelineWidth && n <= MaxTimelineWidth {
		return n, nil
	}
	return DefaultTimelineWidth, nil
}

func (c command) list(ctx context.Context, l listFlags) error {
	p := ListParams{State: l.parsed, Limit: l.limit, Cursor: l.cursor}
	page, err := c.client.ListOrders(ctx, p)
	if err != nil {
		return err
	}
	if !l.all {
		if c.json {
			return writeJSON(c.out, page.Raw)
		}
		if err := c.writeList(page.Orders, l.parsed); err != nil {
			return err
		}
		if page.NextCursor != "" {
			next := fmt.Sprintf("%s list --state %s", c.hint, l.parsed)
			if l.limitSet {
				next += fmt.Sprintf(" --limit %d", l.limit)
			}
			_, err = fmt.Fprintf(c.out, "\nNext page: %s --cursor %s\n", next, shellQuote(page.NextCursor))
		}
		return err
	}
	orders, raws := page.Orders, page.rawOrders
	// A cursor seen twice would page forever: the API is broken.
	seen := map[string]bool{l.cursor: true}
	for page.NextCursor != "" {
		if seen[page.NextCursor] {
			return fmt.Errorf("list orders: the API returned cursor %q twice", truncate(page.NextCursor, 80))
		}
		seen[page.NextCursor] = true
		p.Cursor = page.NextCursor
		if page, err = c.client.ListOrders(ctx, p); err != nil {
			return fmt.Errorf("after %d orders: %w", len(orders), err)
		}
		orders, raws = append(orders, page.Orders...), append(raws, page.rawOrders...)
	}
	if c.json {
		b, err := ordersJSON(raws)
		if err != nil {
			return err
		}
		return writeJSON(c.out, b)
	}
	if err := c.writeList(orders, l.parsed); err != nil {
		return err
	}
	if len(orders) > 0 {
		_, err = fmt.Fprintf(c.out, "\n%d orders in %s\n", len(orders), l.parsed)
	}
	return err
}

func (c command) writeList(orders []api.OrderSummary, state workflow.ProcessState) error {
	if len(orders) == 0 {
		_, err := fmt.Fprintf(c.out, "No orders in %s.\n", state)
		return err
	}
	if err := writeOrders(c.out, orders); err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.out, "\nDetails: %s show ORDER_ID\n", c.hint)
	return err
}

func (c command) show(ctx context.Context, orderID string) error {
	o, err := c.client.GetOrder(ctx, orderID)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(c.out, o.Raw)
	}
	return writeOrder(c.out, o, c.hint, c.now(), c.width)
}

func (c command) workflows(ctx context.Context) error {
	ws, err := c.client.Workflows(ctx)
	if err != nil {
		return fmt.Errorf("list workflow versions: %w", err)
	}
	if c.json {
		return writeJSON(c.out, ws.Raw)
	}
	return writeWorkflows(c.out, ws.Workflows, c.hint)
}

func (c command) retry(ctx context.Context, orderID string) error {
	a, err := c.client.Retry(ctx, orderID)
	if err != nil {
		return c.actionError(err, orderID, "retry")
	}
	return c.accepted(a, "resubmitted")
}

func (c command) cancel(ctx context.Context, orderID string) error {
	a, err := c.client.Cancel(ctx, orderID)
	if err != nil {
		return c.actionError(err, orderID, "cancel")
	}
	return c.accepted(a, "cancel accepted")
}

func (c command) accepted(a Accepted, what string) error {
	if c.json {
		return writeJSON(c.out, a.Raw)
	}
	_, err := fmt.Fprintf(c.out, "Order %s %s; state now %s.\nFollow up: %s show %s\n", a.OrderID, what, a.State, c.hint, a.OrderID)
	return err
}

// actionError says, on a conflict, where to look: the state that refused.
func (c command) actionError(err error, orderID, action string) error {
	if errors.Is(err, ErrConflict) {
		return fmt.Errorf("%s refused for order %s (see: %s show %s): %w", action, orderID, c.hint, orderID, err)
	}
	return fmt.Errorf("%s order %s: %w", action, orderID, err)
}

// shellQuote quotes s for a POSIX shell unless it is plainly safe.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
