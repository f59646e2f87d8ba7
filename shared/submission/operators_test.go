package submission

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// readCounter is a store that counts every call, listings and counts
// included (memstore's Fault hook sees only the record reads and writes).
type readCounter struct {
	Store
	n *atomic.Int64
}

func (c readCounter) CreateOrder(ctx context.Context, o workflow.Order, s workflow.State) error {
	c.n.Add(1)
	return c.Store.CreateOrder(ctx, o, s)
}

func (c readCounter) GetKey(ctx context.Context, owner, key string) (workflow.KeyUse, error) {
	c.n.Add(1)
	return c.Store.GetKey(ctx, owner, key)
}

func (c readCounter) GetState(ctx context.Context, id string) (workflow.State, error) {
	c.n.Add(1)
	return c.Store.GetState(ctx, id)
}

func (c readCounter) ListByState(ctx context.Context, s workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
	c.n.Add(1)
	return c.Store.ListByState(ctx, s, limit, cursor)
}

func (c readCounter) ListByOwner(ctx context.Context, owner string, limit int, cursor string) (statestore.Page, error) {
	c.n.Add(1)
	return c.Store.ListByOwner(ctx, owner, limit, cursor)
}

func (c readCounter) CountOpen(ctx context.Context, limit int) (statestore.OpenCount, error) {
	c.n.Add(1)
	return c.Store.CountOpen(ctx, limit)
}

func (c readCounter) Apply(ctx context.Context, ch workflow.Change) (workflow.State, error) {
	c.n.Add(1)
	return c.Store.Apply(ctx, ch)
}

// operatorRequest is a request on operator route r for orderA, as caller.
func operatorRequest(r Route, caller string) events.APIGatewayV2HTTPRequest {
	path := strings.ReplaceAll(r.Path, "{id}", orderA)
	req := as(request(r.Method, path, nil, ""), caller)
	if r.Path == "/ops/orders" {
		req.RawQueryString = "state=Error"
	}
	return req
}

// TestOperatorRoutesAreRefusedByTheHandlerToo: the split between clients
// and operators does not rest on the stack's IAM policies alone. A client
// whose policy allows every route by mistake (execute-api:Invoke on *) gets
// the handler's own 403 problem on every operator route, before anything is
// read: an IAM user, a session of another role, a session of a role of the
// operators' role's name in another account or partition, a user or a
// federated user of that name, the account's root, and a user of an
// operator's name under another path. A session of a listed role (whatever
// its session name, and although the role has a path the session ARN does
// not carry) and a listed user get through.
func TestOperatorRoutesAreRefusedByTheHandlerToo(t *testing.T) {
	t.Parallel()
	clients := []string{
		callerA,
		callerB,
		"arn:aws:sts::210987654321:assumed-role/OrderOperatorRole/alice",
		"arn:aws-cn:sts::123456789012:assumed-role/OrderOperatorRole/alice",
		"arn:aws:iam::123456789012:user/OrderOperatorRole",
		"arn:aws:sts::123456789012:federated-user/OrderOperatorRole",
		"arn:aws:iam::123456789012:root",
		"arn:aws:iam::123456789012:user/bob",
		"arn:aws:iam::123456789012:user/other/bob",
	}
	operators := []string{callerOp, "arn:aws:sts::123456789012:assumed-role/OrderOperatorRole/someone-else", operatorUser}
	for _, r := range Routes() {
		if !r.Operator {
			continue
		}
		for _, caller := range clients {
			t.Run(r.Method+" "+r.Path+" by "+caller, func(t *testing.T) {
				t.Parallel()
				var reads atomic.Int64
				f := newFixtureOver(t, nil, func(s Store) Store { return readCounter{s, &reads} })
				f.put(at(orderA, workflow.Error, 0, 1))
				p := readProblem(t, f.do(t, operatorRequest(r, caller)), 403)
				if p.Type != problemBase+"not-an-operator" || p.RequestID != "req-1" || !strings.Contains(p.Detail, "operator") {
					t.Fatalf("problem %+v", p)
				}
				if n := reads.Load(); n != 0 {
					t.Fatalf("a client on an operator route made %d store calls", n)
				}
				f.wroteNothing(t, "a client on an operator route")
			})
		}
		for _, caller := range operators {
			t.Run(r.Method+" "+r.Path+" by operator "+caller, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				f.put(at(orderA, workflow.Error, 0, 1))
				resp := f.do(t, operatorRequest(r, caller))
				if resp.StatusCode != 200 && resp.StatusCode != 202 {
					t.Fatalf("an operator got %d %s", resp.StatusCode, resp.Body)
				}
			})
		}
	}
}

// TestOperatorRoutesAreTheRoutesOfOperators: the route the handler matches
// a request of each route to, whose Operator it checks the caller against,
// is that route of Routes, which the stack's policies split by.
func TestOperatorRoutesAreTheRoutesOfOperators(t *testing.T) {
	t.Parallel()
	for _, r := range Routes() {
		m, ok := matchPath(r.Method, strings.ReplaceAll(r.Path, "{id}", orderA))
		if !ok || m.endpoint == nil || m.endpoint.Route != r {
			t.Errorf("%s %s: matched %+v (found %v); want the route itself, operator %v", r.Method, r.Path, m.endpoint, ok, r.Operator)
		}
	}
}

func TestNewOperators(t *testing.T) {
	t.Parallel()
	ok := []string{
		"arn:aws:iam::123456789012:role/OrderOperatorRole",
		"arn:aws:iam::123456789012:role/a/b/OrderOperatorRole",
		"arn:aws-cn:iam::123456789012:role/r+=,.@-_9",
		"arn:aws:iam::123456789012:user/bob",
		"arn:aws:iam::123456789012:user/division/team/bob",
		"arn:aws:iam::123456789012:role/" + strings.Repeat("n", 64),
		"arn:aws:iam::123456789012:user/" + strings.Repeat("p/", 255) + "bob",
	}
	if _, err := NewOperators(ok); err != nil {
		t.Fatalf("NewOperators(%q) = %v", ok, err)
	}
	for _, arn := range []string{
		"", "bob", "arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:role",
		"arn:aws:sts::123456789012:assumed-role/OrderOperatorRole/alice",
		"arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:group/ops",
		"arn:aws:iam:eu-west-1:123456789012:role/r", "arn:aws:iam::12345678901:role/r",
		"arn:AWS:iam::123456789012:role/r", "arn:aws:iam::123456789012:role/" + strings.Repeat("n", 65),
		"arn:aws:iam::123456789012:user/" + strings.Repeat("p/", 256) + "bob",
		"arn:aws:iam::123456789012:role/a b", "arn:aws:iam::123456789012:role/a b/r",
		"arn:aws:iam::123456789012:role/r:x", "arn:aws:iam::123456789012:role/r\x00",
		"arn:aws:iam::123456789012:role/ré", " arn:aws:iam::123456789012:role/r",
	} {
		if _, err := NewOperators([]string{ok[0], arn}); err == nil || !strings.Contains(err.Error(), "is not an IAM role or user ARN") {
			t.Errorf("NewOperators(%q) = %v, want it refused", arn, err)
		}
	}
	if got := ParseOperatorPrincipals("arn:aws:iam::123456789012:role/r,,arn:aws:iam::123456789012:user/u,"); len(got) != 2 {
		t.Errorf("ParseOperatorPrincipals = %q, want the two ARNs", got)
	}
	if got := ParseOperatorPrincipals(""); got != nil {
		t.Errorf("ParseOperatorPrincipals(\"\") = %q", got)
	}
}

// FuzzOperators: whatever userArn arrives, Is never panics, and it holds
// only a session of the listed role, or the listed user itself.
func FuzzOperators(f *testing.F) {
	for _, s := range []string{
		callerOp, operatorUser, callerA, "arn:aws:sts::123456789012:assumed-role/OrderOperatorRole/",
		"arn:aws:sts::123456789012:assumed-role/OrderOperatorRole/a/b", "arn:aws:sts:eu-west-1:123456789012:assumed-role/OrderOperatorRole/a",
		"arn:aws:iam::123456789012:role/ops/OrderOperatorRole", "", "arn:::::",
	} {
		f.Add(s)
	}
	ops, err := NewOperators([]string{operatorRole, operatorUser})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, arn string) {
		is := ops.Is(&events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn})
		session, ok := strings.CutPrefix(arn, "arn:aws:sts::123456789012:assumed-role/OrderOperatorRole/")
		want := arn == operatorUser || (ok && session != "" && !strings.Contains(session, "/"))
		if is != want {
			t.Fatalf("Is(%q) = %v, want %v", arn, is, want)
		}
	})
}
