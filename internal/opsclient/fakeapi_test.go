package opsclient

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// fakeAPI implements the operators' routes of the HTTP API contract over an
// in-memory set of orders. It writes the API's documents with shared/api's
// types, as the server does; that those types match the contract is what
// api's golden documents pin.
type fakeAPI struct {
	t *testing.T

	mu     sync.Mutex
	orders map[string]*api.Order
	// workflows is the answer of GET /ops/workflows.
	workflows api.Workflows
	requests  []*http.Request // clones, bodies drained
	// intercept, when it returns true, has answered the request itself:
	// API Gateway's own errors, broken bodies.
	intercept func(w http.ResponseWriter, r *http.Request) bool
	// verify checks each request before it is served (signatures).
	verify func(r *http.Request, body []byte)
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func ts(min int) *time.Time { t := t0.Add(time.Duration(min) * time.Minute); return &t }

// newFakeAPI serves the seed orders: n orders in Error (updated a minute
// apart, so their order is known), and one order in each of a few other
// states.
func newFakeAPI(t *testing.T, errorOrders int) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, orders: map[string]*api.Order{}}
	for i := range errorOrders {
		id := fmt.Sprintf("err-%02d", i)
		f.orders[id] = &api.Order{
			OrderID: id, Workflow: "order-v1", State: "Error", Status: "error", Priority: "high", Step: "charge-payment", StepIndex: 1,
			FailureCount: 3, Attempt: 5, LastError: "payment service: 503 Service Unavailable",
			EventSeq: 3, CreatedAt: t0, UpdatedAt: *ts(i), Owner: "arn:aws:sts::111122223333:assumed-role/shop-checkout",
			OwnerID: "AROAZ3EXAMPLEROLE0001",
			Steps: []api.StepHistory{
				{Name: "reserve-inventory", State: "succeeded", Attempts: 1, StartedAt: ts(0), FinishedAt: ts(1), Output: json.RawMessage(`{"reservation":"r-1"}`)},
				{Name: "charge-payment", State: "failed", Attempts: 3, Failures: 3, StartedAt: ts(1), Error: "payment service: 503 Service Unavailable"},
			},
		}
	}
	f.orders["comp-failed-1"] = &api.Order{
		OrderID: "comp-failed-1", Workflow: "order-v1", State: "CompensationFailed", Status: "compensation-failed",
		Step: "reserve-inventory", StepIndex: 0, Attempt: 7, LastError: "undo reservation: 500", EventSeq: 4,
		ClientID: "shop-web", Cancelled: true, Resubmits: 1, CreatedAt: t0, UpdatedAt: *ts(90), ExpiresAt: ts(90 * 24 * 60),
		Steps: []api.StepHistory{
			{Name: "reserve-inventory", State: "succeeded", Attempts: 1, StartedAt: ts(0), FinishedAt: ts(1),
				Compensation: "failed", CompensationAttempts: 4, CompensationFailures: 4, CompensationError: "inventory: 500 Internal Server Error"},
			{Name: "charge-payment", State: "cancelled", Attempts: 1, StartedAt: ts(2),
				Compensation: "succeeded", CompensationAttempts: 1, CompensatedAt: ts(3), CompensationOutput: json.RawMessage(`{"refund":"none"}`)},
		},
	}
	f.orders["proc-1"] = &api.Order{
		OrderID: "proc-1", Workflow: "order-v1", State: "Processing", Status: "processing", Step: "reserve-inventory",
		Attempt: 1, CompleteBy: *ts(91), EventSeq: 2, CreatedAt: t0, UpdatedAt: *ts(90),
		Steps: []api.StepHistory{{Name: "reserve-inventory", State: "processing", Attempts: 1, StartedAt: ts(90)}, {Name: "charge-payment", State: "pending"}},
	}
	f.orders["wait-1"] = &api.Order{
		OrderID: "wait-1", Workflow: "order-v2", State: "Waiting", Status: "waiting", Step: "charge-payment", StepIndex: 1,
		WaitRound: 2, Attempt: 7, CompleteBy: *ts(120), EventSeq: 4, CreatedAt: t0, UpdatedAt: *ts(90),
		LastError: "timeout: no committed reply to attempt 7 of step charge-payment by its deadline",
		Steps:     []api.StepHistory{{Name: "reserve-inventory", State: "succeeded", Attempts: 1}, {Name: "charge-payment", State: "pending", Attempts: 6, Failures: 6}},
	}
	f.orders["done-1"] = &api.Order{
		OrderID: "done-1", Workflow: "order-v1", State: "Processed", Status: "processed", Step: "charge-payment", StepIndex: 1,
		Attempt: 2, EventSeq: 3, CreatedAt: t0, UpdatedAt: *ts(5),
		Steps: []api.StepHistory{{Name: "reserve-inventory", State: "succeeded", Attempts: 1}, {Name: "charge-payment", State: "succeeded", Attempts: 1}},
	}
	f.workflows = api.Workflows{Default: "order", Workflows: []api.WorkflowVersion{
		{ID: "order-v1", Name: "order", Version: 1, Deployed: true, InFlight: 3, NeedsOperator: 1},
		{ID: "order-v2", Name: "order", Version: 2, Deployed: true, Current: true, InFlight: 41},
		{ID: "order-v3", Name: "order", Version: 3, Deployed: true, CanRemove: true},
		{ID: "refund-v1", Name: "refund", Version: 1, NeedsOperator: 2},
	}}
	return f
}

// server starts the fake on loopback over plain HTTP, as the local stack.
func (f *fakeAPI) server() *httptest.Server {
	srv := httptest.NewServer(f)
	f.t.Cleanup(srv.Close)
	return srv
}

// recorded returns the requests served so far.
func (f *fakeAPI) recorded() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// The operators' routes: GET /ops/orders/{id}, POST /orders/{id}/retry and
// POST /orders/{id}/cancel (GET /ops/orders and GET /ops/workflows are
// matched whole). A client's GET /orders/{id} is not one of them.
var (
	routeShow   = regexp.MustCompile(`^/ops/orders/([^/]+)$`)
	routeAction = regexp.MustCompile(`^/orders/([^/]+)/(retry|cancel)$`)
)

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read request body: %v", err)
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.Clone(r.Context()))
	intercept, verify := f.intercept, f.verify
	f.mu.Unlock()
	if verify != nil {
		verify(r, body)
	}
	if intercept != nil && intercept(w, r) {
		return
	}
	if len(body) > 0 {
		f.problem(w, r, http.StatusBadRequest, "these routes take no body")
		return
	}
	if r.URL.Path == "/ops/orders" && r.Method == http.MethodGet {
		f.list(w, r)
		return
	}
	if r.URL.Path == "/ops/workflows" && r.Method == http.MethodGet {
		f.mu.Lock()
		ws := f.workflows
		f.mu.Unlock()
		writeJSONResponse(w, http.StatusOK, "application/json", ws)
		return
	}
	show, act := routeShow.FindStringSubmatch(r.URL.Path), routeAction.FindStringSubmatch(r.URL.Path)
	switch {
	case show != nil && r.Method == http.MethodGet:
		f.get(w, r, show[1])
	case act != nil && r.Method == http.MethodPost:
		f.act(w, r, act[1], act[2])
	default:
		gatewayMessage(w, http.StatusNotFound, "Not Found")
	}
}

func (f *fakeAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		f.problem(w, r, http.StatusBadRequest, "state is required")
		return
	}
	limit := 25
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			f.problem(w, r, http.StatusBadRequest, "limit must be 1..100")
			return
		}
		limit = n
	}
	offset := 0
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err == nil {
			offset, err = strconv.Atoi(strings.TrimPrefix(string(b), "o:"))
		}
		if err != nil {
			f.problem(w, r, http.StatusBadRequest, "malformed cursor")
			return
		}
	}
	f.mu.Lock()
	var rows []api.OrderSummary
	for _, o := range f.orders {
		if string(o.State) == state {
			rows = append(rows, api.OrderSummary{OrderID: o.OrderID, State: o.State, Status: o.Status, Priority: o.Priority, Step: o.Step, StepIndex: o.StepIndex,
				FailureCount: o.FailureCount, Attempt: o.Attempt, LastError: o.LastError, ClientID: o.ClientID,
				CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt})
		}
	}
	f.mu.Unlock()
	// Newest change first, ties by ID so pages are stable.
	slices.SortFunc(rows, func(a, b api.OrderSummary) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.OrderID, b.OrderID)
	})
	rows = rows[min(offset, len(rows)):]
	resp := api.Page{Orders: []api.OrderSummary{}}
	if len(rows) > limit {
		resp.NextCursor = base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset+limit)))
		resp.Links = &api.PageLinks{Next: "/ops/orders?" + url.Values{"state": {state}, "limit": {strconv.Itoa(limit)}, "cursor": {resp.NextCursor}}.Encode()}
		rows = rows[:limit]
	}
	resp.Orders = append(resp.Orders, rows...)
	writeJSONResponse(w, http.StatusOK, "application/json", resp)
}

func (f *fakeAPI) get(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	o, ok := f.orders[id]
	var cp api.Order
	if ok {
		cp = *o
	}
	f.mu.Unlock()
	if !ok {
		f.problem(w, r, http.StatusNotFound, "no order with ID "+id)
		return
	}
	writeJSONResponse(w, http.StatusOK, "application/json", cp)
}

func (f *fakeAPI) act(w http.ResponseWriter, r *http.Request, id, action string) {
	f.mu.Lock()
	o, ok := f.orders[id]
	var next workflow.ProcessState
	if ok {
		switch {
		case action == "retry" && o.State == "Error":
			next = "Pending"
		case action == "retry" && o.State == "CompensationFailed":
			next = "CompensationPending"
		case action == "cancel" && (o.State == "Pending" || o.State == "Processing"):
			next = "CompensationPending"
		}
		if next != "" {
			o.State, o.UpdatedAt = next, o.UpdatedAt.Add(time.Minute)
			if action == "retry" {
				o.Resubmits++
			} else {
				o.Cancelled = true
			}
		}
	}
	var state workflow.ProcessState
	if ok {
		state = o.State
	}
	f.mu.Unlock()
	switch {
	case !ok:
		f.problem(w, r, http.StatusNotFound, "no order with ID "+id)
	case next == "":
		f.problem(w, r, http.StatusConflict, fmt.Sprintf("order %s is %s: %s does not apply", id, state, action))
	default:
		writeJSONResponse(w, http.StatusAccepted, "application/json", api.Accepted{
			OrderID: id, State: next, Links: api.Links{Self: "/orders/" + id},
		})
	}
}

func (f *fakeAPI) problem(w http.ResponseWriter, r *http.Request, status int, detail string) {
	w.Header().Set("Apigw-Requestid", "gw-"+strconv.Itoa(status))
	writeJSONResponse(w, status, "application/problem+json", api.Problem{
		Type: "https://sasflow.dev/problems/x", Title: http.StatusText(status), Status: status,
		Detail: detail, RequestID: "req-" + strconv.Itoa(status),
	})
}

// gatewayMessage answers as API Gateway itself does: {"message"} as JSON,
// with its request ID header.
func gatewayMessage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Apigw-Requestid", "gw-"+strconv.Itoa(status))
	writeJSONResponse(w, status, "application/json", map[string]string{"message": msg})
}

func writeJSONResponse(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
