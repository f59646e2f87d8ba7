package opsclient

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/internal/ownerstamp"
	"github.com/sasflow/sas/shared/statestore"
)

// lookupFunc is a function-type fake of IAM (ownerstamp.Directory).
type lookupFunc func(ctx context.Context, o ownerstamp.Owner) (ownerstamp.Principal, error)

func (f lookupFunc) Lookup(ctx context.Context, o ownerstamp.Owner) (ownerstamp.Principal, error) {
	return f(ctx, o)
}

// stampRecorder is a fake of the tables: it finds its orders and records
// the stamps, each answered with stamp.
type stampRecorder struct {
	orders []statestore.Unstamped
	stamp  statestore.Stamp
	mu     sync.Mutex
	done   map[string]string // order ID: the ID it was stamped with
}

func (s *stampRecorder) ScanUnstamped(_ context.Context, each func(statestore.Unstamped) error) error {
	for _, o := range s.orders {
		if err := each(o); err != nil {
			return err
		}
	}
	return nil
}

func (s *stampRecorder) StampOwner(_ context.Context, o statestore.Unstamped, id string) (statestore.Stamp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = map[string]string{}
	}
	s.done[o.OrderID] = id
	return s.stamp, nil
}

var stampT0 = time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)

func stampFakes() (*stampRecorder, lookupFunc) {
	store := &stampRecorder{stamp: statestore.Stamp{Record: true, Key: statestore.KeyCopied}, orders: []statestore.Unstamped{
		{OrderID: "a-1", Owner: "arn:aws:iam::111122223333:user/alice", IdempotencyKey: "k", CreatedAt: stampT0},
		{OrderID: "s-old", Owner: "arn:aws:sts::111122223333:assumed-role/shop", CreatedAt: stampT0},
		{OrderID: "s-new", Owner: "arn:aws:sts::111122223333:assumed-role/shop", CreatedAt: stampT0.Add(2 * time.Hour)},
		{OrderID: "g-1", Owner: "arn:aws:iam::111122223333:user/gone", CreatedAt: stampT0},
		{OrderID: "c-1", Owner: "cognito-identity:us-east-1:4f29/us-east-1:3f29", CreatedAt: stampT0},
	}}
	dir := lookupFunc(func(_ context.Context, o ownerstamp.Owner) (ownerstamp.Principal, error) {
		switch o.Name {
		case "alice":
			return ownerstamp.Principal{ID: "AIDAZ3EXAMPLEALICE01", ARN: "arn:aws:iam::111122223333:user/alice", Created: stampT0.Add(-time.Hour)}, nil
		case "shop":
			return ownerstamp.Principal{ID: "AROAZ3EXAMPLESHOP002", ARN: "arn:aws:iam::111122223333:role/shop", Created: stampT0.Add(time.Hour)}, nil
		}
		return ownerstamp.Principal{}, ownerstamp.ErrNoSuchPrincipal
	})
	return store, dir
}

// TestOwnersStamp: sasctl owners stamp stamps what each principal made,
// reports an owner a line and says why one is left; a dry run stamps
// nothing and says so; --json prints the report.
func TestOwnersStamp(t *testing.T) {
	t.Parallel()
	args := []string{"owners", "stamp", "--orders-table", "sas-dev-orders", "--state-table", "sas-dev-state"}
	t.Run("stamp", func(t *testing.T) {
		t.Parallel()
		store, dir := stampFakes()
		r := runCLI(t, Env{StampStore: store, Directory: dir}, nil, args...)
		if r.code != ExitOK || r.stderr != "" {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		checkGolden(t, "owners-stamp.txt", r.stdout)
		if len(store.done) != 2 || store.done["a-1"] != "AIDAZ3EXAMPLEALICE01" || store.done["s-new"] != "AROAZ3EXAMPLESHOP002" {
			t.Fatalf("stamped %v", store.done)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		t.Parallel()
		store, dir := stampFakes()
		r := runCLI(t, Env{StampStore: store, Directory: dir}, nil, append(args, "--dry-run")...)
		if r.code != ExitOK || len(store.done) != 0 {
			t.Fatalf("exit %d, stamped %v\n%s%s", r.code, store.done, r.stdout, r.stderr)
		}
		checkGolden(t, "owners-stamp-dry-run.txt", r.stdout)
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		store, dir := stampFakes()
		r := runCLI(t, Env{StampStore: store, Directory: dir}, nil, append(args, "--json")...)
		var rep ownerstamp.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != ExitOK || err != nil || rep.Stamped() != 2 || rep.Unique != 1 || len(rep.Owners) != 3 {
			t.Fatalf("exit %d, %+v, %v\n%s", r.code, rep, err, r.stdout)
		}
	})
	t.Run("nothing to stamp", func(t *testing.T) {
		t.Parallel()
		_, dir := stampFakes()
		r := runCLI(t, Env{StampStore: &stampRecorder{}, Directory: dir}, nil, args...)
		if r.code != ExitOK || !strings.Contains(r.stdout, "No order of an IAM user or role in sas-dev-orders lacks its owner's unique ID") {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("IAM fails", func(t *testing.T) {
		t.Parallel()
		store, _ := stampFakes()
		r := runCLI(t, Env{StampStore: store, Directory: lookupFunc(func(context.Context, ownerstamp.Owner) (ownerstamp.Principal, error) {
			return ownerstamp.Principal{}, errors.New("AccessDenied: not authorized to perform iam:GetUser")
		})}, nil, args...)
		if r.code != ExitError || !strings.Contains(r.stderr, "AccessDenied") || !strings.Contains(r.stderr, "running it again goes on") || r.stdout != "" {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestOwnersUsageErrors(t *testing.T) {
	t.Parallel()
	noConfig := Env{LoadAWSConfig: func(context.Context, string) (aws.Config, error) { return aws.Config{}, nil }}
	tables := []string{"--orders-table", "sas-dev-orders", "--state-table", "sas-dev-state"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no action", []string{"owners"}, "owners needs an action: stamp"},
		{"unknown action", []string{"owners", "migrate"}, `unknown owners action "migrate"`},
		{"no tables", []string{"owners", "stamp"}, "needs --orders-table and --state-table"},
		{"one table", []string{"owners", "stamp", "--orders-table", "sas-dev-orders"}, "needs --orders-table and --state-table"},
		{"a bad table name", []string{"owners", "stamp", "--orders-table", "a b", "--state-table", "sas-dev-state"}, "a table name is 3..255"},
		{"arguments", append([]string{"owners", "stamp", "extra"}, tables...), "takes no arguments"},
		{"plain http", append([]string{"owners", "stamp", "--dynamodb-endpoint-url", "http://dynamodb.example.com"}, tables...), "refusing plain http to dynamodb.example.com"},
		{"no region", append([]string{"owners", "stamp"}, tables...), "no region for DynamoDB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, noConfig, nil, tc.args...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %q", r.code, r.stderr, tc.want)
			}
		})
	}
}
