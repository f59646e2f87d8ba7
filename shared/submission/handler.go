// Package submission is the Submission function of the Scheduler Agent
// Supervisor pattern: the HTTP API (API Gateway HTTP API, payload format 2.0)
// through which clients submit orders and read their progress.
//
// Every route is IAM-authorized, and the caller API Gateway authenticated
// (see Principal) owns what it submits. A client's routes: POST /orders
// validates an order, writes it with its initial Pending state record in one
// transaction and then asks the Scheduler to start it; GET /orders lists the
// caller's own orders, newest first; GET /orders/{id} reports one of them
// (another caller's order is answered exactly like a missing one). The
// operators' routes: GET /ops/orders?state=S lists every caller's orders in
// a state operators act on or review (workflow.ListedStates; any other is a
// 400), GET /ops/orders/{id} reports any order, GET /ops/workflows counts
// the open orders of each workflow version (whether one can leave the
// catalog, and which orders are stranded), POST /orders/{id}/retry
// resubmits an order that stopped in Error or CompensationFailed, and POST
// /orders/{id}/cancel stops an order still going forward. Every error is an
// RFC 9457 problem.
package submission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// Store keeps orders and their state records.
type Store interface {
	// CreateOrder writes the order and its initial state record in ONE
	// DynamoDB transaction, with its Idempotency-Key's key item. It returns
	// an error wrapping workflow.ErrKeyUsed when the key made an order the
	// store still remembers, and workflow.ErrExists when an order with that
	// OrderID already exists.
	CreateOrder(ctx context.Context, o workflow.Order, s workflow.State) error
	// GetKey returns what an owner's Idempotency-Key made, or an error
	// wrapping workflow.ErrNotFound when nothing or when it is forgotten.
	GetKey(ctx context.Context, owner, key string) (workflow.KeyUse, error)
	// GetState returns an error wrapping workflow.ErrNotFound when absent.
	GetState(ctx context.Context, orderID string) (workflow.State, error)
	// ListByState lists the records in a listed state, newest entry into
	// the state first, limit 1..100, from cursor ("" for the first page).
	// The records carry only the listing's attributes. A cursor it cannot
	// decode is an error wrapping statestore.ErrBadCursor; a state that is
	// not listed, one wrapping statestore.ErrNotListed.
	ListByState(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error)
	// ListByOwner lists the orders owner submitted, newest first, limit
	// 1..100, from cursor ("" for the first page), with the same attributes
	// as ListByState. A cursor it cannot decode, or one of another owner's
	// listing, is an error wrapping statestore.ErrBadCursor.
	ListByOwner(ctx context.Context, owner string, limit int, cursor string) (statestore.Page, error)
	// CountOpen counts the open orders of each workflow version, reading
	// at most limit index entries (statestore.Port.CountOpen).
	CountOpen(ctx context.Context, limit int) (statestore.OpenCount, error)
	// Apply writes a change the workflow's Machine decided (an operator's
	// cancel or resubmission): conditional on what the change saw, so it
	// returns the record as written, or an error wrapping workflow.ErrStale
	// when the record changed since it was read.
	Apply(ctx context.Context, c workflow.Change) (workflow.State, error)
}

// Sender puts a message on a queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

// Admission decides whether a new order is taken now (admission.Gate).
type Admission interface {
	Admit(ctx context.Context) admission.Decision
}

// OrderShed is the msg of the line logged for each order the admission
// check sheds; the stack counts these lines into its shed-orders metric.
const OrderShed = "order shed"

// IdempotencyKeyHeader lets a client retry a POST safely.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader marks a response that answers a retry of an earlier request.
const ReplayedHeader = "Idempotent-Replayed"

const maxIdempotencyKeyLen = 255

// Handler serves the Submission API. It is safe for concurrent use.
type Handler struct {
	cfg       Config
	operators Operators
	store     Store
	sender    Sender
	admit     Admission
	clk       clock.Clock
	log       *slog.Logger
	newID     func(owner, key string) string
	alerts    alert.Sender
}

// Option changes a Handler built by New.
type Option func(*Handler)

// WithOrderIDs makes next the source of new orders' IDs instead of random
// UUIDs, from the caller and the order's Idempotency-Key ("" for none), so
// a test knows an order's ID before it submits it, and a demo's seed
// replays the same orders. Each must be new: an ID that is taken fails the
// order (500).
func WithOrderIDs(next func(owner, key string) string) Option {
	return func(h *Handler) { h.newID = next }
}

// WithAlerts tells the operators at once of what an operator's cancel
// leaves applied (workflow.Change.Notice); without it that is in the
// order's LastError only.
func WithAlerts(a alert.Sender) Option { return func(h *Handler) { h.alerts = a } }

// New returns a Handler, or every problem of cfg and the ports at once.
func New(cfg Config, store Store, sender Sender, admit Admission, deps actor.Deps, opts ...Option) (*Handler, error) {
	err := actor.Check("submission", cfg.Validate(), actor.Port{Name: "Store", Value: store}, actor.Port{Name: "Sender", Value: sender},
		actor.Port{Name: "Admission", Value: admit})
	if err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	operators, err := NewOperators(cfg.OperatorPrincipals)
	if err != nil {
		return nil, fmt.Errorf("submission: %w", err) // Validate already refused it
	}
	deps = deps.WithDefaults()
	h := &Handler{cfg: cfg, operators: operators, store: store, sender: sender, admit: admit, clk: deps.Clock, log: deps.Log,
		newID: func(string, string) string { return randomOrderID() }}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// route is a resource of the API.
type route int

const (
	noRoute route = iota
	ordersRoute
	orderRoute
	retryRoute
	cancelRoute
	opsOrdersRoute
	opsOrderRoute
	opsWorkflowsRoute
)

// allowed lists each resource's methods, for 405's Allow header.
var allowed = map[route][]string{
	ordersRoute: {http.MethodGet, http.MethodPost},
	orderRoute:  {http.MethodGet},
	retryRoute:  {http.MethodPost},
	cancelRoute: {http.MethodPost},
	// The operators' views of every caller's orders.
	opsOrdersRoute: {http.MethodGet},
	opsOrderRoute:  {http.MethodGet},
	// The workflow versions and their open orders.
	opsWorkflowsRoute: {http.MethodGet},
}

// operatorRoutes are the resources whose every method is an operator
// route (Route.Operator).
var operatorRoutes = map[route]bool{
	retryRoute: true, cancelRoute: true, opsOrdersRoute: true, opsOrderRoute: true, opsWorkflowsRoute: true,
}

// Handle serves one API Gateway request. The error is always nil: failures
// are problem responses, so API Gateway never answers with its own opaque 500.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
	method := requestMethod(req)
	rt, orderID := resolve(req)
	log := h.log.With(
		slog.String("requestId", req.RequestContext.RequestID),
		slog.String("method", method),
		slog.String("path", requestPath(req)),
	)
	defer func() {
		// A bug must still yield a problem document and a log line with the
		// request ID, not a bare Lambda error.
		if r := recover(); r != nil {
			log.ErrorContext(ctx, "panic while handling request", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			resp = h.fail(req, problem(http.StatusInternalServerError, ProblemInternal, "internal error"), nil)
		}
	}()

	switch {
	case rt == noRoute:
		return h.reject(ctx, log, req, problem(http.StatusNotFound, ProblemNotFound, "no such resource"), nil), nil
	case !slices.Contains(allowed[rt], method):
		return h.reject(ctx, log, req, problem(http.StatusMethodNotAllowed, ProblemMethod,
			fmt.Sprintf("use %s on this resource", strings.Join(allowed[rt], " or "))),
			map[string]string{"Allow": strings.Join(allowed[rt], ", ")}), nil
	}
	owner, err := caller(req)
	if err != nil {
		// API Gateway authorizes every route with IAM before invoking us, so
		// this is a route that lost its authorization, not a client's doing.
		log.WarnContext(ctx, "request without an IAM identity refused", slog.Any("error", err))
		return h.fail(req, problem(http.StatusForbidden, ProblemForbidden,
			"the request carries no IAM identity: every route of this API needs a SigV4-signed request"), nil), nil
	}
	if operatorRoutes[rt] && !h.operators.Is(req.RequestContext.Authorizer.IAM) {
		// The stack's client policy denies these routes, so only an IAM
		// grant of its own (execute-api:Invoke on the whole API, without
		// the client policy) lets a client here: refused before anything
		// is read, and worth a look.
		log.WarnContext(ctx, "operator route refused to a caller who is not an operator", slog.String("caller", req.RequestContext.Authorizer.IAM.UserARN))
		return h.fail(req, problem(http.StatusForbidden, ProblemNotOperator,
			"this route is for operators: the caller is not one of the deployment's operator roles or users"), nil), nil
	}
	switch {
	case rt == ordersRoute && method == http.MethodGet:
		return h.listOwnOrders(ctx, log, req, owner), nil
	case rt == ordersRoute:
		return h.createOrder(ctx, log, req, owner), nil
	case rt == opsOrdersRoute:
		return h.listOrders(ctx, log, req), nil
	case rt == opsWorkflowsRoute:
		return h.listWorkflows(ctx, log, req), nil
	}
	// Every other resource is one order's.
	if !message.ValidOrderID(orderID) {
		return h.reject(ctx, log, req, problem(http.StatusBadRequest, ProblemMalformed,
			"order ID must be 1..64 characters of A-Z, a-z, 0-9 or -"), nil), nil
	}
	log = log.With(slog.String("orderId", orderID))
	switch rt {
	case retryRoute:
		return h.retryOrder(ctx, log, req, orderID), nil
	case cancelRoute:
		return h.cancelOrder(ctx, log, req, orderID), nil
	case opsOrderRoute:
		return h.getOrder(ctx, log, req, orderID, ""), nil
	default:
		return h.getOrder(ctx, log, req, orderID, owner), nil
	}
}

// createOrder answers POST /orders: it reads the request, builds the order
// and its initial state record, and submits them.
func (h *Handler) createOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, owner string) events.APIGatewayV2HTTPResponse {
	if detail, ok := checkContentType(req.Headers); !ok {
		return h.reject(ctx, log, req, problem(http.StatusUnsupportedMediaType, ProblemMediaType, detail),
			map[string]string{"Accept-Post": contentTypeJSON})
	}
	key, hasKey, err := idempotencyKey(req.Headers)
	if err != nil {
		return h.reject(ctx, log, req, problem(http.StatusBadRequest, ProblemMalformed, err.Error()), nil)
	}
	body, p := h.readBody(req)
	if p != nil {
		return h.reject(ctx, log, req, *p, nil)
	}
	order, err := DecodeOrder(body)
	if err != nil {
		return h.reject(ctx, log, req, decodeProblem(err), nil)
	}
	// The version the order runs from start to end: the one it names, or
	// its workflow's current one.
	def, err := h.cfg.Workflows.ForNew(order.Workflow)
	if err != nil {
		return h.reject(ctx, log, req, problem(http.StatusUnprocessableEntity, ProblemValidation, "the order names no deployed workflow",
			FieldError{Field: "workflow", Detail: strings.TrimPrefix(err.Error(), workflow.ErrUnknownWorkflow.Error()+": ")}), nil)
	}
	mach := workflow.Machine{Def: def, Policy: h.policy()}

	// Every order gets an ID of its own, never one derived from its key:
	// a key the store has forgotten makes a new order that shares nothing
	// with the old one (see statestore's key.go).
	orderID := h.newID(owner, key)
	tr := h.orderTrace(ctx)
	ctx, log = trace.Join(ctx, log.With(slog.String("orderId", orderID), slog.String("workflow", def.ID())), tr)
	o := newOrder(orderID, owner, key, order, h.clk.Now().UTC())
	o.ExpiresAt = mach.OrderExpiresAt(o.CreatedAt)
	if hasKey {
		o.KeyExpiresAt = mach.KeyExpiresAt(o.CreatedAt)
	}
	input, err := jsonwire.Marshal(inputOf(o))
	if err != nil {
		return h.internal(ctx, log, req, fmt.Errorf("marshal order input: %w", err))
	}
	if len(input) > workflow.MaxInputBytes {
		// The input travels in every request to every agent; the workflow's
		// payload bounds count on this limit (the largest order the rules
		// admit is far below it).
		return h.reject(ctx, log, req, problem(http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf(
			"the order makes an input of %d bytes, over the limit of %d", len(input), workflow.MaxInputBytes)), nil)
	}
	// Shed only now: a malformed request gets its 4xx whatever the load,
	// and nothing is written for a shed one, so a retry starts afresh.
	if d := h.admit.Admit(ctx); !d.Admit {
		// Only new orders are shed: a retry of one already accepted (a
		// client that lost its 202) is answered as a replay whatever the
		// load. Its key is read only now, so the lookup costs nothing
		// while the system keeps up.
		if hasKey {
			if resp, used := h.replay(ctx, log, req, o); used {
				return resp
			}
		}
		return h.shed(ctx, log, req, d)
	}
	return h.submit(ctx, log, req, o, initialState(mach, o, input, req.RequestContext.RequestID, tr))
}

// orderTrace is the trace a new order goes in: the Lambda invocation's,
// which active tracing starts (API Gateway's HTTP API passes none), or a
// new one outside Lambda.
func (h *Handler) orderTrace(ctx context.Context) trace.Header {
	if tr, ok := trace.FromLambda(ctx); ok {
		return tr
	}
	return trace.New(h.clk.Now())
}

// shed answers a well-formed order the system cannot take now: 429 with
// Retry-After, nothing written. Its log line is what the shed-orders
// metric counts.
func (h *Handler) shed(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, d admission.Decision) events.APIGatewayV2HTTPResponse {
	secs := strconv.Itoa(int(d.RetryAfter / time.Second))
	log.InfoContext(ctx, OrderShed, slog.String("queue", d.Queue), slog.Int("depth", d.Depth), slog.String("retryAfter", secs))
	return h.fail(req, problem(http.StatusTooManyRequests, ProblemOverloaded, fmt.Sprintf(
		"the agents' queues are full; nothing was written, retry after %s s", secs)), map[string]string{"Retry-After": secs})
}

// newOrder is the order record of a request: what was asked and by whom,
// with the key and the hash a retry of the request is checked against.
func newOrder(orderID, owner, key string, r OrderRequest, now time.Time) workflow.Order {
	total, _ := r.TotalCents() // DecodeOrder guarantees it fits
	return workflow.Order{
		OrderID:        orderID,
		CustomerID:     r.CustomerID,
		ClientID:       r.ClientID,
		Owner:          owner,
		Currency:       r.Currency,
		Items:          r.Items,
		TotalCents:     total,
		IdempotencyKey: key,
		RequestHash:    r.Hash(),
		CreatedAt:      now,
	}
}

// initialState is the record a new order starts as: its first step
// claimed by this request (workflow.Machine.Accept), to be written with the
// order and dispatched by the Submission itself.
func initialState(mach workflow.Machine, o workflow.Order, input []byte, requestID string, tr trace.Header) workflow.State {
	state := mach.Accept(o.OrderID, input, "submission/"+requestID, o.CreatedAt)
	// The record carries it too: the event publisher reads only the stream
	// of state records, and the order-events topic filters on it.
	state.ClientID = o.ClientID
	// And its owner, which GET /orders/{id} checks on the record it reads.
	state.Owner = o.Owner
	// And its trace, for the actors that start from a schedule or a
	// stream; written in the same transaction, so it costs no request.
	state.Trace = tr.Stored().String()
	return state
}

// submit writes a new order with its state record in one transaction and
// asks the Scheduler to start it. An order its Idempotency-Key already made
// is answered as a replay.
func (h *Handler) submit(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, o workflow.Order, state workflow.State) events.APIGatewayV2HTTPResponse {
	err := h.store.CreateOrder(ctx, o, state)
	if errors.Is(err, workflow.ErrKeyUsed) {
		if resp, used := h.replay(ctx, log, req, o); used {
			return resp
		}
		// The key was forgotten between the write and the read (its
		// ExpiresAt came): it is free now.
		err = h.store.CreateOrder(ctx, o, state)
	}
	if err != nil {
		// Also ErrExists: a random UUID v4 collided, or the store
		// misreports. Never the client's doing, and a retry is safe.
		return h.internal(ctx, log, req, fmt.Errorf("create order %s: %w", o.OrderID, err))
	}

	// The first step is claimed in the record just written; its request
	// goes straight to the Agent, as a Scheduler's dispatch would.
	msg := message.Encode(followup.Request(state))
	if err := h.sender.Send(ctx, h.cfg.AgentQueues[state.Step], msg, 0); err != nil {
		// The order is durable and its step claimed: the Supervisor counts
		// the step as timed out at its CompleteBy and retries it, so the
		// client still gets 202.
		log.WarnContext(ctx, "first step not dispatched; the Supervisor retries it after its deadline", slog.Any("error", err))
	}
	log.InfoContext(ctx, "order accepted", workflow.TransitionAccepted.Attr(), slog.Int64("totalCents", o.TotalCents), slog.Int("items", len(o.Items)))
	return accepted(o.OrderID, state.ProcessState, false)
}

// replay answers a request whose Idempotency-Key already made an order: the
// answer to that order's submission, or 422 for another body. used is
// false when the store remembers no order made with the key (it never made
// one, or has forgotten it), and resp is then nothing.
func (h *Handler) replay(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, o workflow.Order) (resp events.APIGatewayV2HTTPResponse, used bool) {
	k, err := h.store.GetKey(ctx, o.Owner, o.IdempotencyKey)
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return resp, false
	case err != nil:
		// Whether this is a replay is unknown, so neither 202 nor 429 (which
		// says nothing was written) would be true; a retry is safe.
		return h.internal(ctx, log, req, fmt.Errorf("read the Idempotency-Key of order %s for a replay: %w", o.OrderID, err)), true
	}
	// The logger names the ID this request would have made; the replay's
	// order goes under its own key, so no key is on the line twice.
	log = log.With(slog.String("replayOf", k.OrderID))
	if k.Owner != o.Owner {
		// The slot hashes the owner with the key, so only a hash collision
		// lands here: not the client's doing, and nothing of the other
		// order may show.
		return h.internal(ctx, log, req, fmt.Errorf("the Idempotency-Key's slot holds order %s of another caller", k.OrderID)), true
	}
	if k.RequestHash != o.RequestHash {
		return h.reject(ctx, log, req, problem(http.StatusUnprocessableEntity, ProblemIdempotencyKey,
			"Idempotency-Key was already used with a different request"), nil), true
	}
	// No second dispatch: the first submission sent it, or, if that send
	// failed, the Supervisor retries the step after its deadline. The answer
	// is the first one's.
	log.InfoContext(ctx, "idempotent replay of an accepted order")
	return accepted(k.OrderID, workflow.Processing, true), true
}

// orderInput is the canonical order the workflow's Agents receive.
type orderInput struct {
	OrderID    string          `json:"orderId"`
	CustomerID string          `json:"customerId"`
	Currency   string          `json:"currency"`
	Items      []workflow.Item `json:"items"`
	TotalCents int64           `json:"totalCents"`
}

// inputOf is an order's input, as the workflow's Agents receive it.
func inputOf(o workflow.Order) orderInput {
	return orderInput{OrderID: o.OrderID, CustomerID: o.CustomerID, Currency: o.Currency, Items: o.Items, TotalCents: o.TotalCents}
}

// accepted is the 202 of a request that set an order going: a new order, a
// retry or a cancel, with the state it was left in. A replay of a new order
// gets the very same answer, state included, as idempotency promises; the
// current state is at Location.
func accepted(orderID string, state workflow.ProcessState, replayed bool) events.APIGatewayV2HTTPResponse {
	self := "/orders/" + orderID
	headers := map[string]string{"Location": self}
	if replayed {
		headers[ReplayedHeader] = "true"
	}
	return respond(http.StatusAccepted, contentTypeJSON,
		api.Accepted{OrderID: orderID, State: state, Links: api.Links{Self: self}}, headers)
}

// getOrder answers GET /orders/{id} for owner, or GET /ops/orders/{id} when
// owner is "" (the operators' route, which shows any order and its owner).
// Another caller's order is answered exactly as a missing one, so a client
// cannot even learn that an ID exists.
func (h *Handler) getOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, orderID, owner string) events.APIGatewayV2HTTPResponse {
	st, resp, ok := h.readState(ctx, log, req, orderID)
	if !ok {
		return resp
	}
	ctx, log = trace.Join(ctx, log, trace.Stored(st.Trace))
	switch {
	case owner != "" && st.Owner != owner:
		log.InfoContext(ctx, "order of another caller asked for; answered as missing", slog.String("caller", owner))
		return h.reject(ctx, log, req, notFoundProblem(orderID), nil)
	}
	return respond(http.StatusOK, contentTypeJSON, newStatus(st, owner == "", log), nil)
}

// newStatus is what GET /orders/{id} shows of a state record (api.Order),
// and GET /ops/orders/{id} with operator. It leaves out LockedBy (an
// internal Scheduler invocation ID, meaningless to clients), AlertPending,
// Requeues and Input (the order as submitted, which the client has and the
// status view need not echo). A failure is shown to everyone as its
// workflow.Reason, a code and our own words; its whole cause (LastError and
// the steps' errors), which may quote what AWS answered (a queue URL, an
// account ID, a role's ARN) or what a remote service wrote, and the owner
// only to operators.
func newStatus(st workflow.State, operator bool, log *slog.Logger) api.Order {
	reason := workflow.ReasonOf(st)
	s := api.Order{
		OrderID:      st.OrderID,
		Workflow:     st.Workflow,
		State:        st.ProcessState,
		Status:       workflow.StatusOf(st),
		Step:         st.Step,
		StepIndex:    st.StepIndex,
		FailureCount: st.FailureCount,
		Attempt:      st.Attempt,
		CompleteBy:   st.CompleteBy.UTC(),
		Reason:       reason.Code,
		ReasonText:   reason.Text,
		ClientID:     st.ClientID,
		EventSeq:     st.EventSeq,
		Cancelled:    st.Cancelled,
		Resubmits:    st.Resubmits,
		CreatedAt:    st.CreatedAt.UTC(),
		UpdatedAt:    st.UpdatedAt.UTC(),
		ExpiresAt:    utcPtr(&st.ExpiresAt),
		Steps:        make([]api.StepHistory, len(st.Steps)),
	}
	if operator {
		s.Owner, s.LastError = st.Owner, st.LastError
	}
	for i, r := range st.Steps {
		step, undo := workflow.StepReasons(r)
		h := api.StepHistory{
			Name:                   r.Name,
			State:                  r.State,
			Attempts:               r.Attempts,
			Failures:               r.Failures,
			StartedAt:              utcPtr(r.StartedAt),
			FinishedAt:             utcPtr(r.FinishedAt),
			Reason:                 step.Code,
			ReasonText:             step.Text,
			Output:                 validJSON(r.Output, r.Name, "output", log),
			Compensation:           r.Compensation,
			CompensationAttempts:   r.CompensationAttempts,
			CompensationFailures:   r.CompensationFailures,
			CompensatedAt:          utcPtr(r.CompensatedAt),
			CompensationOutput:     validJSON(r.CompensationOutput, r.Name, "compensationOutput", log),
			CompensationReason:     undo.Code,
			CompensationReasonText: undo.Text,
		}
		if operator {
			h.Error, h.CompensationError = r.Error, r.CompensationError
		}
		s.Steps[i] = h
	}
	return s
}

// validJSON returns an Agent's output, or nil if it is not JSON: outputs are
// stored as they came, and one bad output must not turn the whole status
// into a 500.
func validJSON(out json.RawMessage, step, member string, log *slog.Logger) json.RawMessage {
	if len(out) == 0 || json.Valid(out) {
		return out
	}
	log.Warn("step "+member+" is not valid JSON; omitted", slog.String("step", step))
	return nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// reject answers a client mistake.
func (h *Handler) reject(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, p Problem, headers map[string]string) events.APIGatewayV2HTTPResponse {
	log.InfoContext(ctx, "request rejected", slog.Int("status", p.Status), slog.String("type", p.Type), slog.String("detail", p.Detail))
	return h.fail(req, p, headers)
}

// internal answers our own failure: the cause goes to the log only.
func (h *Handler) internal(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	log.ErrorContext(ctx, "request failed", slog.Any("error", err))
	return h.fail(req, problem(http.StatusInternalServerError, ProblemInternal, "internal error"), nil)
}

func (h *Handler) fail(req events.APIGatewayV2HTTPRequest, p Problem, headers map[string]string) events.APIGatewayV2HTTPResponse {
	p.RequestID = req.RequestContext.RequestID
	return respond(p.Status, contentTypeProblem, p, headers)
}

func decodeProblem(err error) Problem {
	var me *MalformedError
	var ve *ValidationError
	switch {
	case errors.As(err, &me):
		if me.Field == "" {
			return problem(http.StatusBadRequest, ProblemMalformed, me.Detail)
		}
		return problem(http.StatusBadRequest, ProblemMalformed, me.Field+": "+me.Detail,
			FieldError{Field: me.Field, Detail: me.Detail})
	case errors.As(err, &ve):
		return problem(http.StatusUnprocessableEntity, ProblemValidation, "the order has invalid fields", ve.Errors...)
	}
	return problem(http.StatusBadRequest, ProblemMalformed, "the body is not a well-formed order")
}

// readBody returns the raw body, undoing API Gateway's base64, within the cap.
func (h *Handler) readBody(req events.APIGatewayV2HTTPRequest) ([]byte, *Problem) {
	limit := h.cfg.MaxBodyBytes
	tooLarge := problem(http.StatusRequestEntityTooLarge, ProblemTooLarge,
		fmt.Sprintf("the body exceeds %d bytes", limit))
	if !req.IsBase64Encoded {
		if int64(len(req.Body)) > limit {
			return nil, &tooLarge
		}
		return []byte(req.Body), nil
	}
	// Refuse before decoding, so an oversized body costs no allocation.
	if int64(base64.StdEncoding.DecodedLen(len(req.Body))) > limit+2 {
		return nil, &tooLarge
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		p := problem(http.StatusBadRequest, ProblemMalformed, "the body is marked base64 but is not valid base64")
		return nil, &p
	}
	if int64(len(b)) > limit {
		return nil, &tooLarge
	}
	return b, nil
}

func checkContentType(headers map[string]string) (string, bool) {
	v, ok := header(headers, "Content-Type")
	if !ok || v == "" {
		return "Content-Type must be application/json", false
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != contentTypeJSON {
		return "Content-Type must be application/json", false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "the only charset accepted is utf-8", false
	}
	return "", true
}

func idempotencyKey(headers map[string]string) (key string, ok bool, err error) {
	key, ok = header(headers, IdempotencyKeyHeader)
	if !ok {
		return "", false, nil
	}
	if len(key) < 1 || len(key) > maxIdempotencyKeyLen {
		return "", false, fmt.Errorf("%s must have 1..%d characters", IdempotencyKeyHeader, maxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", false, fmt.Errorf("%s must be printable ASCII", IdempotencyKeyHeader)
		}
	}
	return key, true, nil
}

// header looks a header up case-insensitively: API Gateway lowercases
// names, but tests, proxies and local tooling may not.
func header(headers map[string]string, name string) (string, bool) {
	if v, ok := headers[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func requestMethod(req events.APIGatewayV2HTTPRequest) string {
	if m := req.RequestContext.HTTP.Method; m != "" {
		return m
	}
	if m, _, ok := strings.Cut(routeKey(req), " "); ok {
		return m
	}
	return ""
}

func routeKey(req events.APIGatewayV2HTTPRequest) string {
	if req.RouteKey != "" {
		return req.RouteKey
	}
	return req.RequestContext.RouteKey
}

// requestPath is the path as the client sent it.
func requestPath(req events.APIGatewayV2HTTPRequest) string {
	if req.RawPath != "" {
		return req.RawPath
	}
	return req.RequestContext.HTTP.Path
}

// resolve finds the resource a request is for. It reads the path, which
// both a $default route and explicit routes ("POST /orders") carry; on a
// named stage of the execute-api domain the path starts with the stage,
// which is stripped when the path does not match as it is. Only if an event
// has no path at all does it fall back to the route key and path parameters.
func resolve(req events.APIGatewayV2HTTPRequest) (route, string) {
	path := requestPath(req)
	if path == "" {
		path = pathFromRouteKey(req)
	}
	if rt, id := match(path); rt != noRoute {
		return rt, id
	}
	if stage := req.RequestContext.Stage; stage != "" && stage != "$default" {
		if rest, ok := strings.CutPrefix(path, "/"+stage); ok && strings.HasPrefix(rest, "/") {
			return match(rest)
		}
	}
	return noRoute, ""
}

func match(path string) (route, string) {
	if path == "/ops/workflows" {
		return opsWorkflowsRoute, ""
	}
	if rest, ok := strings.CutPrefix(path, "/ops/orders"); ok {
		switch id, isOrder := strings.CutPrefix(rest, "/"); {
		case rest == "":
			return opsOrdersRoute, ""
		case isOrder && id != "" && !strings.Contains(id, "/"):
			return opsOrderRoute, id
		}
		return noRoute, ""
	}
	rest, ok := strings.CutPrefix(path, "/orders")
	switch {
	case !ok:
		return noRoute, ""
	case rest == "":
		return ordersRoute, ""
	}
	rest, ok = strings.CutPrefix(rest, "/")
	if !ok {
		return noRoute, ""
	}
	id, action, hasAction := strings.Cut(rest, "/")
	switch {
	case id == "":
		return noRoute, ""
	case !hasAction:
		return orderRoute, id
	case action == "retry":
		return retryRoute, id
	case action == "cancel":
		return cancelRoute, id
	}
	return noRoute, ""
}

// pathFromRouteKey rebuilds a path from "GET /orders/{id}" and the path
// parameters.
func pathFromRouteKey(req events.APIGatewayV2HTTPRequest) string {
	_, tmpl, ok := strings.Cut(routeKey(req), " ")
	if !ok {
		return ""
	}
	segs := strings.Split(tmpl, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, "{"); ok {
			name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "+")
			segs[i] = req.PathParameters[name]
		}
	}
	return strings.Join(segs, "/")
}
