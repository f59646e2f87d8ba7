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
//
// routes.go declares the routes, each once, with the method that serves
// it; handler.go checks a request against them (Handle); create.go,
// read.go, list.go, workflows.go and operator.go serve them; request.go
// reads the request's headers and body.
package submission

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
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
	// GetKey returns what an owner's Idempotency-Key made, the owner named
	// by its key (Owner.Key), or an error wrapping workflow.ErrNotFound
	// when nothing or when it is forgotten.
	GetKey(ctx context.Context, ownerKey, key string) (workflow.KeyUse, error)
	// GetState and GetOrder return an error wrapping workflow.ErrNotFound
	// when absent.
	GetState(ctx context.Context, orderID string) (workflow.State, error)
	GetOrder(ctx context.Context, orderID string) (workflow.Order, error)
	// ListByState lists the records in a listed state, newest entry into
	// the state first, limit 1..100, from cursor ("" for the first page).
	// The records carry only the listing's attributes. A cursor it cannot
	// decode is an error wrapping statestore.ErrBadCursor; a state that is
	// not listed, one wrapping statestore.ErrNotListed.
	ListByState(ctx context.Context, state workflow.ProcessState, limit int, cursor string) (statestore.Page, error)
	// ListByOwner lists the orders of the owner named by its key
	// (Owner.Key), newest first, limit 1..100, from cursor ("" for the
	// first page), with the same attributes as ListByState. A cursor it
	// cannot decode, or one of another owner's listing, is an error
	// wrapping statestore.ErrBadCursor.
	ListByOwner(ctx context.Context, ownerKey string, limit int, cursor string) (statestore.Page, error)
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
	Admit(ctx context.Context, class workflow.Priority) admission.Decision
}

// ReplayedHeader marks a response that answers a retry of an earlier request.
const ReplayedHeader = "Idempotent-Replayed"

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
	// draw is uniform in [0, 1): the sampling decision's (orderTrace).
	draw func() float64
}

// Option changes a Handler built by New.
type Option func(*Handler)

// WithOrderIDs makes next the source of new orders' IDs instead of random
// UUIDs, from the caller's key (Owner.Key) and the order's Idempotency-Key
// ("" for none), so
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
		newID: func(string, string) string { return randomOrderID() }, draw: rand.Float64}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Handle serves one API Gateway request. The error is always nil: failures
// are problem responses, so API Gateway never answers with its own opaque 500.
//
// Before a route's handler runs, in this order: a path no route matches is
// a 404, a method its route does not take a 405, a request without an IAM
// identity a 403, an operator route called by a caller who is not an
// operator a 403, and a malformed order ID a 400. Nothing is read before.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
	m, found := resolve(req)
	log := h.log.With(
		slog.String("requestId", req.RequestContext.RequestID),
		slog.String("method", requestMethod(req)),
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
	case !found:
		return h.reject(ctx, log, req, problem(http.StatusNotFound, ProblemNotFound, "no such resource"), nil), nil
	case m.endpoint == nil:
		return h.reject(ctx, log, req, problem(http.StatusMethodNotAllowed, ProblemMethod,
			fmt.Sprintf("use %s on this resource", strings.Join(m.allow, " or "))),
			map[string]string{"Allow": strings.Join(m.allow, ", ")}), nil
	}
	owner, err := caller(req)
	if err != nil {
		// API Gateway authorizes every route with IAM before invoking us, so
		// this is a route that lost its authorization, not a client's doing.
		log.WarnContext(ctx, "request without an IAM identity refused", slog.Any("error", err))
		return h.fail(req, problem(http.StatusForbidden, ProblemForbidden,
			"the request carries no IAM identity: every route of this API needs a SigV4-signed request"), nil), nil
	}
	if m.endpoint.Operator && !h.operators.Is(req.RequestContext.Authorizer.IAM) {
		// The stack's client policy denies these routes, so only an IAM
		// grant of its own (execute-api:Invoke on the whole API, without
		// the client policy) lets a client here: refused before anything
		// is read, and worth a look.
		log.WarnContext(ctx, "operator route refused to a caller who is not an operator", slog.String("caller", req.RequestContext.Authorizer.IAM.UserARN))
		return h.fail(req, problem(http.StatusForbidden, ProblemNotOperator,
			"this route is for operators: the caller is not one of the deployment's operator roles or users"), nil), nil
	}
	a := args{owner: owner}
	if id, ok := m.params[orderIDParam]; ok {
		if !message.ValidOrderID(id) {
			return h.reject(ctx, log, req, problem(http.StatusBadRequest, ProblemMalformed,
				"order ID must be 1..64 characters of A-Z, a-z, 0-9 or -"), nil), nil
		}
		a.orderID = id
		log = log.With(slog.String("orderId", id))
	}
	return m.endpoint.serve(h, ctx, log, req, a), nil
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
