package localstack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/submission"
)

// mistakenClient is a client whose IAM policy lets it invoke the whole API
// (execute-api:Invoke on *) instead of the client policy.
const mistakenClient = "mistaken-client"

// TestOperatorRoutesAreRefusedByTheHandlerTooEndToEnd runs the operator
// routes through the local API over HTTP, which emulates the stack's
// policies: a client (the client policy) gets API Gateway's own 403 from
// the IAM check; a client whose policy allows every route by mistake gets
// through API Gateway and is refused by the Submission with its 403
// problem; the local operator, a session of the local operator role, is
// served. A request signed sixteen minutes ago is refused, and so is one
// whose headers are over the HTTP API's quota.
func TestOperatorRoutesAreRefusedByTheHandlerTooEndToEnd(t *testing.T) {
	t.Parallel()
	st, _ := start(t, func(o *localstack.Options) { o.InvokeAll = []string{mistakenClient} })
	if localstack.OperatorAccessKey != opsclient.LocalAccessKey {
		t.Fatalf("the local operator %q is not the key sasctl signs with, %q", localstack.OperatorAccessKey, opsclient.LocalAccessKey)
	}
	id := submit(t, st, testClient, "")
	for _, r := range submission.Routes() {
		if !r.Operator {
			continue
		}
		url := st.APIURL + strings.ReplaceAll(r.Path, "{id}", id)
		if r.Path == "/ops/orders" {
			url += "?state=Error"
		}
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			if a := call(t, r.Method, url, "", testClient, nil); a.status != 403 || a.body != `{"message":"Forbidden"}` {
				t.Errorf("a client: %d %s; want API Gateway's 403", a.status, a.body)
			}
			a := call(t, r.Method, url, "", mistakenClient, nil)
			if a.status != 403 || !strings.Contains(a.body, `"type":"`+submission.ProblemNotOperator+`"`) {
				t.Errorf("a client allowed every route: %d %s; want the handler's 403 problem", a.status, a.body)
			}
			// Served: whatever the order's state makes of it, not a refusal.
			if a := call(t, r.Method, url, "", localstack.OperatorAccessKey, nil); a.status == 403 || a.status >= 500 {
				t.Errorf("the local operator: %d %s", a.status, a.body)
			}
		})
	}
	// The client routes stay the client's.
	if a := call(t, "GET", st.APIURL+"/orders/"+id, "", testClient, nil); a.status != 200 {
		t.Fatalf("a client reading its order: %d %s", a.status, a.body)
	}

	// Signed sixteen minutes ago: the signature has expired.
	a := callAt(t, "GET", st.APIURL+"/orders/"+id, "", testClient, time.Now().Add(-16*time.Minute), nil)
	if a.status != 403 || !strings.HasPrefix(a.body, `{"message":"Signature expired: `) || !strings.HasSuffix(a.body, ` - 5 min.)"}`) {
		t.Fatalf("a request signed 16 minutes ago: %d %s", a.status, a.body)
	}
	// Headers over the quota: refused before anything else.
	a = callAt(t, "GET", st.APIURL+"/orders/"+id, "", testClient, time.Now(), map[string]string{"X-Padding": strings.Repeat("p", apigw.MaxHeaderBytes)})
	if a.status != http.StatusRequestHeaderFieldsTooLarge || a.body != `{"message":"Request Header Fields Too Large"}` {
		t.Fatalf("a request with %d bytes of headers: %d %s", apigw.MaxHeaderBytes, a.status, a.body)
	}
}

// TestEachCognitoUserIsAClientOfTheirOwn: two users of one Cognito identity
// pool call the local API with the pool's credentials, which API Gateway
// passes as the same role session for both, beside each one's Cognito
// identity. Each is a client of their own: each reads and lists only their
// own orders, the other's is 404 as a missing one, and the same
// Idempotency-Key makes an order for each. A guest (unauthenticated)
// identity of the pool is a client of its own too; none is an operator.
func TestEachCognitoUserIsAClientOfTheirOwn(t *testing.T) {
	t.Parallel()
	st, _ := start(t, nil)
	const (
		ana   = "cognito-1f6b2c3d-0000-4000-8000-00000000a0a0"
		ben   = "cognito-2e7c3d4e-0000-4000-8000-00000000b0b0"
		guest = "cognito-guest-3d8d4e5f-0000-4000-8000-00000000c0c0"
	)
	anaOrder, benOrder, guestOrder := submit(t, st, ana, "cart-1"), submit(t, st, ben, "cart-1"), submit(t, st, guest, "")
	if anaOrder == benOrder {
		t.Fatalf("one Idempotency-Key from two users of the pool made one order %s", anaOrder)
	}
	for _, tc := range []struct {
		caller, own string
		others      []string
	}{
		{ana, anaOrder, []string{benOrder, guestOrder}},
		{ben, benOrder, []string{anaOrder, guestOrder}},
		{guest, guestOrder, []string{anaOrder, benOrder}},
	} {
		if a := call(t, "GET", st.APIURL+"/orders/"+tc.own, "", tc.caller, nil); a.status != 200 || !strings.Contains(a.body, tc.own) {
			t.Errorf("%s reading their order: %d %s", tc.caller, a.status, a.body)
		}
		for _, other := range tc.others {
			if a := call(t, "GET", st.APIURL+"/orders/"+other, "", tc.caller, nil); a.status != 404 {
				t.Errorf("%s reading another user's order %s: %d %s", tc.caller, other, a.status, a.body)
			}
		}
		var page struct {
			Orders []struct {
				OrderID string `json:"orderId"`
			} `json:"orders"`
		}
		a := call(t, "GET", st.APIURL+"/orders", "", tc.caller, nil)
		if err := json.Unmarshal([]byte(a.body), &page); a.status != 200 || err != nil || len(page.Orders) != 1 || page.Orders[0].OrderID != tc.own {
			t.Errorf("%s's listing: %d %s; want only %s", tc.caller, a.status, a.body, tc.own)
		}
		// The pool's role has the client policy: no operator route.
		if a := call(t, "GET", st.APIURL+"/ops/orders/"+tc.own, "", tc.caller, nil); a.status != 403 {
			t.Errorf("%s on an operator route: %d %s", tc.caller, a.status, a.body)
		}
	}
	// The operators see who owns each: the pool and the identity.
	out, code := sasctl(t, st, "show", anaOrder)
	if code != 0 || !strings.Contains(out, "cognito-identity:us-east-1:"+apigw.LocalIdentityPoolGUID+"/us-east-1:"+strings.TrimPrefix(ana, "cognito-")) {
		t.Fatalf("sasctl show = %d\n%s", code, out)
	}
}

// TestTheAPIDocumentSaysOnlyWhatIsTrue: through the local API over HTTP,
// which like the stack sends every request no route matches to the
// handler through its catch-all route, every method a path of the API
// document does not take gets the document's 405 problem with Allow naming
// the path's methods, for a client and for the operator alike, and a path
// the document does not have gets its 404 problem.
func TestTheAPIDocumentSaysOnlyWhatIsTrue(t *testing.T) {
	t.Parallel()
	st, _ := start(t, nil)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	id := submit(t, st, testClient, "")
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"}
	n := 0
	for path, item := range doc.Paths {
		var takes []string
		for _, m := range methods {
			if _, ok := item[strings.ToLower(m)]; ok {
				takes = append(takes, m)
			}
		}
		if len(takes) == 0 || item["x-sasflow-other-methods"] == nil {
			t.Fatalf("path %s: methods %v, other methods %s", path, takes, item["x-sasflow-other-methods"])
		}
		url := st.APIURL + strings.ReplaceAll(path, "{id}", id)
		for _, m := range methods {
			if slices.Contains(takes, m) {
				continue
			}
			for _, caller := range []string{testClient, localstack.OperatorAccessKey} {
				n++
				resp := callFull(t, m, url, caller)
				allow := strings.Split(resp.Header.Get("Allow"), ", ")
				slices.Sort(allow)
				if resp.StatusCode != 405 || !slices.Equal(allow, takes) || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s as %s: %d, Allow %v, %s; want 405 with Allow %v", m, path, caller, resp.StatusCode, allow, resp.Header.Get("Content-Type"), takes)
				}
				if m != "HEAD" && !strings.Contains(resp.body, `"type":"https://sasflow.dev/problems/method-not-allowed"`) {
					t.Errorf("%s %s as %s: %s", m, path, caller, resp.body)
				}
			}
		}
	}
	if n < 2*5*len(doc.Paths) {
		t.Fatalf("only %d requests for %d paths", n, len(doc.Paths))
	}
	for _, p := range []string{"/", "/nowhere", "/orders/" + id + "/items", "/ops"} {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			resp := callFull(t, m, st.APIURL+p, testClient)
			if resp.StatusCode != 404 || !strings.Contains(resp.body, `"type":"https://sasflow.dev/problems/not-found"`) {
				t.Errorf("%s %s: %d %s; want the handler's 404 problem", m, p, resp.StatusCode, resp.body)
			}
		}
	}
}

// fullAnswer is an answer with its headers.
type fullAnswer struct {
	*http.Response
	body string
}

// callFull sends an unbodied request signed as accessKey now.
func callFull(t *testing.T, method, url, accessKey string) fullAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := localstack.SignRequest(context.Background(), req, nil, accessKey); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fullAnswer{resp, string(b)}
}
