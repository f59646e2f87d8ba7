package opsclient

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/sasflow/sas/internal/ownerstamp"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/statestore"
)

// OwnersUsage is the help of the owners command, part of Usage.
const OwnersUsage = `  owners stamp --orders-table T --state-table S [--dry-run]
                      give each order of an IAM user or role made before
                      owners' unique IDs were recorded the unique ID of the
                      principal that made it, so that principal reads,
                      lists and replays it again: the user or role that
                      holds the name in IAM now (GetUser, GetRole), when it
                      existed when the order was made; an order made before
                      it was created was a deleted principal's and is left
                      unstamped, no client's. Once per deployment, after the
                      upgrade; running it again stamps what is left

owners flags (DynamoDB and IAM are called directly, with the AWS credential
chain, which needs dynamodb:Scan, GetItem, UpdateItem and PutItem on both
tables, and iam:GetUser and iam:GetRole; IAM answers for the credentials'
account):
  --orders-table T    the orders table (stack output OrdersTableName)
  --state-table S     the state table (stack output StateTableName)
  --dry-run           look the owners up and count, write nothing
  --dynamodb-endpoint-url URL
                      the DynamoDB endpoint (default $AWS_ENDPOINT_URL_DYNAMODB,
                      else the SDK's for --region)
`

// ownersFlags are the flags of the owners command.
type ownersFlags struct {
	orders, state, endpoint string
	dryRun                  bool
}

// tableName is DynamoDB's rule for a table's name: 3..255 of
// [a-zA-Z0-9_.-].
var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// runOwners runs `owners ACTION ...`.
func runOwners(ctx context.Context, g globals, args []string, env Env) error {
	pre := flag.NewFlagSet("owners", flag.ContinueOnError)
	pre.SetOutput(io.Discard)
	g.register(pre)
	if err := pre.Parse(args); err != nil {
		return flagError(err)
	}
	if args = pre.Args(); len(args) == 0 {
		return usagef("owners needs an action: stamp")
	}
	switch args[0] {
	case "stamp":
	case "help", "-h", "--help", "-help":
		return flag.ErrHelp
	default:
		return usagef("unknown owners action %q: stamp", args[0])
	}
	sub := flag.NewFlagSet("owners stamp", flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	g.register(sub)
	var f ownersFlags
	sub.StringVar(&f.orders, "orders-table", "", "")
	sub.StringVar(&f.state, "state-table", "", "")
	sub.StringVar(&f.endpoint, "dynamodb-endpoint-url", "", "")
	sub.BoolVar(&f.dryRun, "dry-run", false, "")
	pos, err := parseInterspersed(sub, args[1:])
	if err != nil {
		return flagError(err)
	}
	switch {
	case len(pos) > 0:
		return usagef("owners stamp takes no arguments, got %q", pos)
	case f.orders == "" || f.state == "":
		return usagef("owners stamp needs --orders-table and --state-table (the stack's outputs OrdersTableName and StateTableName)")
	case !tableName.MatchString(f.orders) || !tableName.MatchString(f.state):
		return usagef("owners stamp: a table name is 3..255 of A-Z a-z 0-9 _ . -")
	}
	store, dir, err := newStampClients(ctx, g, f, env)
	if err != nil {
		return err
	}
	r, err := ownerstamp.Run(ctx, store, dir, f.dryRun)
	if err != nil {
		return fmt.Errorf("%s (%d stamped before; running it again goes on)", err, r.Stamped())
	}
	if g.json {
		b, err := jsonwire.Marshal(r)
		if err != nil {
			return err
		}
		return writeJSON(env.Stdout, b)
	}
	return writeStampReport(env.Stdout, f.orders, r)
}

// newStampClients builds the stamp's store and IAM directory: the Env's
// when it gives them, else clients from the credential chain, DynamoDB's
// at --dynamodb-endpoint-url or $AWS_ENDPOINT_URL_DYNAMODB when one is
// given.
func newStampClients(ctx context.Context, g globals, f ownersFlags, env Env) (ownerstamp.Store, ownerstamp.Directory, error) {
	tables := statestore.Tables{Orders: f.orders, State: f.state}
	if env.StampStore != nil && env.Directory != nil {
		return env.StampStore, env.Directory, nil
	}
	endpoint, source := f.endpoint, "--dynamodb-endpoint-url"
	if endpoint == "" {
		endpoint, source = strings.TrimSpace(env.Getenv("AWS_ENDPOINT_URL_DYNAMODB")), "$AWS_ENDPOINT_URL_DYNAMODB"
	}
	local := false
	if endpoint != "" {
		u, err := parseEndpoint(endpoint)
		if err != nil {
			return nil, nil, usagef("%s: %v", source, err)
		}
		local = IsLoopback(u.Hostname())
		if u.Scheme != "https" && !local {
			return nil, nil, usagef("%s: refusing plain http to %s; use https", source, u.Host)
		}
		endpoint = u.String()
	}
	cfg, err := env.configLoader(local)(ctx, g.region)
	if err != nil {
		return nil, nil, fmt.Errorf("load AWS configuration for DynamoDB and IAM: %w", err)
	}
	if local {
		cfg.Credentials = aws.NewCredentialsCache(localCredentials{chain: cfg.Credentials})
		if cfg.Region == "" {
			cfg.Region = localRegion
		}
	}
	if cfg.Region == "" {
		return nil, nil, usagef("no region for DynamoDB: pass --region or set AWS_REGION")
	}
	// $AWS_ENDPOINT_URL is the API's to sasctl (see newSQSClient).
	cfg.BaseEndpoint = nil
	var store ownerstamp.Store = env.StampStore
	if store == nil {
		store = statestore.NewStamper(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		}), tables, nil)
	}
	var dir ownerstamp.Directory = env.Directory
	if dir == nil {
		dir = ownerstamp.IAM{Client: iam.NewFromConfig(cfg)}
	}
	return store, dir, nil
}

// writeStampReport prints what the stamp did, an owner a line.
func writeStampReport(w io.Writer, ordersTable string, r ownerstamp.Report) error {
	verb := "Stamped"
	if r.DryRun {
		verb = "Would stamp"
	}
	if len(r.Owners) == 0 {
		_, err := fmt.Fprintf(w, "No order of an IAM user or role in %s lacks its owner's unique ID (%s of owners unique by themselves: nothing to stamp).\n",
			cell(ordersTable, 80), plural(r.Unique, "order"))
		return err
	}
	fmt.Fprintf(w, "Orders of IAM users and roles without their owner's unique ID, in %s:\n\n", cell(ordersTable, 80))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OWNER\tUNIQUE ID\tCREATED\tORDERS\tSTAMPED\tMADE BEFORE\tKEYS COPIED\tKEYS TAKEN")
	owners := 0
	for _, o := range r.Owners {
		created := "-"
		if !o.Created.IsZero() {
			created = stamp(o.Created)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", cell(o.Owner, fullTextWidth), cell(o.ID, fullTextWidth), created,
			o.Orders, o.Stamped, o.Predecessors, o.KeysCopied, o.KeysTaken)
		if o.Stamped > 0 {
			owners++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	notes := false
	for _, o := range r.Owners {
		if !notes && (o.Left != "" || o.Predecessors > 0) {
			fmt.Fprintln(w)
			notes = true
		}
		switch {
		case o.Left != "":
			fmt.Fprintf(w, "%s: left: %s\n", cell(o.Owner, fullTextWidth), sanitize(o.Left, fullTextWidth))
		case o.Predecessors > 0:
			fmt.Fprintf(w, "%s: %s made before %s was created, by a principal deleted since: left unstamped, no client's\n",
				cell(o.Owner, fullTextWidth), plural(o.Predecessors, "order"), cell(o.ID, fullTextWidth))
		}
	}
	_, err := fmt.Fprintf(w, "\n%s %s of %s (%s of owners unique by themselves: nothing to stamp).\n",
		verb, plural(r.Stamped(), "order"), plural(owners, "owner"), plural(r.Unique, "order"))
	if err == nil && r.DryRun {
		_, err = fmt.Fprintln(w, "Dry run: nothing was written. Run it again without --dry-run to stamp them.")
	}
	return err
}
