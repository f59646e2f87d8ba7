package submission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// The handler's tests run on the in-memory state store (memstore), which the
// store's conformance suite holds to what DynamoDB does: its writes are the
// workflow's own fences and patches, its listings the indexes' projections
// and cursors. A test makes the store fail, or another actor change a record
// just before a write, through the store's Fault hook.

// sendFunc is a Sender made of a function.
type sendFunc func(ctx context.Context, queueURL, body string, delay time.Duration) error

func (f sendFunc) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	return f(ctx, queueURL, body, delay)
}

type sentMessage struct {
	queueURL, body string
	delay          time.Duration
	// trace is the trace the send's context carried, in wire form.
	trace string
}

// outbox records sent messages; err, if set, fails every send after
// recording it.
type outbox struct {
	mu   sync.Mutex
	msgs []sentMessage
	err  error
}

func (o *outbox) sender() sendFunc {
	return func(ctx context.Context, queueURL, body string, delay time.Duration) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		tr, _ := trace.FromContext(ctx)
		o.msgs = append(o.msgs, sentMessage{queueURL, body, delay, tr.String()})
		return o.err
	}
}

func (o *outbox) sent() []sentMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sentMessage(nil), o.msgs...)
}

var testNow = time.Date(2025, 2, 4, 10, 15, 30, 0, time.UTC)

const (
	testQueueURL      = "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler"
	testFirstAgentURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-reserve-inventory"
)

func testConfig() Config {
	return Config{
		AgentQueues:        map[string]string{"reserve-inventory": testFirstAgentURL},
		SchedulerQueueURL:  testQueueURL,
		OrdersTable:        "orders",
		StateTable:         "state",
		Workflows:          workflow.Single(workflow.Reference()),
		ClaimTimeout:       2 * time.Minute,
		Retention:          workflow.DefaultRetention,
		MaxBodyBytes:       DefaultMaxBodyBytes,
		OperatorPrincipals: []string{operatorRole, operatorUser},
	}
}

// fault sees every call of the store before the store does (the method's
// name, and for Apply the change), as memstore.Store.Fault: an error fails
// the call, nil lets it go on. It gets the store, to change a record as
// another actor would just before a write.
type fault func(store *memstore.Store, method string, c workflow.Change) error

type fixture struct {
	h     *Handler
	clk   *clock.Fake
	store *memstore.Store
	out   *outbox
	logs  *logtest.Buffer

	mu    sync.Mutex
	calls map[string]int // store calls by method, failed or not
	// decision, when set, is the admission check's answer; unset admits.
	decision *admission.Decision
	// classes are the priority classes admission was asked about, in order.
	classes []workflow.Priority
}

// admitFunc is a function-type fake of the Admission port.
type admitFunc func(ctx context.Context, class workflow.Priority) admission.Decision

func (f admitFunc) Admit(ctx context.Context, class workflow.Priority) admission.Decision {
	return f(ctx, class)
}

// admitAll is the Admission of a system with room for every order.
var admitAll = admitFunc(func(context.Context, workflow.Priority) admission.Decision {
	return admission.Decision{Admit: true, Depth: -1}
})

// admit answers for the fixture's Handler, and notes the class asked for.
func (f *fixture) admit(_ context.Context, class workflow.Priority) admission.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.classes = append(f.classes, class)
	if f.decision != nil {
		return *f.decision
	}
	return admission.Decision{Admit: true, Depth: -1}
}

// mustNew is New for a configuration and ports the test knows are valid.
func mustNew(t testing.TB, cfg Config, store Store, sender Sender, admit Admission, deps actor.Deps) *Handler {
	t.Helper()
	h, err := New(cfg, store, sender, admit, deps)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newFixture builds a Handler over an empty in-memory store; hook, if not
// nil, sees every store call first.
func newFixture(t *testing.T, hook fault) *fixture {
	t.Helper()
	return newFixtureOver(t, hook, nil)
}

// newFixtureOver is newFixture with the store the handler gets wrapped by
// wrap, for a test that must see what memstore's Fault hook does not (the
// arguments of a listing).
func newFixtureOver(t *testing.T, hook fault, wrap func(Store) Store) *fixture {
	t.Helper()
	f := &fixture{store: memstore.New(), out: &outbox{}, logs: &logtest.Buffer{}, calls: map[string]int{}}
	f.clk = clock.NewFake(testNow)
	f.store.Clock = f.clk // the store's reads expire records by the test's time
	f.store.Fault = func(method string, c workflow.Change) error {
		f.mu.Lock()
		f.calls[method]++
		f.mu.Unlock()
		if hook == nil {
			return nil
		}
		return hook(f.store, method, c)
	}
	var store Store = f.store
	if wrap != nil {
		store = wrap(store)
	}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.h = mustNew(t, testConfig(), store, f.out.sender(), admitFunc(f.admit), actor.Deps{Clock: f.clk, Log: log})
	return f
}

// called counts the calls of a store method, failed or not.
func (f *fixture) called(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// wroteNothing fails the test if the request wrote to the store (a
// CreateOrder, successful or not, or any write that took effect) or sent a
// message.
func (f *fixture) wroteNothing(t *testing.T, what string) {
	t.Helper()
	if creates, writes, sent := f.called("CreateOrder"), f.store.Writes(), len(f.out.sent()); creates != 0 || writes != 0 || sent != 0 {
		t.Fatalf("%s created %d, wrote %d, sent %d; want nothing", what, creates, writes, sent)
	}
}

// put stores a record as a test forces it: no write of the handler's.
func (f *fixture) put(st workflow.State) { f.store.Put(st) }

// state and order read a record and an order as the store holds it
// (through the store's hook, like every call).
func (f *fixture) state(t *testing.T, id string) workflow.State {
	t.Helper()
	return read(t, f.store.GetState, id)
}

func (f *fixture) order(t *testing.T, id string) workflow.Order {
	t.Helper()
	return read(t, f.store.GetOrder, id)
}

func read[T any](t *testing.T, get func(context.Context, string) (T, error), id string) T {
	t.Helper()
	v, err := get(context.Background(), id)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return v
}

// failure is one fault of failing: the calls of method fail with err; for
// Apply, only the changes of transition, when it is set.
type failure struct {
	method     string
	transition workflow.Transition
	err        error
}

// failing is a fault that fails the calls fs name.
func failing(fs ...failure) fault {
	return func(_ *memstore.Store, method string, c workflow.Change) error {
		for _, f := range fs {
			if f.method == method && (f.transition == "" || f.transition == c.Transition) {
				return f.err
			}
		}
		return nil
	}
}

// racing is a fault that, before each Apply, has another actor change the
// record to what then returns for the n-th Apply (from 1); the Apply goes
// on, for its fence to judge.
func racing(then func(n int) workflow.State) fault {
	var mu sync.Mutex
	n := 0
	return func(store *memstore.Store, method string, _ workflow.Change) error {
		if method != "Apply" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		store.Put(then(n))
		return nil
	}
}

func (f *fixture) do(t *testing.T, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := f.h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned error %v; errors must be responses", err)
	}
	return resp
}

// The callers of the tests. callerA is the default: an IAM user, its own
// owner. callerB is a session of an assumed role, whose owner is the role.
// callerOp, the default on the operator routes, is a session of the
// operators' role operatorRole (which has a path, as a session's ARN does
// not); operatorUser is an operator too.
const (
	callerA      = "arn:aws:iam::123456789012:user/client-a"
	callerB      = "arn:aws:sts::210987654321:assumed-role/client-b/session-1"
	ownerB       = "arn:aws:sts::210987654321:assumed-role/client-b"
	operatorRole = "arn:aws:iam::123456789012:role/ops/OrderOperatorRole"
	callerOp     = "arn:aws:sts::123456789012:assumed-role/OrderOperatorRole/alice"
	operatorUser = "arn:aws:iam::123456789012:user/ops/bob"
)

// as makes req come from the principal userArn, as API Gateway's IAM
// authorization passes it, with the unique ID userIDOf gives it; "" takes
// the identity away.
func as(req events.APIGatewayV2HTTPRequest, userArn string) events.APIGatewayV2HTTPRequest {
	if userArn == "" {
		req.RequestContext.Authorizer = nil
		return req
	}
	account := ""
	if parts := strings.Split(userArn, ":"); len(parts) > 4 {
		account = parts[4]
	}
	id := userIDOf(userArn)
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			AccessKey: "AKIAEXAMPLE" + strconv.Itoa(len(userArn)), AccountID: account,
			CallerID: id, UserARN: userArn, UserID: id,
		},
	}
	return req
}

// userIDOf is the userId API Gateway passes beside userArn, of the form of
// its kind: an IAM user's unique ID (AIDA…), a role session's role ID and
// session (AROA…:SESSION), the root user's account, a federated user's
// ACCOUNT:NAME. The IDs are the tests' own, one per user or role, of the
// length IAM's have; anything else gets "".
func userIDOf(userArn string) string {
	parts := strings.SplitN(userArn, ":", 6)
	if len(parts) != 6 {
		return ""
	}
	account, resource := parts[4], parts[5]
	switch {
	case strings.HasPrefix(resource, "user/"):
		return testUniqueID(UserPrefix, userArn)
	case strings.HasPrefix(resource, "assumed-role/"):
		role, session, _ := strings.Cut(strings.TrimPrefix(resource, "assumed-role/"), "/")
		return testUniqueID(RolePrefix, "role/"+account+"/"+role) + ":" + session
	case resource == "root":
		return account
	case strings.HasPrefix(resource, "federated-user/"):
		return account + ":" + strings.TrimPrefix(resource, "federated-user/")
	}
	return ""
}

// testUniqueID is a unique ID of 21 characters, as IAM's are: prefix, then
// 17 upper-case letters and digits drawn from name.
func testUniqueID(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:17]
}

// ownerA and ownerOfB are the owners of callerA and callerB.
var ownerA, ownerOfB = mustOwner(callerA), mustOwner(callerB)

// mustOwner is the owner the Submission records for a caller of the tests.
func mustOwner(userArn string) Owner {
	o, err := caller(as(events.APIGatewayV2HTTPRequest{}, userArn))
	if err != nil {
		panic(fmt.Sprintf("the owner of %s: %v", userArn, err))
	}
	return o
}

// ownBy makes st the record of an order of the caller userArn, as the
// Submission writes it: with the owner's unique ID, or where it has none
// with the owner (workflow.State.Owner).
func ownBy(st *workflow.State, userArn string) {
	o := mustOwner(userArn)
	st.Owner, st.OwnerID = "", o.ID
	if o.ID == "" {
		st.Owner = o.Name
	}
}

// request builds a $default-route request as API Gateway sends it, from
// callerA, or on an operator route from callerOp.
func request(method, path string, headers map[string]string, body string) events.APIGatewayV2HTTPRequest {
	caller := callerA
	if onOperatorRoute(method, path) {
		caller = callerOp
	}
	return as(events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "$default",
		RawPath:  path,
		Headers:  headers,
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:  "$default",
			Stage:     "$default",
			RequestID: "req-1",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}, caller)
}

// onOperatorRoute tells whether method and path are one of the operator
// routes of Routes.
func onOperatorRoute(method, path string) bool {
	m, ok := matchPath(method, path)
	return ok && m.endpoint != nil && m.endpoint.Operator
}

func postOrder(body string, headers ...string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": "application/json"}
	for i := 0; i < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return request("POST", "/orders", h, body)
}

// readProblem checks resp is a problem document of the given status.
func readProblem(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int) Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if ct := resp.Headers["Content-Type"]; ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(resp.Body)))
	dec.DisallowUnknownFields()
	var p Problem
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %s: %v", resp.Body, err)
	}
	if p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Fatalf("incomplete problem %+v", p)
	}
	return p
}

type acceptedResponse struct {
	OrderID string `json:"orderId"`
	State   string `json:"state"`
	Links   struct {
		Self string `json:"self"`
	} `json:"links"`
}

func readAccepted(t *testing.T, resp events.APIGatewayV2HTTPResponse) acceptedResponse {
	t.Helper()
	if resp.StatusCode != 202 {
		t.Fatalf("status = %d, want 202; body %s", resp.StatusCode, resp.Body)
	}
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var a acceptedResponse
	if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
		t.Fatalf("202 body %s: %v", resp.Body, err)
	}
	if a.State != "Processing" || a.Links.Self != "/orders/"+a.OrderID || resp.Headers["Location"] != a.Links.Self {
		t.Fatalf("202 = %+v, Location %q", a, resp.Headers["Location"])
	}
	return a
}
