package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// orders is the API as the tests script it: its answers are fixed
// documents, and it records the actions asked for.
type orders struct {
	mu      sync.Mutex
	page    map[workflow.ProcessState][]api.OrderSummary
	order   map[string]api.Order
	actions []string
	refuse  error
	// slow, when set, holds Workflows until it closes.
	slow chan struct{}
}

func (f *orders) ListOrders(_ context.Context, p opsclient.ListParams) (opsclient.Page, error) {
	return opsclient.Page{Page: api.Page{Orders: f.page[p.State]}}, nil
}

func (f *orders) GetOrder(_ context.Context, id string) (opsclient.Order, error) {
	o, ok := f.order[id]
	if !ok {
		return opsclient.Order{}, &opsclient.APIError{Method: "GET", Path: "/ops/orders/" + id, StatusCode: http.StatusNotFound, Problem: &api.Problem{Title: "not found"}}
	}
	return opsclient.Order{Order: o}, nil
}

func (f *orders) act(id, action string) (opsclient.Accepted, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, action+" "+id)
	if f.refuse != nil {
		return opsclient.Accepted{}, f.refuse
	}
	return opsclient.Accepted{Accepted: api.Accepted{OrderID: id, State: workflow.Pending}}, nil
}

func (f *orders) Retry(_ context.Context, id string) (opsclient.Accepted, error) {
	return f.act(id, "retry")
}

func (f *orders) Cancel(_ context.Context, id string) (opsclient.Accepted, error) {
	return f.act(id, "cancel")
}

func (f *orders) Workflows(context.Context) (opsclient.Workflows, error) {
	if f.slow != nil {
		<-f.slow
	}
	return opsclient.Workflows{Workflows: api.Workflows{Default: "order", Workflows: []api.WorkflowVersion{
		{ID: "order-v2", Name: "order", Version: 2, Current: true, Deployed: true, InFlight: 3, NeedsOperator: 1},
	}}}, nil
}

func (f *orders) done() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.actions...)
}

// queues are the DLQs as the tests script them.
type queues struct {
	pairs    []dlq.Pair
	messages []dlq.Message
	redriven []string
}

func (q *queues) Discover(context.Context) ([]dlq.Pair, error) { return q.pairs, nil }

func (q *queues) Peek(context.Context, dlq.Pair, int) ([]dlq.Message, error) {
	return q.messages, nil
}

func (q *queues) Redrive(_ context.Context, p dlq.Pair) (Redriven, error) {
	q.redriven = append(q.redriven, p.ID)
	return Redriven{Copied: true, Count: 1}, nil
}

// The values a hostile remote service, queue sender or API could put in
// front of the operator: each would run script, or add an element, if a
// page let it through unescaped.
const (
	hostileScript = `<script>alert("pwned")</script>`
	hostileImg    = `"><img src=x onerror=alert(1)>`
	hostileJSON   = `{"note":"</pre><script>alert(2)</script>","html":"<svg onload=alert(3)>"}`
)

const (
	addr    = "127.0.0.1:8765"
	token   = "test-session-token"
	errorID = "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

// errorOrder is an order in Error at its second step, its texts hostile.
func errorOrder() api.Order {
	return api.Order{
		OrderID: errorID, Workflow: "order-v2", State: workflow.Error, Status: "failed", Priority: "normal",
		Step: "charge-payment", StepIndex: 1, FailureCount: 1, Attempt: 2, LastError: hostileScript + hostileImg,
		Owner: "arn:aws:iam::000000000000:user/local", TraceID: "1-6740510d-5d9f3a2b1c4e8f7a6b5c4d3e", CreatedAt: t0, UpdatedAt: t0.Add(2 * time.Second),
		Steps: []api.StepHistory{
			{Name: "reserve-inventory", State: workflow.StepSucceeded, Attempts: 1, StartedAt: at(100 * time.Millisecond),
				FinishedAt: at(900 * time.Millisecond), Output: json.RawMessage(hostileJSON)},
			{Name: "charge-payment", State: workflow.StepFailed, Attempts: 2, Failures: 1, StartedAt: at(1500 * time.Millisecond),
				FinishedAt: at(2 * time.Second), Error: hostileImg},
		},
	}
}

// compensationFailed is an order whose undo failed.
func compensationFailed() api.Order {
	o := errorOrder()
	o.OrderID, o.State, o.LastError = "cf-1", workflow.CompensationFailed, "undo refused"
	o.Steps[0].Compensation, o.Steps[0].CompensationAttempts, o.Steps[0].CompensationFailures = workflow.StepFailed, 3, 3
	return o
}

// testServer is a console under test with the session its requests
// carry when they ask for one.
type testServer struct {
	*Server
	login   sync.Once
	session string
}

func newServer(t *testing.T) (*testServer, *orders, *queues) {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith builds the console over the scripted API and queues, with
// edit applied to its options.
func newServerWith(t *testing.T, edit func(*Options)) (*testServer, *orders, *queues) {
	t.Helper()
	o := errorOrder()
	fake := &orders{
		page:  map[workflow.ProcessState][]api.OrderSummary{workflow.Error: {o.Summary()}},
		order: map[string]api.Order{o.OrderID: o, "cf-1": compensationFailed()},
	}
	q := &queues{
		pairs: []dlq.Pair{{ID: "scheduler", Source: dlq.Queue{Name: "p-scheduler"}, DLQ: dlq.Queue{Name: "p-scheduler-dlq"}, MaxReceiveCount: 5, Depth: 2}},
		messages: []dlq.Message{
			{ID: "m-1", ReceiveCount: 6, Body: dlq.DecodeBody(message.Encode(message.NewSchedule(errorID, "order-v2", 1, "retry")))},
			{ID: hostileImg, ReceiveCount: 6, Body: dlq.DecodeBody(`{"kind":"` + strings.ReplaceAll(hostileScript, `"`, `'`) + `"}`)},
		},
	}
	opts := Options{Orders: fake, Queues: q, Addr: addr, Endpoint: "http://127.0.0.1:8080", Scope: "prefix p-", Token: token,
		Now: func() time.Time { return t0.Add(time.Minute) }}
	if edit != nil {
		edit(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: s}, fake, q
}

// request is one request to the console, as a browser would send it.
type request struct {
	method, path string
	host         string            // "" means addr
	cookie       string            // "" means none
	session      bool              // carry the session's cookie (logging in first)
	headers      map[string]string // added
	form         url.Values        // a POST's body
}

// cookieName is the console's cookie at addr's port.
const cookieName = "sasctl-ui-8765"

func (s *testServer) do(t *testing.T, r request) *http.Response {
	t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	req := httptest.NewRequest(r.method, "http://"+addr+r.path, body)
	req.Host = addr
	if r.host != "" {
		req.Host = r.host
	}
	if r.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.cookie != "" {
		req.AddCookie(&http.Cookie{Name: cookieName, Value: r.cookie})
	}
	if r.session {
		req.AddCookie(&http.Cookie{Name: cookieName, Value: s.sessionCookie(t)})
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w.Result()
}

// sessionCookie logs in once, as the browser does with the URL sasctl ui
// printed, and returns the session's cookie.
func (s *testServer) sessionCookie(t *testing.T) string {
	t.Helper()
	s.login.Do(func() {
		resp := s.do(t, request{method: "GET", path: "/?token=" + token})
		for _, c := range resp.Cookies() {
			if c.Name == cookieName {
				s.session = c.Value
			}
		}
	})
	if s.session == "" {
		t.Fatal("the token opened no session")
	}
	return s.session
}

func read(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConsoleRefusesWhatDidNotComeFromItsOwnPage: the Host check against
// DNS rebinding, the session token and cookie, the Origin or
// Sec-Fetch-Site check and the CSRF token of every POST; and none of the
// refused requests reaches the API.
func TestConsoleRefusesWhatDidNotComeFromItsOwnPage(t *testing.T) {
	t.Parallel()
	origin := map[string]string{"Origin": "http://" + addr}
	for _, tc := range []struct {
		name   string
		req    request
		status int
		code   string
		acted  bool
	}{
		{"a rebound DNS name", request{method: "GET", path: "/", host: "evil.example:8765", session: true}, 403, "host-refused", false},
		{"another port", request{method: "GET", path: "/", host: "127.0.0.1:9999", session: true}, 403, "host-refused", false},
		{"localhost for 127.0.0.1", request{method: "GET", path: "/", host: "localhost:8765", session: true}, 403, "host-refused", false},
		{"no session", request{method: "GET", path: "/"}, 401, "no-session", false},
		{"a wrong cookie", request{method: "GET", path: "/", cookie: "guess"}, 401, "no-session", false},
		{"a wrong token", request{method: "GET", path: "/?token=guess"}, 403, "token-refused", false},
		{"a POST without Origin or Sec-Fetch-Site", request{method: "POST", path: "/orders/" + errorID + "/retry", session: true,
			form: url.Values{"csrf": {"x"}}}, 403, "origin-refused", false},
		{"a POST from another origin", request{method: "POST", path: "/orders/" + errorID + "/retry", session: true,
			headers: map[string]string{"Origin": "http://evil.example"}, form: url.Values{}}, 403, "origin-refused", false},
		{"a POST from another site by Sec-Fetch-Site", request{method: "POST", path: "/orders/" + errorID + "/retry", session: true,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, form: url.Values{}}, 403, "origin-refused", false},
		{"a POST from a sandboxed frame (Origin null) of another site", request{method: "POST", path: "/orders/" + errorID + "/retry", session: true,
			headers: map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}, form: url.Values{}}, 403, "origin-refused", false},
		{"a POST without the CSRF token", request{method: "POST", path: "/orders/" + errorID + "/retry", session: true,
			headers: origin, form: url.Values{}}, 403, "csrf-refused", false},
		{"a POST with a wrong CSRF token", request{method: "POST", path: "/orders/" + errorID + "/retry", session: true,
			headers: origin, form: url.Values{"csrf": {"guess"}}}, 403, "csrf-refused", false},
		{"a bad order ID", request{method: "GET", path: "/orders/" + url.PathEscape("<x>"), session: true}, 400, "bad-order-id", false},
		{"a state not listed", request{method: "GET", path: "/list/Processed", session: true}, 400, "state-not-listed", false},
		{"a pasted ID that is none", request{method: "GET", path: "/find?id=" + url.QueryEscape("x y"), session: true}, 400, "bad-order-id", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, fake, _ := newServer(t)
			resp := s.do(t, tc.req)
			body := read(t, resp)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"title":"`+tc.code+`"`) {
				t.Fatalf("%d %s %s; want %d with problem %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, tc.code)
			}
			if got := fake.done(); len(got) > 0 {
				t.Fatalf("a refused request reached the API: %v", got)
			}
		})
	}
}

// TestConsoleTradesItsTokenForACookie: the URL's token sets an HttpOnly,
// SameSite=Strict cookie scoped to the console's port, a fresh random
// value and not the token, and leaves the address bar.
func TestConsoleTradesItsTokenForACookie(t *testing.T) {
	t.Parallel()
	s, _, _ := newServer(t)
	if want := "http://" + addr + "/?token=" + token; s.URL() != want {
		t.Fatalf("URL %s, want %s", s.URL(), want)
	}
	resp := s.do(t, request{method: "GET", path: "/orders/" + errorID + "?token=" + token})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/orders/"+errorID {
		t.Fatalf("%d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != "sasctl-ui-8765" || cs[0].Value == token || len(cs[0].Value) != 43 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" {
		t.Fatalf("cookies %+v", cs)
	}
	if resp := s.do(t, request{method: "GET", path: "/", cookie: cs[0].Value}); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie: %d", resp.StatusCode)
	}
}

// TestConsoleActsOnlyAfterAConfirmation: the retry link leads to a page
// that says what will happen and holds the form; the form's POST, from
// the page's origin with its token, retries once and leads back to the
// order.
func TestConsoleActsOnlyAfterAConfirmation(t *testing.T) {
	t.Parallel()
	s, fake, _ := newServer(t)
	resp := s.do(t, request{method: "GET", path: "/orders/" + errorID + "/retry", session: true})
	page := read(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "as attempt 3") || !strings.Contains(page, `name="csrf" value="`+s.csrf+`"`) ||
		!strings.Contains(page, `action="/orders/`+errorID+`/retry"`) {
		t.Fatalf("%d\n%s", resp.StatusCode, page)
	}
	if got := fake.done(); len(got) > 0 {
		t.Fatalf("the confirmation page acted: %v", got)
	}
	// A browser names the origin, or says same-origin; under a referrer
	// policy of no-referrer it sends Origin: null with a form's POST.
	for _, h := range []map[string]string{{"Origin": "http://" + addr}, {"Sec-Fetch-Site": "same-origin"}, {"Origin": "null", "Sec-Fetch-Site": "same-origin"}} {
		resp = s.do(t, request{method: "POST", path: "/orders/" + errorID + "/retry", session: true, headers: h, form: url.Values{"csrf": {s.csrf}}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/orders/"+errorID+"?done=retry" {
			t.Fatalf("%v: %d to %q", h, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if got := fake.done(); len(got) != 3 || got[0] != "retry "+errorID {
		t.Fatalf("actions %v", got)
	}
	// A state that does not allow it: no form, a conflict.
	resp = s.do(t, request{method: "GET", path: "/orders/cf-1/cancel", session: true})
	if body := read(t, resp); resp.StatusCode != http.StatusConflict || strings.Contains(body, `method="post"`) {
		t.Fatalf("cancel of a CompensationFailed order: %d\n%s", resp.StatusCode, body)
	}
	// The API's 409 is the page's.
	fake.refuse = &opsclient.APIError{Method: "POST", StatusCode: http.StatusConflict, Problem: &api.Problem{Detail: "the order moved on"}}
	resp = s.do(t, request{method: "POST", path: "/orders/" + errorID + "/cancel", session: true, headers: map[string]string{"Origin": "http://" + addr}, form: url.Values{"csrf": {s.csrf}}})
	if body := read(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "the order moved on") {
		t.Fatalf("a refused cancel: %d\n%s", resp.StatusCode, body)
	}
}

// scriptTag finds the script elements of a page and their attributes.
var scriptTag = regexp.MustCompile(`<script[^>]*>`)

// TestConsoleEscapesWhatTheAPIAndTheQueuesSay: hostile texts in an
// order's errors and outputs and in a DLQ message show as text on every
// page: the only script element is the console's own, carrying the
// policy's nonce, and the policy allows no other.
func TestConsoleEscapesWhatTheAPIAndTheQueuesSay(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/", "/list/Error", "/orders/" + errorID, "/orders/" + errorID + "/retry", "/dlq"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			s, _, _ := newServer(t)
			resp := s.do(t, request{method: "GET", path: path, session: true})
			page := read(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d\n%s", resp.StatusCode, page)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			nonce := regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]+)'`).FindStringSubmatch(csp)
			if nonce == nil || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "form-action 'self'") {
				t.Fatalf("CSP %q", csp)
			}
			scripts := scriptTag.FindAllString(page, -1)
			if len(scripts) != 1 || scripts[0] != `<script src="/static/console.js" nonce="`+nonce[1]+`" defer>` {
				t.Fatalf("script elements %q, want only the console's with nonce %s", scripts, nonce[1])
			}
			for _, bad := range []string{"<img", "<svg onload", "</pre><script"} {
				if strings.Contains(page, bad) {
					t.Errorf("the page holds %q unescaped", bad)
				}
			}
		})
	}
	s, _, _ := newServer(t)
	// And they are there, as text.
	page := read(t, s.do(t, request{method: "GET", path: "/orders/" + errorID, session: true}))
	for _, want := range []string{"&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&lt;svg onload=alert(3)&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the order page does not show %q", want)
		}
	}
}

// TestConsoleDrawsTheOrder: the graph colours each step and undo by its
// state, the timeline has a row per step that ran and per undo with how
// it ended, and the actions are those the state allows.
func TestConsoleDrawsTheOrder(t *testing.T) {
	t.Parallel()
	s, _, _ := newServer(t)
	page := read(t, s.do(t, request{method: "GET", path: "/orders/cf-1", session: true}))
	for _, want := range []string{
		`<li class="node st-succeeded" data-step="reserve-inventory" data-state="succeeded">`,
		`<li class="node st-failed current" data-step="charge-payment" data-state="failed">`,
		`<li class="node st-failed" data-undo="reserve-inventory" data-state="failed">`,
		`<tr data-step="reserve-inventory" data-undo="false" data-ends="done">`,
		`<tr data-step="charge-payment" data-undo="false" data-ends="failed">`,
		`<tr data-step="reserve-inventory" data-undo="true" data-ends="failed">`,
		`id="order-state" class="badge st-compensationfailed" data-state="CompensationFailed"`,
		`id="retry" href="/orders/cf-1/retry"`,
		`filter orderId = &#34;cf-1&#34;`,
		`<pre id="trace-query">filter traceId = &#34;1-6740510d-5d9f3a2b1c4e8f7a6b5c4d3e&#34; | sort @timestamp</pre>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, `id="cancel"`) {
		t.Error("a CompensationFailed order offers cancel")
	}
}

// TestConsoleOpensAPastedOrderID: the header's box takes the ID an alert
// names to the order's page.
func TestConsoleOpensAPastedOrderID(t *testing.T) {
	t.Parallel()
	s, _, _ := newServer(t)
	resp := s.do(t, request{method: "GET", path: "/find?id=" + errorID, session: true})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/orders/"+errorID {
		t.Fatalf("%d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp = s.do(t, request{method: "GET", path: "/orders/missing-1", session: true})
	if body := read(t, resp); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "404 Not Found") {
		t.Fatalf("an unknown order: %d\n%s", resp.StatusCode, body)
	}
}

// TestConsoleDoesNotWaitForTheCount: the open orders' count can take
// seconds; the overview shows the orders needing a person without it, and
// the count once the API gave it.
func TestConsoleDoesNotWaitForTheCount(t *testing.T) {
	t.Parallel()
	s, fake, _ := newServer(t)
	fake.slow = make(chan struct{})
	page := read(t, s.do(t, request{method: "GET", path: "/", session: true}))
	if !strings.Contains(page, "The API is counting the open orders") || !strings.Contains(page, `data-order="`+errorID+`"`) {
		t.Fatalf("overview while the count runs:\n%s", page)
	}
	close(fake.slow)
	await.Until(t, 10*time.Second, "the overview shows the count", func() (bool, error) {
		page := read(t, s.do(t, request{method: "GET", path: "/", session: true}))
		return strings.Contains(page, `<tr data-version="order-v2">`), errors.New("no order-v2 row yet")
	})
}

// TestConsoleRefreshesItsLivePartAlone: the script's request gets the
// page's live part, without the layout around it.
func TestConsoleRefreshesItsLivePartAlone(t *testing.T) {
	t.Parallel()
	s, _, _ := newServer(t)
	full := read(t, s.do(t, request{method: "GET", path: "/", session: true}))
	part := read(t, s.do(t, request{method: "GET", path: "/", session: true, headers: map[string]string{"X-Console-Live": "1"}}))
	if !strings.Contains(full, "<!DOCTYPE html>") || !strings.Contains(full, `data-refresh="3000"`) {
		t.Fatalf("full page:\n%s", full)
	}
	if strings.Contains(part, "<html") || strings.Contains(part, "<script") || !strings.Contains(part, `data-order="`+errorID+`"`) {
		t.Fatalf("live part:\n%s", part)
	}
}

// TestConsoleRedrivesAfterAConfirmation: the DLQ page shows the
// messages decoded and the redrive leads through a confirmation to the
// move.
func TestConsoleRedrivesAfterAConfirmation(t *testing.T) {
	t.Parallel()
	s, _, q := newServer(t)
	page := read(t, s.do(t, request{method: "GET", path: "/dlq", session: true}))
	if !strings.Contains(page, `<a class="mono" href="/orders/`+errorID+`">`) || !strings.Contains(page, `id="redrive-scheduler"`) || !strings.Contains(page, "1 poison") {
		t.Fatalf("DLQ page:\n%s", page)
	}
	resp := s.do(t, request{method: "GET", path: "/dlq/scheduler/redrive", session: true})
	if body := read(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, "p-scheduler-dlq (2 now)") {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
	if len(q.redriven) > 0 {
		t.Fatal("the confirmation page redrove")
	}
	resp = s.do(t, request{method: "POST", path: "/dlq/scheduler/redrive", session: true, headers: map[string]string{"Origin": "http://" + addr}, form: url.Values{"csrf": {s.csrf}}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dlq?done=redrive&moved=1&queue=scheduler" || len(q.redriven) != 1 {
		t.Fatalf("%d to %q, redriven %v", resp.StatusCode, resp.Header.Get("Location"), q.redriven)
	}
	if resp := s.do(t, request{method: "GET", path: "/dlq/nope/redrive", session: true}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown queue: %d", resp.StatusCode)
	}
}

// TestConsoleServesLoopbackOnly: an address off this machine is refused.
func TestConsoleServesLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"0.0.0.0:8765", "192.0.2.1:8765", "example.com:8765", ":8765"} {
		if _, err := New(Options{Orders: &orders{}, Addr: a}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("New at %s: %v", a, err)
		}
		if err := Serve(context.Background(), a, Options{Orders: &orders{}}, nil); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Serve at %s: %v", a, err)
		}
	}
}
