package submission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/logtest"
	"github.com/sasflow/sas/shared/workflow"
)

// storeFuncs is a Store made of functions; a nil function fails the test.
type storeFuncs struct {
	createOrder func(ctx context.Context, o workflow.Order, s workflow.State) error
	getOrder    func(ctx context.Context, orderID string) (workflow.Order, error)
	getState    func(ctx context.Context, orderID string) (workflow.State, error)
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

// sendFunc is a Sender made of a function.
type sendFunc func(ctx context.Context, queueURL, body string, delay time.Duration) error

func (f sendFunc) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	return f(ctx, queueURL, body, delay)
}

// memStore keeps orders in maps and, like the real store, refuses to create
// an order twice.
type memStore struct {
	mu      sync.Mutex
	orders  map[string]workflow.Order
	states  map[string]workflow.State
	creates int // CreateOrder calls, successful or not
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
			return s, nil
		},
	}
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

// request builds a $default-route request as API Gateway sends it.
func request(method, path string, headers map[string]string, body string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
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
	}
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
