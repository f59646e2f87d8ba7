package opsclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// MaxResponseBytes caps a response body before it is decoded. The API's
// largest answer, a page of 100 orders or one order with its step outputs, is
// far smaller.
const MaxResponseBytes = 1 << 20

// maxCursorBytes bounds the opaque paging cursor: it is echoed into a shell
// command hint and a query string, so it must stay short and printable.
const maxCursorBytes = 2048

// OrderSummary is one order in a page of GET /ops/orders.
type OrderSummary struct {
	OrderID      string                `json:"orderId"`
	State        workflow.ProcessState `json:"state"`
	Status       workflow.Status       `json:"status,omitempty"`
	Step         string                `json:"step"`
	StepIndex    int                   `json:"stepIndex"`
	FailureCount int                   `json:"failureCount"`
	Attempt      int                   `json:"attempt"`
	LastError    string                `json:"lastError,omitempty"`
	ClientID     string                `json:"clientId,omitempty"`
	CreatedAt    time.Time             `json:"createdAt"`
	UpdatedAt    time.Time             `json:"updatedAt"`
}

// Page is one page of GET /ops/orders.
type Page struct {
	Orders []OrderSummary
	// NextCursor fetches the next page; empty on the last one.
	NextCursor string
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage
	// rawOrders are the orders as sent, so --all can print one document.
	rawOrders []json.RawMessage
}

// Order is an order as GET /ops/orders/{id} shows it.
type Order struct {
	OrderID      string                `json:"orderId"`
	Workflow     string                `json:"workflow"`
	State        workflow.ProcessState `json:"state"`
	Status       workflow.Status       `json:"status,omitempty"`
	Step         string                `json:"step"`
	StepIndex    int                   `json:"stepIndex"`
	FailureCount int                   `json:"failureCount"`
	Attempt      int                   `json:"attempt"`
	CompleteBy   time.Time             `json:"completeBy"`
	LastError    string                `json:"lastError,omitempty"`
	ClientID     string                `json:"clientId,omitempty"`
	Owner        string                `json:"owner,omitempty"` // who submitted it; empty if before owners were recorded
	EventSeq     int                   `json:"eventSeq"`
	Cancelled    bool                  `json:"cancelled"`
	Resubmits    int                   `json:"resubmits"`
	CreatedAt    time.Time             `json:"createdAt"`
	UpdatedAt    time.Time             `json:"updatedAt"`
	Steps        []StepHistory         `json:"steps"`
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage `json:"-"`
}

// StepHistory is one step of an order's history, with its compensation.
type StepHistory struct {
	Name                 string             `json:"name"`
	State                workflow.StepState `json:"state"`
	Attempts             int                `json:"attempts"`
	Failures             int                `json:"failures"`
	StartedAt            time.Time          `json:"startedAt"`
	FinishedAt           time.Time          `json:"finishedAt"`
	Error                string             `json:"error,omitempty"`
	Output               json.RawMessage    `json:"output,omitempty"`
	Compensation         workflow.StepState `json:"compensation,omitempty"`
	CompensationAttempts int                `json:"compensationAttempts"`
	CompensationFailures int                `json:"compensationFailures"`
	CompensatedAt        time.Time          `json:"compensatedAt"`
	CompensationOutput   json.RawMessage    `json:"compensationOutput,omitempty"`
	CompensationError    string             `json:"compensationError,omitempty"`
}

// Accepted is the 202 answer to a retry or a cancel.
type Accepted struct {
	OrderID string                `json:"orderId"`
	State   workflow.ProcessState `json:"state"`
	Links   struct {
		Self string `json:"self"`
	} `json:"links"`
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage `json:"-"`
}

// Problem is an RFC 9457 problem document as the API writes it; RequestID
// is its extension member naming the request for a support case.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	RequestID string `json:"requestId"`
}

// decodePage reads and checks a body of GET /ops/orders.
func decodePage(body []byte) (Page, error) {
	var w struct {
		Orders     []json.RawMessage `json:"orders"`
		NextCursor *string           `json:"nextCursor"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return Page{}, fmt.Errorf("decode order page: %w", err)
	}
	if w.Orders == nil {
		// null or absent: an answer from something other than the API.
		return Page{}, errors.New("decode order page: no orders array")
	}
	p := Page{Orders: make([]OrderSummary, len(w.Orders)), Raw: body, rawOrders: w.Orders}
	for i, raw := range w.Orders {
		if err := json.Unmarshal(raw, &p.Orders[i]); err != nil {
			return Page{}, fmt.Errorf("decode order page: order %d: %w", i, err)
		}
		if err := checkIdentity(p.Orders[i].OrderID, p.Orders[i].State); err != nil {
			return Page{}, fmt.Errorf("decode order page: order %d: %w", i, err)
		}
	}
	if w.NextCursor != nil {
		if err := checkCursor(*w.NextCursor); err != nil {
			return Page{}, fmt.Errorf("decode order page: nextCursor: %w", err)
		}
		p.NextCursor = *w.NextCursor
	}
	return p, nil
}

// decodeOrder reads and checks a body of GET /ops/orders/{id}.
func decodeOrder(body []byte) (Order, error) {
	var o Order
	if err := json.Unmarshal(body, &o); err != nil {
		return Order{}, fmt.Errorf("decode order: %w", err)
	}
	if err := checkIdentity(o.OrderID, o.State); err != nil {
		return Order{}, fmt.Errorf("decode order: %w", err)
	}
	o.Raw = body
	return o, nil
}

// decodeAccepted reads and checks the 202 body of a retry or a cancel.
func decodeAccepted(body []byte) (Accepted, error) {
	var a Accepted
	if err := json.Unmarshal(body, &a); err != nil {
		return Accepted{}, fmt.Errorf("decode accepted: %w", err)
	}
	if err := checkIdentity(a.OrderID, a.State); err != nil {
		return Accepted{}, fmt.Errorf("decode accepted: %w", err)
	}
	a.Raw = body
	return a, nil
}

// decodeErrorBody reads an error answer: the API's RFC 9457 problem, or
// API Gateway's own {"message"} (bad signature, throttling, no route, its
// 5xx). Anything else yields neither, and the caller quotes the body.
func decodeErrorBody(body []byte) (p *Problem, message string) {
	var w struct {
		Problem
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &w) != nil {
		return nil, ""
	}
	if w.Title != "" || w.Type != "" || w.Status != 0 || w.Detail != "" {
		return &w.Problem, ""
	}
	return nil, w.Message
}

// checkIdentity rejects an answer without a well-formed order ID or with a
// state this build does not know. The ID is echoed into the follow-up
// commands the CLI prints, so only the API's ID alphabet may reach them.
func checkIdentity(orderID string, state workflow.ProcessState) error {
	if !message.ValidOrderID(orderID) {
		return fmt.Errorf("orderId %q is not an order ID", truncate(orderID, 80))
	}
	if _, ok := workflow.ParseProcessState(string(state)); !ok {
		return fmt.Errorf("order %s: unknown state %q", orderID, truncate(string(state), 40))
	}
	return nil
}

// checkCursor accepts an opaque cursor of printable ASCII without spaces, so
// it can travel in a query string and be shown in a shell command.
func checkCursor(c string) error {
	if c == "" || len(c) > maxCursorBytes {
		return fmt.Errorf("length %d outside 1..%d", len(c), maxCursorBytes)
	}
	if i := strings.IndexFunc(c, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		return fmt.Errorf("byte %d is not printable ASCII", i)
	}
	return nil
}
