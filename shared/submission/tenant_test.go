package submission

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

// TestPrincipal: the ARNs a principal is read from, each with the userId
// of its kind, and the ARNs refused whatever their userId.
func TestPrincipal(t *testing.T) {
	t.Parallel()
	long := "arn:aws:iam::123456789012:user/" + strings.Repeat("p/", 500) + "x"
	tests := []struct {
		name, arn, want string
	}{
		{"IAM user", "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"},
		{"IAM user with a path", "arn:aws:iam::123456789012:user/division/team/alice", "arn:aws:iam::123456789012:user/division/team/alice"},
		{"root", "arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root"},
		{"federated user", "arn:aws:sts::123456789012:federated-user/bob", "arn:aws:sts::123456789012:federated-user/bob"},
		{"assumed role: the session is dropped", "arn:aws:sts::123456789012:assumed-role/shop/i-0abc@example.com", "arn:aws:sts::123456789012:assumed-role/shop"},
		{"another session of the same role", "arn:aws:sts::123456789012:assumed-role/shop/other", "arn:aws:sts::123456789012:assumed-role/shop"},
		{"another partition", "arn:aws-us-gov:sts::123456789012:assumed-role/shop/s", "arn:aws-us-gov:sts::123456789012:assumed-role/shop"},
		{"the local API's callers", "arn:aws:iam::000000000000:user/demo-client", "arn:aws:iam::000000000000:user/demo-client"},
		{"empty", "", ""},
		{"not an ARN", "alice", ""},
		{"too few parts", "arn:aws:iam::123456789012", ""},
		{"another service", "arn:aws:s3:::bucket/key", ""},
		{"a region", "arn:aws:iam:eu-west-1:123456789012:user/alice", ""},
		{"short account", "arn:aws:iam::12345:user/alice", ""},
		{"letters in the account", "arn:aws:iam::12345678901x:user/alice", ""},
		{"no resource", "arn:aws:iam::123456789012:", ""},
		{"upper-case partition", "arn:AWS:iam::123456789012:user/alice", ""},
		{"empty partition", "arn::iam::123456789012:user/alice", ""},
		{"assumed role without a session", "arn:aws:sts::123456789012:assumed-role/shop", ""},
		{"assumed role with an empty session", "arn:aws:sts::123456789012:assumed-role/shop/", ""},
		{"assumed role with an empty role", "arn:aws:sts::123456789012:assumed-role//s", ""},
		{"assumed role with extra segments", "arn:aws:sts::123456789012:assumed-role/shop/s/x", ""},
		{"a user without a name", "arn:aws:iam::123456789012:user/team/", ""},
		{"a federated user without a name", "arn:aws:sts::123456789012:federated-user/", ""},
		{"a role, which never signs", "arn:aws:iam::123456789012:role/shop", ""},
		{"a group", "arn:aws:iam::123456789012:group/ops", ""},
		{"a space", "arn:aws:iam::123456789012:user/al ice", ""},
		{"a control character", "arn:aws:iam::123456789012:user/al\x00ice", ""},
		{"non-ASCII", "arn:aws:iam::123456789012:user/alicé", ""},
		{"too long", long, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Principal(&events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: tt.arn, UserID: userIDOf(tt.arn)})
			if tt.want == "" {
				if err == nil || !errors.Is(err, ErrNoIdentity) || got != (Owner{}) {
					t.Fatalf("Principal(%q) = %+v, %v; want ErrNoIdentity", tt.arn, got, err)
				}
				return
			}
			if err != nil || got.Name != tt.want {
				t.Fatalf("Principal(%q) = %+v, %v; want %q", tt.arn, got, err, tt.want)
			}
		})
	}
	if _, err := Principal(nil); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("Principal(nil) error = %v", err)
	}
}

// TestPrincipalUserID: the userId beside each kind of ARN, and the owner's
// unique ID it makes: an IAM user's is its userId, a role's the part of its
// session's userId before ":"; the root user and a federated user have
// none, their userId only has to be what their ARN implies. Any other
// userId is refused, missing or of another kind.
func TestPrincipalUserID(t *testing.T) {
	t.Parallel()
	const (
		user      = "arn:aws:iam::123456789012:user/alice"
		session   = "arn:aws:sts::123456789012:assumed-role/shop/i-0abc"
		root      = "arn:aws:iam::123456789012:root"
		federated = "arn:aws:sts::123456789012:federated-user/bob"
		userID    = "AIDAJQABLZS4A3QDU576Q"
		roleID    = "AROADBQP57FF2AEXAMPLE"
	)
	tests := []struct {
		name, arn, userID, want string // want "-": refused
	}{
		{"an IAM user's unique ID", user, userID, userID},
		{"the shortest unique ID", user, "AIDA" + strings.Repeat("X", 12), "AIDA" + strings.Repeat("X", 12)},
		{"the longest unique ID", user, "AIDA" + strings.Repeat("x_9", 41), "AIDA" + strings.Repeat("x_9", 41)},
		{"a role session's role ID", session, roleID + ":i-0abc", roleID},
		{"a session named otherwise than its ARN", session, roleID + ":other", roleID},
		{"a session name of every allowed character", session, roleID + ":a_Z9+=,.@-", roleID},
		{"the root user's account", root, "123456789012", ""},
		{"a federated user's account and name", federated, "123456789012:bob", ""},

		{"an IAM user without one", user, "", "-"},
		{"an IAM user with a role's ID", user, roleID, "-"},
		{"an IAM user with a session", user, userID + ":s", "-"},
		{"an IAM user with an access key ID", user, "AKIAIOSFODNN7EXAMPLE", "-"},
		{"a unique ID too short", user, "AIDA" + strings.Repeat("X", 11), "-"},
		{"a unique ID too long", user, "AIDA" + strings.Repeat("X", 125), "-"},
		{"a unique ID with a dash", user, "AIDAJQABLZS4A3-DU576Q", "-"},
		{"a unique ID with a space", user, "AIDAJQABLZS4A3 DU576Q", "-"},
		{"a lower-case prefix", user, "aidaJQABLZS4A3QDU576Q", "-"},
		{"a role session without one", session, "", "-"},
		{"a role session without its session", session, roleID, "-"},
		{"a role session with an empty session", session, roleID + ":", "-"},
		{"a role session with an empty role ID", session, ":i-0abc", "-"},
		{"a role session with a user's ID", session, userID + ":i-0abc", "-"},
		{"a role session with a second colon", session, roleID + ":i-0abc:x", "-"},
		{"a role session with a slash in the session", session, roleID + ":i/0abc", "-"},
		{"a role session with a session too long", session, roleID + ":" + strings.Repeat("s", 65), "-"},
		{"the root user without one", root, "", "-"},
		{"the root user with another account", root, "210987654321", "-"},
		{"the root user with a unique ID", root, userID, "-"},
		{"a federated user without one", federated, "", "-"},
		{"a federated user with another name", federated, "123456789012:eve", "-"},
		{"a federated user with another account", federated, "210987654321:bob", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Principal(&events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: tt.arn, UserID: tt.userID})
			if tt.want == "-" {
				if !errors.Is(err, ErrNoIdentity) || got != (Owner{}) {
					t.Fatalf("Principal(%q, %q) = %+v, %v; want ErrNoIdentity", tt.arn, tt.userID, got, err)
				}
				return
			}
			if err != nil || got.ID != tt.want || got.Key() != cmp.Or(tt.want, got.Name) {
				t.Fatalf("Principal(%q, %q) = %+v, %v; want the ID %q", tt.arn, tt.userID, got, err, tt.want)
			}
		})
	}
}

// FuzzPrincipal: whatever userArn and userId arrive, Principal never
// panics, and an owner it returns is a printable ARN that is its own owner
// (a normalized owner normalizes to itself, so the owner of a record and of
// the request reading it compare equal) with, for an IAM user or a role, a
// unique ID of IAM's of that kind, the one it is matched on: never an ARN,
// so never another owner's key.
func FuzzPrincipal(f *testing.F) {
	for _, s := range [][2]string{
		{"arn:aws:iam::123456789012:user/alice", "AIDAJQABLZS4A3QDU576Q"}, {"arn:aws:sts::123456789012:assumed-role/shop/s", "AROADBQP57FF2AEXAMPLE:s"},
		{"arn:aws:sts::123456789012:assumed-role/shop", "AROADBQP57FF2AEXAMPLE"}, {"arn:aws:iam::123456789012:root", "123456789012"},
		{"arn:aws:sts::123456789012:federated-user/bob", "123456789012:bob"}, {"arn:aws:s3:::b", ""},
		{"arn:aws:sts::123456789012:assumed-role//", ":"}, {"arn:::::", ""}, {"", "AIDAJQABLZS4A3QDU576Q"},
		{"arn:aws:iam::123456789012:user/a:b", "AIDA:JQABLZS4A3QDU576Q"}, {"arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"},
		{"arn:aws:sts::123456789012:assumed-role/shop/s", "AROADBQP57FF2AEXAMPLE:s:t"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, arn, userID string) {
		got, err := Principal(&events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn, UserID: userID})
		if err != nil {
			if !errors.Is(err, ErrNoIdentity) || got != (Owner{}) {
				t.Fatalf("Principal(%q, %q) = %+v, %v", arn, userID, got, err)
			}
			return
		}
		owner := got.Name
		if !strings.HasPrefix(owner, "arn:") || len(owner) > len(arn) || strings.ContainsFunc(owner, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("Principal(%q, %q) = %+v", arn, userID, got)
		}
		switch {
		case strings.Contains(owner, ":assumed-role/"):
			// The role's owner is not a session ARN, so it does not pass
			// again; its ID is the role's, from its session's userId.
			if !strings.HasPrefix(arn, owner+"/") || !strings.HasPrefix(userID, got.ID+":") || !ValidUniqueID(got.ID, RolePrefix) {
				t.Fatalf("Principal(%q, %q) = %+v is not the session's role", arn, userID, got)
			}
		case strings.Contains(owner, ":user/"):
			if got.ID != userID || !ValidUniqueID(got.ID, UserPrefix) {
				t.Fatalf("Principal(%q, %q) = %+v: not the user's unique ID", arn, userID, got)
			}
		default:
			if got.ID != "" {
				t.Fatalf("Principal(%q, %q) = %+v: an ID for a principal without one", arn, userID, got)
			}
		}
		if key := got.Key(); strings.HasPrefix(key, "arn:") != (got.ID == "") || strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("Principal(%q, %q) = %+v, key %q", arn, userID, got, key)
		}
		if strings.Contains(owner, ":assumed-role/") {
			return
		}
		if again, err := Principal(&events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: owner, UserID: userID}); err != nil || again != got {
			t.Fatalf("owner %+v of %q normalizes to %+v, %v", got, arn, again, err)
		}
	})
}

// TestRequestsWithoutIdentityAreForbidden: API Gateway never invokes the
// handler without an IAM identity; if it ever did, every route answers 403
// with a problem, and nothing is read or written.
func TestRequestsWithoutIdentityAreForbidden(t *testing.T) {
	t.Parallel()
	for _, r := range Routes() {
		for _, arn := range []string{"", "not-an-arn"} {
			t.Run(r.Method+" "+r.Path+" "+arn, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				f.put(at(orderA, workflow.Error, 0, 1))
				path := strings.ReplaceAll(r.Path, "{id}", orderA)
				req := as(request(r.Method, path, map[string]string{"content-type": "application/json"}, validBody), arn)
				req.RawQueryString = "state=Error"
				if path == "/orders" {
					req.RawQueryString = ""
				}
				p := readProblem(t, f.do(t, req), 403)
				if p.Type != ProblemForbidden || p.RequestID != "req-1" {
					t.Fatalf("problem %+v", p)
				}
				f.wroteNothing(t, "a request without an identity")
				if reads := f.called("GetState") + f.called("GetOrder"); reads != 0 {
					t.Fatalf("a request without an identity read %d times", reads)
				}
				if l := logged(t, f, "request without an IAM identity refused"); l["level"] != "WARN" {
					t.Fatalf("log %v", l)
				}
			})
		}
	}
}

// TestTenantIsolation: two clients, A (an IAM user) and B (a session of a
// role), on the handler. Each sees only its own orders: the other's order is
// 404 exactly as a missing one, absent from its listing, and a cursor of
// one's listing is refused for the other. The same Idempotency-Key from
// both makes two orders. The operators' routes see both.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	clk := f.h.clk.(*clock.Fake)
	postAs := func(caller, key string) events.APIGatewayV2HTTPResponse {
		clk.Advance(time.Second) // distinct creation times, so "newest first" is one order
		req := postOrder(validBody)
		if key != "" {
			req = postOrder(validBody, "Idempotency-Key", key)
		}
		return f.do(t, as(req, caller))
	}

	// The same key from A and from B: two orders, both 202, neither 422.
	a1 := postAs(callerA, "checkout-1")
	b1 := postAs(callerB, "checkout-1")
	aID, bID := readAccepted(t, a1).OrderID, readAccepted(t, b1).OrderID
	if aID == bID || a1.Headers[ReplayedHeader] != "" || b1.Headers[ReplayedHeader] != "" {
		t.Fatalf("A's %s and B's %s with one key; replayed %q %q", aID, bID, a1.Headers[ReplayedHeader], b1.Headers[ReplayedHeader])
	}
	for owner, id := range map[string]string{ownerA.Key(): aID, ownerOfB.Key(): bID} {
		if k, err := f.store.GetKey(t.Context(), owner, "checkout-1"); err != nil || k.OrderID != id {
			t.Fatalf("%s's key names %+v, %v; want %s", owner, k, err, id)
		}
	}
	// Another session of B's role is B: its retry replays B's order.
	again := f.do(t, as(postOrder(validBody, "Idempotency-Key", "checkout-1"), ownerB+"/another-session"))
	if readAccepted(t, again).OrderID != bID || again.Headers[ReplayedHeader] != "true" {
		t.Fatalf("B's other session got %s", again.Body)
	}
	// The order keeps the owner and its unique ID; the record, written
	// again and again, the ID alone.
	if o, s := f.order(t, aID), f.state(t, aID); o.Owner != callerA || s.Owner != "" || o.OwnerID != ownerA.ID || s.OwnerID != ownerA.ID {
		t.Fatalf("A's order owned by %q %q, %q %q", o.Owner, o.OwnerID, s.Owner, s.OwnerID)
	}
	if o, s := f.order(t, bID), f.state(t, bID); o.Owner != ownerB || s.Owner != "" || o.OwnerID != ownerOfB.ID || s.OwnerID != ownerOfB.ID ||
		!strings.HasPrefix(ownerOfB.ID, RolePrefix) {
		t.Fatalf("B's order owned by %q %q, %q %q", o.Owner, o.OwnerID, s.Owner, s.OwnerID)
	}
	var aIDs, bIDs []string
	aIDs = append(aIDs, aID)
	bIDs = append(bIDs, bID)
	for i := range 3 {
		aIDs = append(aIDs, readAccepted(t, postAs(callerA, "")).OrderID)
		bIDs = append(bIDs, readAccepted(t, postAs(callerB, fmt.Sprintf("b-%d", i))).OrderID)
	}

	// Each reads its own order; the other's is 404, byte for byte what a
	// missing order gets.
	if r := f.do(t, as(request("GET", "/orders/"+aID, nil, ""), callerA)); r.StatusCode != 200 || !strings.Contains(r.Body, aID) {
		t.Fatalf("A reading its order: %d %s", r.StatusCode, r.Body)
	}
	if r := f.do(t, as(request("GET", "/orders/"+bID, nil, ""), callerB)); r.StatusCode != 200 || strings.Contains(r.Body, "owner") {
		t.Fatalf("B reading its order: %d %s", r.StatusCode, r.Body)
	}
	foreign := f.do(t, as(request("GET", "/orders/"+aID, nil, ""), callerB))
	readProblem(t, foreign, 404)
	missing := newFixture(t, nil).do(t, as(request("GET", "/orders/"+aID, nil, ""), callerB))
	if foreign.Body != missing.Body || fmt.Sprint(foreign.Headers) != fmt.Sprint(missing.Headers) {
		t.Fatalf("another's order answered\n%v %s\nmissing order answered\n%v %s", foreign.Headers, foreign.Body, missing.Headers, missing.Body)
	}
	readProblem(t, f.do(t, as(request("GET", "/orders/"+bID, nil, ""), callerA)), 404)

	// Each lists exactly its own, newest first, in pages.
	list := func(caller string, limit int) (ids []string, cursors []string) {
		orders, cursors := f.walk(t, ownOrders(fmt.Sprintf("limit=%d", limit), caller))
		return orderIDs(orders), cursors
	}
	newestFirst := func(ids []string) string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[len(ids)-1-i] = id
		}
		return fmt.Sprint(out)
	}
	gotA, aCursors := list(callerA, 3)
	gotB, bCursors := list(callerB, 3)
	if fmt.Sprint(gotA) != newestFirst(aIDs) || fmt.Sprint(gotB) != newestFirst(bIDs) {
		t.Fatalf("A lists %v (want %s), B lists %v (want %s)", gotA, newestFirst(aIDs), gotB, newestFirst(bIDs))
	}
	if len(aCursors) == 0 || len(bCursors) == 0 {
		t.Fatal("no second page to take a cursor from")
	}

	// B's cursor is refused for A, and A's for B.
	for _, tc := range []struct{ caller, cursor string }{{callerA, bCursors[0]}, {callerB, aCursors[0]}} {
		p := readProblem(t, f.do(t, ownOrders("cursor="+tc.cursor, tc.caller)), 400)
		if len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
			t.Fatalf("another's cursor: %+v", p)
		}
	}
	// Listing by state is not a client's: the parameter is refused with a
	// pointer to the operators' route.
	p := readProblem(t, f.do(t, ownOrders("state=Pending", callerA)), 400)
	if len(p.Errors) != 1 || p.Errors[0].Field != "state" || !strings.Contains(p.Errors[0].Detail, "GET /ops/orders") {
		t.Fatalf("state on a client's listing: %+v", p)
	}

	// The operators act on every caller's orders (a cancel undoes the
	// first step, dispatched at submission), and list them with whose each
	// is, once in a listed state (Compensated here, as the undo leaves them).
	for _, id := range append(slices.Clone(aIDs), bIDs...) {
		readOperatorAccepted(t, f.do(t, post("/orders/"+id+"/cancel")), id, workflow.CompensationPending)
		st := f.state(t, id)
		st.ProcessState, st.InFlight = workflow.Compensated, false
		f.put(st)
	}
	ops := map[string]bool{}
	for _, o := range readList(t, f.do(t, getOrders("state=Compensated&limit=100"))).Orders {
		ops[o.OrderID] = true
	}
	for _, id := range append(slices.Clone(aIDs), bIDs...) {
		if !ops[id] {
			t.Fatalf("the operators' listing %v lacks %s", ops, id)
		}
	}
	r := f.do(t, as(request("GET", "/ops/orders/"+aID, nil, ""), callerOp))
	var st struct{ OrderID, Owner, OwnerID string }
	if err := json.Unmarshal([]byte(r.Body), &st); r.StatusCode != 200 || err != nil || st.OrderID != aID || st.Owner != callerA || st.OwnerID != ownerA.ID {
		t.Fatalf("the operators' view of A's order: %d %s", r.StatusCode, r.Body)
	}
}

// TestOrdersWithoutOwnerAreOperatorsOnly: an order written before owners
// were recorded is no client's: 404 for every caller, in no listing, and
// still there for the operators.
func TestOrdersWithoutOwnerAreOperatorsOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	st := at(orderA, workflow.Processed, 1, 1)
	st.Owner, st.OwnerID = "", ""
	if err := f.store.CreateOrder(context.Background(), workflow.Order{OrderID: orderA, CreatedAt: testNow}, st); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{callerA, callerB} {
		readProblem(t, f.do(t, as(request("GET", "/orders/"+orderA, nil, ""), c)), 404)
		if l := readList(t, f.do(t, ownOrders("", c))); len(l.Orders) != 0 {
			t.Fatalf("%s lists %+v", c, l.Orders)
		}
	}
	if r := f.do(t, request("GET", "/ops/orders/"+orderA, nil, "")); r.StatusCode != 200 || strings.Contains(r.Body, "owner") {
		t.Fatalf("operators' view: %d %s", r.StatusCode, r.Body)
	}
}
