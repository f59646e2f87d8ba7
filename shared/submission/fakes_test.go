package submission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// storeFuncs is a Store made of functions; a nil function fails the test.
type storeFuncs struct {
	createOrder func(ctx context.Context, o workflow.Order, s workflow.State) error
	getOrder    func(ctx context.Context, orderID string) (workflow.Order, error)
	getState    func(ctx context.Context, orderID string) (workflow.State, error)
	listByState func(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error)
	listByOwner func(ctx context.Context, owner string, limit int, cursor string) (statestore.Page, error)
	cancel      func(ctx context.Context, seen workflow.State, stop workflow.Stop, now, claimBy time.Time) (workflow.State, error)
	resubmit    func(ctx context.Context, seen workflow.State, r workflow.Resubmission, now time.Time) (workflow.State, error)
}

func (f storeFuncs) CreateOrder(ctx context.Context, o workflow.Order, s workflow.State) error {
	return f.createOrder(ctx, o, s)
}

func (f storeFuncs) GetOrder(ctx context.Context, orderID string) (workflow.Order, error) {
	return f.getOrder(ctx, orderID)
}

func (f storeFuncs) GetState(ctx context.Context, orderID string) (workflow.State, error) {
	return f.getState(ctx, orderID)
}

func (f storeFuncs) ListByState(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
	return f.listByState(ctx, state, limit, cursor)
}

func (f storeFuncs) ListByOwner(ctx context.Context, owner string, limit int, cursor string) (statestore.Page, error) {
	return f.listByOwner(ctx, owner, limit, cursor)
}

func (f storeFuncs) Cancel(ctx context.Context, seen workflow.State, stop workflow.Stop, now, claimBy time.Time) (workflow.State, error) {
	return f.cancel(ctx, seen, stop, now, claimBy)
}

func (f storeFuncs) Resubmit(ctx context.Context, seen workflow.State, r workflow.Resubmission, now time.Time) (workflow.State, error) {
	return f.resubmit(ctx, seen, r, now)
}

// sendFunc is a Sender made of a function.
type sendFunc func(ctx context.Context, queueURL, body string, delay time.Duration) error

func (f sendFunc) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	return f(ctx, queueURL, body, delay)
}

// memStore keeps orders in maps and, like the real store, refuses to create
// an order twice and makes Cancel and Resubmit conditional on the state and
// Attempt the caller saw.
type memStore struct {
	mu      sync.Mutex
	orders  map[string]workflow.Order
	states  map[string]workflow.State
	creates int // CreateOrder calls, successful or not
	writes  int // Cancel and Resubmit calls that wrote
}

func newMemStore() *memStore {
	return &memStore{orders: map[string]workflow.Order{}, states: map[string]workflow.State{}}
}

func (m *memStore) funcs() storeFuncs {
	return storeFuncs{
		createOrder: func(_ context.Context, o workflow.Order, s workflow.State) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.creates++
			if _, ok := m.orders[o.OrderID]; ok {
				return fmt.Errorf("create order %s: %w", o.OrderID, workflow.ErrExists)
			}
			m.orders[o.OrderID], m.states[o.OrderID] = o, s
			return nil
		},
		getOrder: func(_ context.Context, id string) (workflow.Order, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			o, ok := m.orders[id]
			if !ok {
				return workflow.Order{}, fmt.Errorf("order %s: %w", id, workflow.ErrNotFound)
			}
			return o, nil
		},
		getState: func(_ context.Context, id string) (workflow.State, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			s, ok := m.states[id]
			if !ok {
				return workflow.State{}, fmt.Errorf("state %s: %w", id, workflow.ErrNotFound)
			}
			return cloneState(s), nil
		},
		listByState: m.list,
		listByOwner: m.listByOwner,
		cancel:      m.cancel,
		resubmit:    m.resubmit,
	}
}

// put stores a record as a test forces it.
func (m *memStore) put(s workflow.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[s.OrderID] = s
}

func (m *memStore) state(id string) workflow.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[id]
}

// list pages through the records in a state, newest change first; its
// cursor is "after:" and the last order ID of the page before.
func (m *memStore) list(_ context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error) {
	if limit < 1 || limit > statestore.MaxPage {
		return statestore.Page{}, fmt.Errorf("limit %d out of range", limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []workflow.State
	for _, s := range m.states {
		if s.ProcessState == state {
			all = append(all, s)
		}
	}
	slices.SortFunc(all, func(a, b workflow.State) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.OrderID, a.OrderID)
	})
	start := 0
	if cursor != "" {
		after, ok := strings.CutPrefix(cursor, "after:")
		i := slices.IndexFunc(all, func(s workflow.State) bool { return s.OrderID == after })
		if !ok || i < 0 {
			return statestore.Page{}, fmt.Errorf("list %s: %w", state, statestore.ErrBadCursor)
		}
		start = i + 1
	}
	end := min(start+limit, len(all))
	var p statestore.Page
	for _, s := range all[start:end] {
		s.Input, s.Steps = nil, nil // the index projects neither
		p.States = append(p.States, s)
	}
	if end < len(all) {
		p.Next = "after:" + all[end-1].OrderID
	}
	return p, nil
}

// listByOwner pages through owner's orders, newest first; like the real
// store's, its cursor names the owner it was listed for and is refused for
// any other. Orders without an owner are in nobody's listing.
func (m *memStore) listByOwner(_ context.Context, owner string, limit int, cursor string) (statestore.Page, error) {
	if owner == "" || limit < 1 || limit > statestore.MaxPage {
		return statestore.Page{}, fmt.Errorf("owner %q, limit %d out of range", owner, limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []workflow.Order
	for _, o := range m.orders {
		if o.Owner == owner {
			all = append(all, o)
		}
	}
	slices.SortFunc(all, func(a, b workflow.Order) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.OrderID, a.OrderID)
	})
	start := 0
	if cursor != "" {
		rest, ok := strings.CutPrefix(cursor, "own:"+owner+"|")
		i := slices.IndexFunc(all, func(o workflow.Order) bool { return o.OrderID == rest })
		if !ok || i < 0 {
			return statestore.Page{}, fmt.Errorf("list by owner: %w", statestore.ErrBadCursor)
		}
		start = i + 1
	}
	end := min(start+limit, len(all))
	var p statestore.Page
	for _, o := range all[start:end] {
		s := m.states[o.OrderID]
		s.Input, s.Steps = nil, nil // the listing reads neither
		p.States = append(p.States, s)
	}
	if end < len(all) {
		p.Next = "own:" + owner + "|" + all[end-1].OrderID
	}
	return p, nil
}

// fenced is the condition of the operator writes.
func (m *memStore) fenced(seen workflow.State) (workflow.State, error) {
	cur, ok := m.states[seen.OrderID]
	switch {
	case !ok:
		return workflow.State{}, fmt.Errorf("state %s: %w", seen.OrderID, workflow.ErrNotFound)
	case cur.ProcessState != seen.ProcessState || cur.Attempt != seen.Attempt:
		return workflow.State{}, fmt.Errorf("%s is %s attempt %d, not %s attempt %d: %w",
			seen.OrderID, cur.ProcessState, cur.Attempt, seen.ProcessState, seen.Attempt, workflow.ErrStale)
	}
	return cloneState(cur), nil
}

func (m *memStore) cancel(_ context.Context, seen workflow.State, stop workflow.Stop, now, claimBy time.Time) (workflow.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.fenced(seen)
	if err != nil {
		return workflow.State{}, fmt.Errorf("cancel: %w", err)
	}
	s.Steps[s.StepIndex].State = workflow.StepCancelled
	s.Cancelled, s.LockedBy, s.UpdatedAt = true, "", now
	s.Attempt++
	s.EventSeq++
	if stop.UndoFrom >= 0 {
		s.ProcessState, s.StepIndex, s.Step, s.CompleteBy = workflow.CompensationPending, stop.UndoFrom, s.Steps[stop.UndoFrom].Name, claimBy
		s.Steps[stop.UndoFrom].Compensation = workflow.StepPending
	} else {
		s.ProcessState, s.CompleteBy = stop.Terminal, time.Time{}
	}
	m.states[s.OrderID] = s
	m.writes++
	return cloneState(s), nil
}

func (m *memStore) resubmit(_ context.Context, seen workflow.State, r workflow.Resubmission, now time.Time) (workflow.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.fenced(seen)
	if err != nil {
		return workflow.State{}, fmt.Errorf("resubmit: %w", err)
	}
	switch r.State {
	case workflow.Pending:
		s.Steps[s.StepIndex].State = workflow.StepPending
	case workflow.CompensationPending:
		s.Steps[s.StepIndex].Compensation = workflow.StepPending
	default:
		return workflow.State{}, fmt.Errorf("resubmit to %s: %w", r.State, workflow.ErrNotResubmittable)
	}
	s.ProcessState, s.CompleteBy, s.FailureCount, s.UpdatedAt = r.State, r.ClaimBy, 0, now
	s.Resubmits++
	s.EventSeq++
	m.states[s.OrderID] = s
	m.writes++
	return cloneState(s), nil
}

func (m *memStore) writeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// cloneState copies the step history so a caller's changes stay its own.
func cloneState(s workflow.State) workflow.State {
	s.Steps = slices.Clone(s.Steps)
	return s
}

func (m *memStore) counts() (creates, orders int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.creates, len(m.orders)
}

type sentMessage struct {
	queueURL, body string
	delay          time.Duration
}

// outbox records sent messages; err, if set, fails every send after
// recording it.
type outbox struct {
	mu   sync.Mutex
	msgs []sentMessage
	err  error
}

func (o *outbox) sender() sendFunc {
	return func(_ context.Context, queueURL, body string, delay time.Duration) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.msgs = append(o.msgs, sentMessage{queueURL, body, delay})
		return o.err
	}
}

func (o *outbox) sent() []sentMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sentMessage(nil), o.msgs...)
}

var testNow = time.Date(2025, 2, 4, 10, 15, 30, 0, time.UTC)

const testQueueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler"

func testConfig() Config {
	return Config{
		SchedulerQueueURL: testQueueURL,
		OrdersTable:       "orders",
		StateTable:        "state",
		Workflow:          workflow.Default(),
		ClaimTimeout:      2 * time.Minute,
		MaxBodyBytes:      DefaultMaxBodyBytes,
	}
}

type fixture struct {
	h     *Handler
	store *memStore
	out   *outbox
	logs  *logtest.Buffer
}

// newFixture builds a Handler over an in-memory store; wrap, if given, may
// replace store functions to inject faults.
func newFixture(t *testing.T, wrap func(*storeFuncs)) *fixture {
	t.Helper()
	f := &fixture{store: newMemStore(), out: &outbox{}, logs: &logtest.Buffer{}}
	sf := f.store.funcs()
	if wrap != nil {
		wrap(&sf)
	}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.h = New(testConfig(), sf, f.out.sender(), clock.NewFake(testNow), log)
	return f
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
const (
	callerA = "arn:aws:iam::123456789012:user/client-a"
	callerB = "arn:aws:sts::210987654321:assumed-role/client-b/session-1"
	ownerB  = "arn:aws:sts::210987654321:assumed-role/client-b"
)

// as makes req come from the principal userArn, as API Gateway's IAM
// authorization passes it; "" takes the identity away.
func as(req events.APIGatewayV2HTTPRequest, userArn string) events.APIGatewayV2HTTPRequest {
	if userArn == "" {
		req.RequestContext.Authorizer = nil
		return req
	}
	account := ""
	if parts := strings.Split(userArn, ":"); len(parts) > 4 {
		account = parts[4]
	}
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			AccessKey: "AKIAEXAMPLE" + strconv.Itoa(len(userArn)), AccountID: account,
			CallerID: "AIDAEXAMPLE", UserARN: userArn, UserID: "AIDAEXAMPLE",
		},
	}
	return req
}

// request builds a $default-route request as API Gateway sends it, from
// callerA.
func request(method, path string, headers map[string]string, body string) events.APIGatewayV2HTTPRequest {
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
	}, callerA)
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
	if a.State != "Pending" || a.Links.Self != "/orders/"+a.OrderID || resp.Headers["Location"] != a.Links.Self {
		t.Fatalf("202 = %+v, Location %q", a, resp.Headers["Location"])
	}
	return a
}
