package submission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// OrderShed is the msg of the line logged for each order the admission
// check sheds; the stack counts these lines into its shed-orders metric.
const OrderShed = "order shed"

// createOrder answers POST /orders: it reads the request, builds the order
// and its initial state record, and submits them.
func (h *Handler) createOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) (resp events.APIGatewayV2HTTPResponse) {
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
	orderID := h.newID(a.owner.Key(), key)
	tr := h.orderTrace(ctx)
	ctx, log, span := trace.Begin(ctx, log.With(slog.String("orderId", orderID), slog.String("workflow", def.ID())), tr, SegmentName)
	span.Annotate("order_id", orderID)
	span.Annotate("workflow", def.ID())
	defer func() { span.End(resp.StatusCode >= http.StatusInternalServerError) }()
	o := newOrder(orderID, a.owner, key, order, h.clk.Now().UTC())
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
	if d := h.admit.Admit(ctx, o.Priority.Or()); !d.Admit {
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

// SegmentName names the Submission's segment, the first of a recorded
// order's trace.
const SegmentName = "submission"

// orderTrace is the trace a new order goes in, and whether it is recorded:
// the Lambda invocation's trace ID where Lambda gives one (API Gateway's
// HTTP API passes none), or a new one; recorded or not by the order's one
// sampling decision, made here at TraceSampleRate (trace.Sample).
func (h *Handler) orderTrace(ctx context.Context) trace.Header {
	tr, ok := trace.FromLambda(ctx)
	if !ok {
		tr = trace.New(h.clk.Now())
	}
	return trace.Sample(trace.Header{Root: tr.Root}, h.cfg.TraceSampleRate, h.draw())
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
func newOrder(orderID string, owner Owner, key string, r OrderRequest, now time.Time) workflow.Order {
	total, _ := r.TotalCents() // DecodeOrder guarantees it fits
	return workflow.Order{
		OrderID:        orderID,
		CustomerID:     r.CustomerID,
		ClientID:       r.ClientID,
		Priority:       r.Priority.Stored(),
		Owner:          owner.Name,
		OwnerID:        owner.ID,
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
	// And what its owner is matched on, which GET /orders/{id} checks on
	// the record it reads: the unique ID, or the owner where it has none,
	// not both, since the record is written again and again and the order
	// once (workflow.State.Owner).
	if state.OwnerID = o.OwnerID; state.OwnerID == "" {
		state.Owner = o.Owner
	}
	// And its class, which the API and the events show.
	state.Priority = o.Priority
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
	k, err := h.store.GetKey(ctx, o.OwnerKey(), o.IdempotencyKey)
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
	if k.OwnerKey() != o.OwnerKey() {
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
