package localstack_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/workflow"
)

// TestTenantIsolationEndToEnd runs two clients against the local stack over
// HTTP, each signing with SigV4 as its own access key, as clients of the
// deployed API sign with their own credentials: each reads and lists only
// its own orders, the other's is 404 like a missing one, a cursor of one
// listing is refused for the other, the same Idempotency-Key makes an order
// for each, an unsigned request gets API Gateway's 403, and the operators'
// listing by state sees both clients' orders.
func TestTenantIsolationEndToEnd(t *testing.T) {
	t.Parallel()
	// Every order is stopped at its second step and undone: the operators
	// list the Compensated ones (the Processed ones are not listed).
	st, _ := start(t, func(o *localstack.Options) {
		o.Faults = remotesim.Faults{RejectSteps: []string{"charge-payment"}}
		o.Crash = 0
	})
	const clientA, clientB = "client-a", "client-b"
	// An unsigned request never reaches the handler: API Gateway's 403.
	for _, r := range []answer{
		call(t, "POST", st.APIURL+"/orders", order, "", nil),
		call(t, "GET", st.APIURL+"/orders", "", "", nil),
		call(t, "GET", st.APIURL+"/ops/orders?state=Error", "", "", nil),
	} {
		if r.status != 403 || r.body != `{"message":"Forbidden"}` {
			t.Fatalf("unsigned request = %d %s", r.status, r.body)
		}
	}

	// The same key from both clients: two orders, neither a 422.
	aOrders := []string{submit(t, st, clientA, "same-key")}
	bOrders := []string{submit(t, st, clientB, "same-key")}
	if aOrders[0] == bOrders[0] {
		t.Fatalf("one Idempotency-Key from two clients made one order %s", aOrders[0])
	}
	if again := submit(t, st, clientB, "same-key"); again != bOrders[0] {
		t.Fatalf("B's retry made %s, not its order %s", again, bOrders[0])
	}
	aOrders = append(aOrders, submit(t, st, clientA, ""), submit(t, st, clientA, ""))
	bOrders = append(bOrders, submit(t, st, clientB, ""))

	// Each reads its own; the other's is 404, as a missing order is.
	if r := call(t, "GET", st.APIURL+"/orders/"+aOrders[0], "", clientA, nil); r.status != 200 || !strings.Contains(r.body, aOrders[0]) {
		t.Fatalf("A reading its order: %d %s", r.status, r.body)
	}
	foreign := call(t, "GET", st.APIURL+"/orders/"+aOrders[0], "", clientB, nil)
	missing := call(t, "GET", st.APIURL+"/orders/00000000-0000-4000-8000-000000000000", "", clientB, nil)
	problemShape := func(a answer, id string) string {
		var p map[string]any
		if err := json.Unmarshal([]byte(a.body), &p); err != nil {
			t.Fatalf("problem %s: %v", a.body, err)
		}
		delete(p, "requestId") // one per request
		p["detail"] = strings.ReplaceAll(p["detail"].(string), id, "ID")
		b, _ := json.Marshal(p)
		return string(b)
	}
	if foreign.status != 404 || missing.status != 404 ||
		problemShape(foreign, aOrders[0]) != problemShape(missing, "00000000-0000-4000-8000-000000000000") {
		t.Fatalf("another's order: %d %s; a missing one: %d %s", foreign.status, foreign.body, missing.status, missing.body)
	}

	// Each lists exactly its own orders, newest first, one per page.
	type page struct {
		Orders []struct {
			OrderID string `json:"orderId"`
		} `json:"orders"`
		NextCursor string `json:"nextCursor"`
	}
	list := func(client string) (ids, cursors []string) {
		t.Helper()
		next := st.APIURL + "/orders?limit=1"
		for range 10 {
			r := call(t, "GET", next, "", client, nil)
			var p page
			if r.status != 200 || json.Unmarshal([]byte(r.body), &p) != nil {
				t.Fatalf("GET /orders as %s = %d %s", client, r.status, r.body)
			}
			for _, o := range p.Orders {
				ids = append(ids, o.OrderID)
			}
			if p.NextCursor == "" {
				return ids, cursors
			}
			cursors = append(cursors, p.NextCursor)
			next = st.APIURL + "/orders?limit=1&cursor=" + url.QueryEscape(p.NextCursor)
		}
		t.Fatalf("%s's listing does not end", client)
		return nil, nil
	}
	reversed := func(ids []string) []string { r := slices.Clone(ids); slices.Reverse(r); return r }
	gotA, aCursors := list(clientA)
	gotB, bCursors := list(clientB)
	if !slices.Equal(gotA, reversed(aOrders)) || !slices.Equal(gotB, reversed(bOrders)) {
		t.Fatalf("A lists %v (want %v), B lists %v (want %v)", gotA, reversed(aOrders), gotB, reversed(bOrders))
	}
	// B's cursor is refused for A, and A's for B.
	for _, tc := range []struct{ client, cursor string }{{clientA, bCursors[0]}, {clientB, aCursors[0]}} {
		r := call(t, "GET", st.APIURL+"/orders?cursor="+url.QueryEscape(tc.cursor), "", tc.client, nil)
		if r.status != 400 || !strings.Contains(r.body, `"field":"cursor"`) {
			t.Fatalf("another's cursor for %s = %d %s", tc.client, r.status, r.body)
		}
	}

	// The operators see both clients' orders, by state and one by one.
	all := append(slices.Clone(aOrders), bOrders...)
	for _, id := range all {
		awaitState(t, st, id, workflow.Compensated)
	}
	out, code := sasctl(t, st, "list", "--state", "Compensated", "--all")
	if code != 0 {
		t.Fatalf("sasctl list = %d\n%s", code, out)
	}
	for _, id := range all {
		if !strings.Contains(out, id) {
			t.Fatalf("the operators' listing lacks %s:\n%s", id, out)
		}
	}
	out, code = sasctl(t, st, "show", bOrders[0])
	if code != 0 || !strings.Contains(out, "arn:aws:iam::000000000000:user/"+clientB) {
		t.Fatalf("sasctl show = %d\n%s", code, out)
	}
	// And a client is told where that listing is, not given it.
	if r := call(t, "GET", st.APIURL+"/orders?state=Processed", "", clientA, nil); r.status != 400 || !strings.Contains(r.body, "GET /ops/orders") {
		t.Fatalf("a client's listing by state = %d %s", r.status, r.body)
	}
}

// TestARecreatedOwnerSeesNoneOfItsPredecessorsOrdersEndToEnd: over signed
// HTTP, a client's IAM user is deleted and created anew under its name
// (Stack.Recreate): the same access key signs as the same ARN with a new
// unique ID, as IAM would have it. The new user reads none of the old one's
// orders (404), lists none, cannot page on with the old one's cursor, and
// its use of the old one's Idempotency-Key makes a new order; the
// operators see the old orders with the ARN and the old unique ID.
func TestARecreatedOwnerSeesNoneOfItsPredecessorsOrdersEndToEnd(t *testing.T) {
	t.Parallel()
	st, _ := start(t, func(o *localstack.Options) { o.Crash = 0 })
	const client = "client-recreated"
	oldID := apigw.LocalUniqueID(apigw.UserIDPrefix, apigw.LocalUserARN(client), 0)
	old := []string{submit(t, st, client, "k-1"), submit(t, st, client, "")}
	var page struct {
		Orders []struct {
			OrderID string `json:"orderId"`
		} `json:"orders"`
		NextCursor string `json:"nextCursor"`
	}
	if r := call(t, "GET", st.APIURL+"/orders?limit=1", "", client, nil); r.status != 200 || json.Unmarshal([]byte(r.body), &page) != nil || page.NextCursor == "" {
		t.Fatalf("the old user's first page: %d %s", r.status, r.body)
	}

	st.Recreate(client)
	for _, id := range old {
		if r := call(t, "GET", st.APIURL+"/orders/"+id, "", client, nil); r.status != 404 {
			t.Fatalf("the new user reading the old one's %s: %d %s", id, r.status, r.body)
		}
	}
	if r := call(t, "GET", st.APIURL+"/orders", "", client, nil); r.status != 200 || strings.Contains(r.body, old[0]) || strings.Contains(r.body, old[1]) {
		t.Fatalf("the new user's listing: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", st.APIURL+"/orders?cursor="+url.QueryEscape(page.NextCursor), "", client, nil); r.status != 400 || !strings.Contains(r.body, `"field":"cursor"`) {
		t.Fatalf("the old user's cursor for the new one: %d %s", r.status, r.body)
	}
	r := call(t, "POST", st.APIURL+"/orders", order, client, map[string]string{"Idempotency-Key": "k-1"})
	if r.status != 202 || strings.Contains(r.body, old[0]) {
		t.Fatalf("the old user's key for the new one: %d %s", r.status, r.body)
	}
	mine := submit(t, st, client, "k-1") // its own retry is its order's replay
	if !strings.Contains(r.body, mine) {
		t.Fatalf("the new user's retry made %s, its first answer %s", mine, r.body)
	}
	if r := call(t, "GET", st.APIURL+"/orders/"+mine, "", client, nil); r.status != 200 {
		t.Fatalf("the new user reading its order: %d %s", r.status, r.body)
	}

	out, code := sasctl(t, st, "show", old[0])
	if code != 0 || !strings.Contains(out, apigw.LocalUserARN(client)) || !strings.Contains(out, oldID) {
		t.Fatalf("sasctl show of the old user's order = %d (want its owner %s, %s)\n%s", code, apigw.LocalUserARN(client), oldID, out)
	}
}
