package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// listFunc answers a listing by state in place of the store.
type listFunc func(state workflow.ProcessState, limit int, cursor string) (statestore.Page, error)

// listing is a store whose listing by state is list: memstore's Fault hook
// sees neither a listing nor its arguments.
type listing struct {
	Store
	list listFunc
}

func (l listing) ListByState(_ context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
	return l.list(state, limit, cursor)
}

// getOrders is the operators' listing by state, GET /ops/orders.
func getOrders(rawQuery string) events.APIGatewayV2HTTPRequest {
	r := request("GET", "/ops/orders", nil, "")
	r.RawQueryString = rawQuery
	return r
}

// ownOrders is a client's listing of its own orders, GET /orders.
func ownOrders(rawQuery, userArn string) events.APIGatewayV2HTTPRequest {
	r := as(request("GET", "/orders", nil, ""), userArn)
	r.RawQueryString = rawQuery
	return r
}

// follow turns a links.next value into the request a client would send:
// the same caller, the same resource.
func follow(t *testing.T, link string, prev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Path != prev.RawPath || u.Host != "" {
		t.Fatalf("next link %q of %s: %v", link, prev.RawPath, err)
	}
	next := prev
	next.RawQueryString, next.QueryStringParameters = u.RawQuery, nil
	return next
}

// listedOrder is what the tests read of an order in a listing.
type listedOrder struct {
	OrderID string `json:"orderId"`
	State   string `json:"state"`
	Status  string `json:"status"`
}

type listResponse struct {
	Orders     []listedOrder `json:"orders"`
	NextCursor string        `json:"nextCursor"`
	Links      struct {
		Next string `json:"next"`
	} `json:"links"`
}

// walk reads a listing from req to its last page through links.next: the
// orders listed, and the cursor of every page but the last.
func (f *fixture) walk(t *testing.T, req events.APIGatewayV2HTTPRequest) (orders []listedOrder, cursors []string) {
	t.Helper()
	for range 10 {
		l := readList(t, f.do(t, req))
		orders = append(orders, l.Orders...)
		if l.NextCursor == "" {
			return orders, cursors
		}
		cursors = append(cursors, l.NextCursor)
		req = follow(t, l.Links.Next, req)
	}
	t.Fatal("paging does not end")
	return nil, nil
}

// orderIDs lists the IDs of orders.
func orderIDs(orders []listedOrder) []string {
	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.OrderID
	}
	return ids
}

func readList(t *testing.T, resp events.APIGatewayV2HTTPResponse) listResponse {
	t.Helper()
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "application/json" || resp.Headers["Cache-Control"] != "no-store" {
		t.Fatalf("status %d, headers %v, body %s", resp.StatusCode, resp.Headers, resp.Body)
	}
	var l listResponse
	if err := json.Unmarshal([]byte(resp.Body), &l); err != nil {
		t.Fatalf("list body %s: %v", resp.Body, err)
	}
	if (l.NextCursor == "") != (l.Links.Next == "") {
		t.Fatalf("nextCursor and links.next disagree: %s", resp.Body)
	}
	if l.NextCursor == "" && (strings.Contains(resp.Body, "nextCursor") || strings.Contains(resp.Body, "links")) {
		t.Fatalf("last page carries paging members: %s", resp.Body)
	}
	return l
}

// TestListOrdersPages walks a listing of five orders two at a time: three
// pages, newest entry into Error first, each order once, the other states
// left out.
func TestListOrdersPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("err-%d", i)
		st := at(id, workflow.Error, 1, 1)
		st.UpdatedAt = testNow.Add(time.Duration(-i) * time.Minute)
		f.put(st)
		want = append(want, id) // err-0 changed last, so it comes first
	}
	f.put(at("pending-1", workflow.Pending, 0, 0))
	f.put(at("done-1", workflow.Processed, 1, 1))

	var got []string
	req := getOrders("state=Error&limit=2")
	for page := 1; ; page++ {
		l := readList(t, f.do(t, req))
		for _, o := range l.Orders {
			if o.State != "Error" || o.Status != "error" {
				t.Fatalf("page %d lists %+v", page, o)
			}
			got = append(got, o.OrderID)
		}
		if l.NextCursor == "" {
			if page != 3 || len(l.Orders) != 1 {
				t.Fatalf("listing ended on page %d with %d orders, want page 3 with 1", page, len(l.Orders))
			}
			break
		}
		if len(l.Orders) != 2 || page > 3 {
			t.Fatalf("page %d has %d orders", page, len(l.Orders))
		}
		if wantLink := "/ops/orders?state=Error&limit=2&cursor=" + url.QueryEscape(l.NextCursor); l.Links.Next != wantLink {
			t.Fatalf("links.next %q, want %q", l.Links.Next, wantLink)
		}
		req = follow(t, l.Links.Next, req)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func TestListOrdersBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	st := at(orderA, workflow.Error, 1, 2)
	st.ClientID, st.FailureCount, st.EventSeq = "shop.web-1", 1, 3
	st.UpdatedAt = testNow
	st.Steps[0].Output = json.RawMessage(`{"reservationId":"r-1"}`)
	f.put(st)
	resp := f.do(t, getOrders("state=Error"))
	want := `{"orders":[{"orderId":"` + orderA + `","state":"Error","status":"error","priority":"normal","step":"charge-payment","stepIndex":1,` +
		`"failureCount":1,"attempt":3,"lastError":"card-declined: the issuer declined the card",` +
		`"reason":"rejected","reasonText":"step charge-payment was refused by its service (card-declined)","clientId":"shop.web-1",` +
		`"createdAt":"2025-02-04T09:15:30Z","updatedAt":"2025-02-04T10:15:30Z"}]}`
	if readList(t, resp); resp.Body != want {
		t.Fatalf("body\n%s\nwant\n%s", resp.Body, want)
	}

	empty := f.do(t, getOrders("state=Compensated"))
	if readList(t, empty); empty.Body != `{"orders":[]}` {
		t.Fatalf("empty listing %s", empty.Body)
	}
}

// TestListOrdersStoreQuery checks what the store is asked, however the
// query arrives.
func TestListOrdersStoreQuery(t *testing.T) {
	t.Parallel()
	type call struct {
		state  workflow.ProcessState
		limit  int
		cursor string
	}
	tests := []struct {
		name   string
		raw    string
		params map[string]string
		want   call
	}{
		{"default limit", "state=Cancelled", nil, call{workflow.Cancelled, DefaultListLimit, ""}},
		{"every parameter", "cursor=abc%2B%2F%3D&limit=100&state=CompensationFailed", nil, call{workflow.CompensationFailed, 100, "abc+/="}},
		{"empty limit and cursor", "state=Error&limit=&cursor=", nil, call{workflow.Error, DefaultListLimit, ""}},
		{"leading zeros", "state=Error&limit=007", nil, call{workflow.Error, 7, ""}},
		{"parameters only", "", map[string]string{"state": "Compensated", "limit": "1", "cursor": "c"}, call{workflow.Compensated, 1, "c"}},
		{"raw string wins", "state=Error", map[string]string{"state": "Pending"}, call{workflow.Error, DefaultListLimit, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []call
			f := newFixtureOver(t, nil, func(s Store) Store {
				return listing{s, func(state workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
					got = append(got, call{state, limit, cursor})
					return statestore.Page{}, nil
				}}
			})
			req := getOrders(tt.raw)
			req.QueryStringParameters = tt.params
			readList(t, f.do(t, req))
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("store asked %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestListOrdersRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		raw        string
		params     map[string]string
		list       listFunc // nil: the in-memory store's own listing
		status     int
		typ        string
		wantFields []string
		wantDetail string
	}{
		{name: "no query", status: 400, typ: ProblemMalformed, wantFields: []string{"state"},
			wantDetail: "state: is required; use one of Error, Waiting, Compensated, CompensationFailed, Cancelled"},
		{name: "empty state", raw: "state=", status: 400, typ: ProblemMalformed, wantFields: []string{"state"}},
		{name: "unknown state", raw: "state=Failed", status: 400, typ: ProblemMalformed, wantFields: []string{"state"},
			wantDetail: "state: must be one of Error, Waiting, Compensated, CompensationFailed, Cancelled"},
		// The states in flight and Processed have no listing: 400, naming
		// the states that do.
		{name: "state in flight", raw: "state=Processing", status: 400, typ: ProblemMalformed, wantFields: []string{"state"},
			wantDetail: "state: Processing is not listed: only Error, Waiting, Compensated, CompensationFailed, Cancelled are; " +
				"read an order in any state by its ID, GET /ops/orders/{id}"},
		{name: "state Processed", raw: "state=Processed&limit=5", status: 400, typ: ProblemMalformed, wantFields: []string{"state"},
			wantDetail: "state: Processed is not listed"},
		{name: "state not listed, with other faults", raw: "state=Pending&limit=0", status: 400, typ: ProblemMalformed,
			wantFields: []string{"state", "limit"}, wantDetail: "the query string has invalid parameters"},
		{name: "state case", raw: "state=error", status: 400, typ: ProblemMalformed, wantFields: []string{"state"}},
		{name: "state repeated", raw: "state=Error&state=Pending", status: 400, typ: ProblemMalformed, wantFields: []string{"state"},
			wantDetail: "state: is given 2 times; give it once"},
		{name: "state joined by API Gateway", params: map[string]string{"state": "Error,Pending"}, status: 400, typ: ProblemMalformed, wantFields: []string{"state"}},
		{name: "limit zero", raw: "state=Error&limit=0", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"},
			wantDetail: "limit: must be an integer within 1..100"},
		{name: "limit too big", raw: "state=Error&limit=101", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"}},
		{name: "limit huge", raw: "state=Error&limit=99999999999999999999", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"}},
		{name: "limit negative", raw: "state=Error&limit=-1", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"}},
		{name: "limit signed", raw: "state=Error&limit=%2B5", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"}},
		{name: "limit text", raw: "state=Error&limit=ten", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"}},
		{name: "limit repeated", raw: "state=Error&limit=5&limit=6", status: 400, typ: ProblemMalformed, wantFields: []string{"limit"}},
		{name: "cursor too long", raw: "state=Error&cursor=" + strings.Repeat("c", maxCursorLen+1), status: 400, typ: ProblemMalformed, wantFields: []string{"cursor"}},
		{name: "unknown parameter", raw: "state=Error&limt=5", status: 400, typ: ProblemMalformed, wantFields: []string{"limt"},
			wantDetail: "limt: is not a parameter of this resource; use state, limit and cursor"},
		{name: "nameless parameter", raw: "state=Error&=5", status: 400, typ: ProblemMalformed, wantDetail: "a parameter has no name"},
		{name: "every fault at once", raw: "zz=1&cursor=a&cursor=b&limit=x&aa=2", status: 400, typ: ProblemMalformed,
			wantFields: []string{"state", "limit", "cursor", "aa", "zz"}, wantDetail: "the query string has invalid parameters"},
		{name: "bad escape", raw: "state=Error&cursor=%zz", status: 400, typ: ProblemMalformed, wantDetail: "the query string is not well-formed"},
		{name: "semicolon", raw: "state=Error;limit=5", status: 400, typ: ProblemMalformed, wantDetail: "the query string is not well-formed"},
		{name: "cursor refused by the store", raw: "state=Error&cursor=forged", status: 400, typ: ProblemMalformed, wantFields: []string{"cursor"},
			wantDetail: "cursor: is not a cursor this API returned; list again without it"},
		{name: "store fails", raw: "state=Error", list: func(workflow.ProcessState, int, string) (statestore.Page, error) {
			return statestore.Page{}, errors.New("dynamodb: throttled arn:aws:dynamodb:secret-table")
		}, status: 500, typ: ProblemInternal, wantDetail: "internal error"},
		{name: "store's own bad-cursor error", raw: "state=Error&cursor=x", list: func(workflow.ProcessState, int, string) (statestore.Page, error) {
			return statestore.Page{}, fmt.Errorf("list: %w: not base64url", statestore.ErrBadCursor)
		}, status: 400, typ: ProblemMalformed, wantFields: []string{"cursor"}},
		// The in-memory store decodes cursors as the DynamoDB store does.
		{name: "cursor the store cannot decode", raw: "state=Error&cursor=x", status: 400, typ: ProblemMalformed, wantFields: []string{"cursor"}},
		{name: "cursor of another state's listing", raw: "state=Error&cursor=" + statestore.EncodeCursor(statestore.Cursor{State: "Cancelled", After: statestore.SortKey(testNow, orderA)}),
			status: 400, typ: ProblemMalformed, wantFields: []string{"cursor"}},
		{name: "cursor of a listing before it was sharded", raw: "state=Error&cursor=eyJzIjoiRXJyb3IiLCJvIjoiYS0xIiwiYyI6MTJ9",
			status: 400, typ: ProblemMalformed, wantFields: []string{"cursor"}},
		{name: "store refuses the state", raw: "state=Error", list: func(workflow.ProcessState, int, string) (statestore.Page, error) {
			return statestore.Page{}, fmt.Errorf("list Error: %w", statestore.ErrNotListed)
		}, status: 400, typ: ProblemMalformed, wantFields: []string{"state"},
			wantDetail: "state: Error is not listed: only Error, Waiting, Compensated, CompensationFailed, Cancelled are"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			if tt.list != nil {
				f = newFixtureOver(t, nil, func(s Store) Store { return listing{s, tt.list} })
			}
			req := getOrders(tt.raw)
			req.QueryStringParameters = tt.params
			resp := f.do(t, req)
			p := readProblem(t, resp, tt.status)
			if p.Type != tt.typ || p.RequestID != "req-1" {
				t.Fatalf("problem %+v, want type %s", p, tt.typ)
			}
			if tt.wantDetail != "" && !strings.HasPrefix(p.Detail, tt.wantDetail) {
				t.Fatalf("detail %q, want %q", p.Detail, tt.wantDetail)
			}
			var fields []string
			for _, fe := range p.Errors {
				fields = append(fields, fe.Field)
			}
			if tt.wantFields != nil && !reflect.DeepEqual(fields, tt.wantFields) {
				t.Fatalf("fields %q, want %q", fields, tt.wantFields)
			}
			if strings.Contains(resp.Body, "secret") || strings.Contains(resp.Body, "base64url") {
				t.Fatalf("leaks the cause: %s", resp.Body)
			}
		})
	}
}

func TestListQueryEncode(t *testing.T) {
	t.Parallel()
	q := ListQuery{State: workflow.CompensationFailed, Limit: 7, Cursor: "a+b/c=&d e"}
	if got, want := q.Encode(), "state=CompensationFailed&limit=7&cursor=a%2Bb%2Fc%3D%26d+e"; got != want {
		t.Fatalf("Encode = %q, want %q", got, want)
	}
	back, err := DecodeListQuery(q.Encode(), nil)
	if err != nil || back != q {
		t.Fatalf("round trip gave %+v, %v", back, err)
	}
	own := ListQuery{Limit: 3, Cursor: "x y"}
	if got, want := own.Encode(), "limit=3&cursor=x+y"; got != want {
		t.Fatalf("Encode = %q, want %q", got, want)
	}
	if back, err := DecodeOwnListQuery(own.Encode(), nil); err != nil || back != own {
		t.Fatalf("round trip gave %+v, %v", back, err)
	}
}

// FuzzListQuery throws arbitrary query strings at the decoder, both as the
// raw string and as API Gateway's parameter map: it must not panic, every
// query it accepts must be within the limits, and the link built from an
// accepted query must decode to the same query.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{
		"", "state=Error", "state=Error&limit=2&cursor=abc", "state=Error&state=Error", "limit=100&state=Pending",
		"state=Error&limit=007", "state=%45rror", "state=Error&cursor=%zz", "a=1;b=2", "=&=&", "state=Error&limit=",
		"state=Error&cursor=" + strings.Repeat("x", maxCursorLen), "state=Cancelled&limit=+1", "STATE=Error",
	} {
		f.Add(s, "Error", "25", "")
	}
	f.Add("", "Pending", "", "c,d")
	f.Add("", "Error,Pending", "1", "")
	f.Fuzz(func(t *testing.T, raw, state, limit, cursor string) {
		check := func(q ListQuery, err error) {
			if err != nil {
				var qe *QueryError
				if !errors.As(err, &qe) || len(qe.Errors) == 0 {
					t.Fatalf("error %v is not a QueryError with faults", err)
				}
				if p := queryProblem(err); p.Status != 400 || p.Detail == "" {
					t.Fatalf("problem %+v", p)
				}
				return
			}
			if !q.State.Listed() || q.Limit < 1 || q.Limit > MaxListLimit || len(q.Cursor) > maxCursorLen {
				t.Fatalf("accepted %+v", q)
			}
			again, err := DecodeListQuery(q.Encode(), nil)
			if err != nil || again != q {
				t.Fatalf("link query %q of %+v decodes to %+v, %v", q.Encode(), q, again, err)
			}
		}
		// A caller's own listing takes the same, without a state.
		checkOwn := func(q ListQuery, err error) {
			if err != nil {
				var qe *QueryError
				if !errors.As(err, &qe) || len(qe.Errors) == 0 {
					t.Fatalf("error %v is not a QueryError with faults", err)
				}
				return
			}
			if q.State != "" || q.Limit < 1 || q.Limit > MaxListLimit || len(q.Cursor) > maxCursorLen {
				t.Fatalf("accepted %+v", q)
			}
			again, err := DecodeOwnListQuery(q.Encode(), nil)
			if err != nil || again != q {
				t.Fatalf("link query %q of %+v decodes to %+v, %v", q.Encode(), q, again, err)
			}
		}
		check(DecodeListQuery(raw, nil))
		checkOwn(DecodeOwnListQuery(raw, nil))
		params := map[string]string{}
		for k, v := range map[string]string{paramState: state, paramLimit: limit, paramCursor: cursor} {
			if v != "" {
				params[k] = v
			}
		}
		check(DecodeListQuery("", params))
		checkOwn(DecodeOwnListQuery("", params))
	})
}
