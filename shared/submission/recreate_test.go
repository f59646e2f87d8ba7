package submission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/workflow"
)

// withUserID makes req come from the principal userArn whose unique ID
// API Gateway passes as userId: an IAM user's AIDA…, a role session's
// AROA…:SESSION.
func withUserID(req events.APIGatewayV2HTTPRequest, userArn, userID string) events.APIGatewayV2HTTPRequest {
	req = as(req, userArn)
	req.RequestContext.Authorizer.IAM.UserID = userID
	req.RequestContext.Authorizer.IAM.CallerID = userID
	return req
}

// TestARecreatedPrincipalSeesNoneOfItsPredecessorsOrders: an IAM user, and
// a role, deleted and created again under the same name have the same ARN
// and a new unique ID. The new one is a client of its own: the orders of
// the old one are 404 to it, byte for byte like a missing order's; its
// listing shows none of them, and refuses the old one's cursor; the old
// one's Idempotency-Key, with the same body or another, makes it a new
// order (202, not a replay, not a 422). Another session of the new role is
// the new role. The operators still see the old one's orders, with the ARN
// and the unique ID of the principal that made them.
func TestARecreatedPrincipalSeesNoneOfItsPredecessorsOrders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, arn, before, after, otherSession string
	}{
		{"IAM user", callerA, "AIDAPREDECESSOR0USR1", "AIDASUCCESSOR00USR01", ""},
		{"role", callerB, "AROAPREDECESSOR0ROL1:session-1", "AROASUCCESSOR00ROL01:session-1", "AROASUCCESSOR00ROL01:other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			clk := f.h.clk.(*clock.Fake)
			do := func(req events.APIGatewayV2HTTPRequest, userID string) events.APIGatewayV2HTTPResponse {
				clk.Advance(time.Second) // distinct creation times
				return f.do(t, withUserID(req, tc.arn, userID))
			}
			const key, key2 = "checkout-1", "checkout-2"
			// The old principal's orders: two with a key, one without.
			var old []string
			for _, req := range []events.APIGatewayV2HTTPRequest{postOrder(validBody, "Idempotency-Key", key), postOrder(validBody, "Idempotency-Key", key2), postOrder(validBody)} {
				old = append(old, readAccepted(t, do(req, tc.before)).OrderID)
			}
			oldPage := readList(t, do(ownOrders("limit=1", tc.arn), tc.before))
			if len(oldPage.Orders) != 1 || oldPage.NextCursor == "" {
				t.Fatalf("the old principal's first page: %+v", oldPage)
			}

			// The new principal reads none of them: 404, as a missing order.
			missing := newFixture(t, nil)
			for _, id := range old {
				got := do(request("GET", "/orders/"+id, nil, ""), tc.after)
				want := missing.do(t, withUserID(request("GET", "/orders/"+id, nil, ""), tc.arn, tc.after))
				if got.StatusCode != 404 || got.Body != want.Body {
					t.Fatalf("the new principal reading the old one's %s: %d %s; a missing order: %d %s", id, got.StatusCode, got.Body, want.StatusCode, want.Body)
				}
			}
			// Lists none of them, and cannot page on with the old cursor.
			if l := readList(t, do(ownOrders("", tc.arn), tc.after)); len(l.Orders) != 0 {
				t.Fatalf("the new principal lists %+v", l.Orders)
			}
			p := readProblem(t, do(ownOrders("cursor="+oldPage.NextCursor, tc.arn), tc.after), 400)
			if len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
				t.Fatalf("the old principal's cursor for the new one: %+v", p)
			}
			// Cannot replay the old one's key: the same body makes a new
			// order, another body too (no 422 telling it the key was used).
			same := do(postOrder(validBody, "Idempotency-Key", key), tc.after)
			mine := readAccepted(t, same).OrderID
			if mine == old[0] || same.Headers[ReplayedHeader] != "" {
				t.Fatalf("the old principal's key replayed %s for the new one (old %s), Idempotent-Replayed %q", mine, old[0], same.Headers[ReplayedHeader])
			}
			other := do(postOrder(strings.Replace(validBody, `"quantity":2`, `"quantity":3`, 1), "Idempotency-Key", key2), tc.after)
			if id := readAccepted(t, other).OrderID; id == old[1] || other.Headers[ReplayedHeader] != "" {
				t.Fatalf("the old principal's key with another body: %s (old %s), Idempotent-Replayed %q", id, old[1], other.Headers[ReplayedHeader])
			}
			// Its own key replays its own order, also from another session.
			for _, id := range []string{tc.after, tc.otherSession} {
				if id == "" {
					continue
				}
				again := do(postOrder(validBody, "Idempotency-Key", key), id)
				if readAccepted(t, again).OrderID != mine || again.Headers[ReplayedHeader] != "true" {
					t.Fatalf("the new principal's retry as %s: %s %v", id, again.Body, again.Headers)
				}
			}
			// Its listing is its own orders only.
			got := orderIDs(readList(t, do(ownOrders("", tc.arn), tc.after)).Orders)
			if len(got) != 2 || got[1] != mine {
				t.Fatalf("the new principal lists %v; want its 2 orders, %s first made", got, mine)
			}
			for _, id := range got {
				for _, o := range old {
					if id == o {
						t.Fatalf("the new principal lists the old one's %s", o)
					}
				}
			}

			// The operators see the old orders, with who made them.
			r := f.do(t, as(request("GET", "/ops/orders/"+old[0], nil, ""), callerOp))
			prefix, _, _ := strings.Cut(tc.before, ":")
			if r.StatusCode != 200 || !strings.Contains(r.Body, fmt.Sprintf(`"ownerId":%q`, prefix)) {
				t.Fatalf("the operators' view of the old principal's order: %d %s", r.StatusCode, r.Body)
			}
		})
	}
}

// TestOperatorsReadTheOwnerFromTheOrder: a record keeps the unique ID of
// its owner alone (workflow.State.Owner), so the operators' view reads the
// owner's ARN from the order: with it the ARN and the ID; without it the
// ID alone; when the order cannot be read, a 500 and nothing else. A
// record of an owner without an ID keeps the owner itself, and its view
// reads no order.
func TestOperatorsReadTheOwnerFromTheOrder(t *testing.T) {
	t.Parallel()
	type view struct {
		Owner   string `json:"owner"`
		OwnerID string `json:"ownerId"`
	}
	const root = "arn:aws:iam::123456789012:root"
	for _, tc := range []struct {
		name      string
		caller    string
		withOrder bool
		hook      fault
		status    int
		want      view
		reads     int // of orders
	}{
		{"an IAM user's", callerA, true, nil, 200, view{callerA, ownerA.ID}, 1},
		{"a role's", callerB, true, nil, 200, view{ownerB, ownerOfB.ID}, 1},
		{"an IAM user's without its order", callerA, false, nil, 200, view{OwnerID: ownerA.ID}, 1},
		{"an IAM user's, the order unreadable", callerA, true, failing(failure{method: "GetOrder", err: errStoreDown}), 500, view{}, 1},
		{"the root user's", root, true, nil, 200, view{Owner: root}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.hook)
			st := at(orderA, workflow.Error, 1, 2)
			ownBy(&st, tc.caller)
			owner := mustOwner(tc.caller)
			if st.Owner != "" && st.OwnerID != "" {
				t.Fatalf("the record keeps both %q and %q", st.Owner, st.OwnerID)
			}
			if tc.withOrder {
				if err := f.store.CreateOrder(context.Background(), workflow.Order{OrderID: orderA, Owner: owner.Name, OwnerID: owner.ID, CreatedAt: st.CreatedAt}, st); err != nil {
					t.Fatal(err)
				}
			} else {
				f.put(st)
			}
			r := f.do(t, request("GET", "/ops/orders/"+orderA, nil, ""))
			if got := f.called("GetOrder"); got != tc.reads {
				t.Errorf("%d reads of the order, want %d", got, tc.reads)
			}
			if tc.status != 200 {
				readProblem(t, r, tc.status)
				return
			}
			var got view
			if err := json.Unmarshal([]byte(r.Body), &got); r.StatusCode != 200 || err != nil || got != tc.want {
				t.Fatalf("the operators' view: %d %s; want %+v", r.StatusCode, r.Body, tc.want)
			}
			// The owner reads it too, by its unique ID.
			if r := f.do(t, as(request("GET", "/orders/"+orderA, nil, ""), tc.caller)); r.StatusCode != 200 || strings.Contains(r.Body, "owner") {
				t.Fatalf("the owner's view: %d %s", r.StatusCode, r.Body)
			}
		})
	}
}

// TestAnOrderNotYetStampedWithItsOwnersIDIsNoClients: an order of an IAM
// user written before owners' unique IDs were recorded names its owner by
// ARN alone, which no caller is matched on any more: until an operator
// stamps it with its owner's ID (sasctl owners stamp), the user with that
// ARN does not read it, list it or replay its key, whoever holds the ARN
// now; the operators see it, without an owner ID.
func TestAnOrderNotYetStampedWithItsOwnersIDIsNoClients(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	st := at(orderA, workflow.Processed, 1, 1)
	st.Owner, st.OwnerID = callerA, ""
	o := workflow.Order{OrderID: orderA, Owner: callerA, IdempotencyKey: "k", RequestHash: mustDecode(t, validBody).Hash(), CreatedAt: st.CreatedAt}
	if err := f.store.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatal(err)
	}
	readProblem(t, f.do(t, request("GET", "/orders/"+orderA, nil, "")), 404)
	if l := readList(t, f.do(t, ownOrders("", callerA))); len(l.Orders) != 0 {
		t.Fatalf("the user lists %+v", l.Orders)
	}
	r := f.do(t, postOrder(validBody, "Idempotency-Key", "k"))
	if id := readAccepted(t, r).OrderID; id == orderA || r.Headers[ReplayedHeader] != "" {
		t.Fatalf("the key of the unstamped order made %s, Idempotent-Replayed %q", id, r.Headers[ReplayedHeader])
	}
	ops := f.do(t, request("GET", "/ops/orders/"+orderA, nil, ""))
	if ops.StatusCode != 200 || !strings.Contains(ops.Body, `"owner":"`+callerA+`"`) || strings.Contains(ops.Body, "ownerId") {
		t.Fatalf("the operators' view: %d %s", ops.StatusCode, ops.Body)
	}
}
