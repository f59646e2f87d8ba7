package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// MaxDocumentBytes caps a body a decoder reads. The API's largest answer, a
// page of 100 orders or one order with its step outputs, is far smaller.
const MaxDocumentBytes = 1 << 20

// maxCursorBytes bounds the opaque paging cursor a client accepts: it goes
// back into a query string, and a CLI shows it in a shell command.
const maxCursorBytes = 2048

// Order is an order's state record as GET /orders/{id} and GET
// /ops/orders/{id} show it. It leaves out what is internal (the Scheduler
// invocation holding the claim, the alert outbox, requeue counts) and the
// input, which the client sent. Owner, OwnerID and the failure texts
// (LastError, a step's Error and CompensationError), which may quote what
// AWS or a remote service answered, and the trace ID are shown on the
// operators' route only; both routes show the failure's Reason and ReasonText
// (workflow.ReasonOf).
type Order struct {
	OrderID  string                `json:"orderId"`
	Workflow string                `json:"workflow"`
	State    workflow.ProcessState `json:"state"`
	Status   workflow.Status       `json:"status"`
	// Priority is the order's class: high, normal or low.
	Priority     workflow.Priority `json:"priority"`
	Step         string            `json:"step"`
	StepIndex    int               `json:"stepIndex"`
	FailureCount int               `json:"failureCount"`
	// WaitRound counts the extended waits of the current step (Waiting);
	// absent at zero.
	WaitRound  int                 `json:"waitRound,omitempty"`
	Attempt    int                 `json:"attempt"`
	CompleteBy time.Time           `json:"completeBy,omitzero"`
	LastError  string              `json:"lastError,omitempty"`
	Reason     workflow.ReasonCode `json:"reason,omitempty"`
	ReasonText string              `json:"reasonText,omitempty"`
	ClientID   string              `json:"clientId,omitempty"`
	Owner      string              `json:"owner,omitempty"`
	// OwnerID is the unique ID of the owner's IAM principal (an IAM
	// user's AIDA…, a role's AROA…), which tells apart two principals of
	// one ARN, one created anew under the other's name: operators only.
	// Absent for an owner unique by itself (the root user, a federated
	// user, a Cognito identity) and on an order of a user or role not yet
	// stamped with it.
	OwnerID string `json:"ownerId,omitempty"`
	// TraceID is the order's trace (its X-Ray Root), which every log line
	// about the order carries as traceId: operators only.
	TraceID   string    `json:"traceId,omitempty"`
	EventSeq  int       `json:"eventSeq"`
	Cancelled bool      `json:"cancelled"`
	Resubmits int       `json:"resubmits"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// ExpiresAt is when an order that ended for good (Processed,
	// Compensated, Cancelled) is deleted, the retention after it ended;
	// absent while it is open or waits for an operator. From then on it is
	// answered as missing (404).
	ExpiresAt *time.Time    `json:"expiresAt,omitempty"`
	Steps     []StepHistory `json:"steps"`
}

// StepHistory is one step of an order's history. The compensation members
// appear only once the step's undo was asked for. Error and
// CompensationError are the operators' (see Order); the reasons are
// everyone's.
type StepHistory struct {
	Name                   string              `json:"name"`
	State                  workflow.StepState  `json:"state"`
	Attempts               int                 `json:"attempts"`
	Failures               int                 `json:"failures"`
	StartedAt              *time.Time          `json:"startedAt,omitempty"`
	FinishedAt             *time.Time          `json:"finishedAt,omitempty"`
	Error                  string              `json:"error,omitempty"`
	Reason                 workflow.ReasonCode `json:"reason,omitempty"`
	ReasonText             string              `json:"reasonText,omitempty"`
	Output                 json.RawMessage     `json:"output,omitempty"`
	Compensation           workflow.StepState  `json:"compensation,omitempty"`
	CompensationAttempts   int                 `json:"compensationAttempts,omitempty"`
	CompensationFailures   int                 `json:"compensationFailures,omitempty"`
	CompensatedAt          *time.Time          `json:"compensatedAt,omitempty"`
	CompensationOutput     json.RawMessage     `json:"compensationOutput,omitempty"`
	CompensationError      string              `json:"compensationError,omitempty"`
	CompensationReason     workflow.ReasonCode `json:"compensationReason,omitempty"`
	CompensationReasonText string              `json:"compensationReasonText,omitempty"`
}

// OrderSummary is one order of a listing: what the store's index projects,
// without the step history. LastError is in the operators' listing only.
type OrderSummary struct {
	OrderID      string                `json:"orderId"`
	State        workflow.ProcessState `json:"state"`
	Status       workflow.Status       `json:"status"`
	Priority     workflow.Priority     `json:"priority"`
	Step         string                `json:"step"`
	StepIndex    int                   `json:"stepIndex"`
	FailureCount int                   `json:"failureCount"`
	Attempt      int                   `json:"attempt"`
	LastError    string                `json:"lastError,omitempty"`
	Reason       workflow.ReasonCode   `json:"reason,omitempty"`
	ReasonText   string                `json:"reasonText,omitempty"`
	ClientID     string                `json:"clientId,omitempty"`
	CreatedAt    time.Time             `json:"createdAt"`
	UpdatedAt    time.Time             `json:"updatedAt"`
	ExpiresAt    *time.Time            `json:"expiresAt,omitempty"`
}

// Summary is the order as a listing shows it: without its history.
func (o Order) Summary() OrderSummary {
	return OrderSummary{
		OrderID:      o.OrderID,
		State:        o.State,
		Status:       o.Status,
		Priority:     o.Priority,
		Step:         o.Step,
		StepIndex:    o.StepIndex,
		FailureCount: o.FailureCount,
		Attempt:      o.Attempt,
		LastError:    o.LastError,
		Reason:       o.Reason,
		ReasonText:   o.ReasonText,
		ClientID:     o.ClientID,
		CreatedAt:    o.CreatedAt,
		UpdatedAt:    o.UpdatedAt,
		ExpiresAt:    o.ExpiresAt,
	}
}

// Page is the body of GET /orders and GET /ops/orders. NextCursor and Links
// are omitted on the last page.
type Page struct {
	Orders     []OrderSummary `json:"orders"`
	NextCursor string         `json:"nextCursor,omitempty"`
	Links      *PageLinks     `json:"links,omitempty"`
}

// PageLinks leads to the next page of the same listing.
type PageLinks struct {
	Next string `json:"next"`
}

// Accepted is the 202 of a request that set an order going (a new order, a
// retry or a cancel) with the state it was left in.
type Accepted struct {
	OrderID string                `json:"orderId"`
	State   workflow.ProcessState `json:"state"`
	Links   Links                 `json:"links"`
}

// Links leads to the order's current state.
type Links struct {
	Self string `json:"self"`
}

// The client decoders below ignore members they do not know: the API adds
// members without a version (unlike Event), and a client built before must
// still read the answer. Everything a client relies on is checked.

// DecodeOrder reads a body of GET /orders/{id} or GET /ops/orders/{id}. It
// refuses an answer without a well-formed order ID or with a state this
// build does not know.
func DecodeOrder(body []byte) (Order, error) {
	return decodeIdentified(body, "order", func(o *Order) (string, workflow.ProcessState) { return o.OrderID, o.State })
}

// pageReading is Page as DecodePage reads it: each order as sent, and
// the cursor as present or not, since an empty one is an error.
type pageReading struct {
	Orders     []json.RawMessage `json:"orders"`
	NextCursor *string           `json:"nextCursor"`
	Links      *PageLinks        `json:"links"`
}

// DecodePage reads a body of GET /orders or GET /ops/orders, checking each
// order as DecodeOrder does and the cursor as a string fit for a query and
// a shell. raws are the orders as sent, for a client that passes them on.
func DecodePage(body []byte) (p Page, raws []json.RawMessage, err error) {
	var r pageReading
	if err := unmarshal(body, &r); err != nil {
		return Page{}, nil, fmt.Errorf("decode order page: %w", err)
	}
	if r.Orders == nil {
		// null or absent: an answer from something other than the API.
		return Page{}, nil, errors.New("decode order page: no orders array")
	}
	p = Page{Orders: make([]OrderSummary, len(r.Orders)), Links: r.Links}
	for i, raw := range r.Orders {
		if err := json.Unmarshal(raw, &p.Orders[i]); err != nil {
			return Page{}, nil, fmt.Errorf("decode order page: order %d: %w", i, err)
		}
		if err := checkIdentity(p.Orders[i].OrderID, p.Orders[i].State); err != nil {
			return Page{}, nil, fmt.Errorf("decode order page: order %d: %w", i, err)
		}
	}
	if r.NextCursor != nil {
		if err := CheckCursor(*r.NextCursor); err != nil {
			return Page{}, nil, fmt.Errorf("decode order page: nextCursor: %w", err)
		}
		p.NextCursor = *r.NextCursor
	}
	return p, r.Orders, nil
}

// DecodeAccepted reads the 202 body of a new order, a retry or a cancel,
// checked as DecodeOrder checks an order.
func DecodeAccepted(body []byte) (Accepted, error) {
	return decodeIdentified(body, "accepted", func(a *Accepted) (string, workflow.ProcessState) { return a.OrderID, a.State })
}

// decodeIdentified decodes a document about one order and checks the order
// ID and state identity returns.
func decodeIdentified[T any](body []byte, what string, identity func(*T) (string, workflow.ProcessState)) (T, error) {
	var v, zero T
	if err := unmarshal(body, &v); err != nil {
		return zero, fmt.Errorf("decode %s: %w", what, err)
	}
	if err := checkIdentity(identity(&v)); err != nil {
		return zero, fmt.Errorf("decode %s: %w", what, err)
	}
	return v, nil
}

// unmarshal decodes one JSON document of at most MaxDocumentBytes.
func unmarshal(body []byte, into any) error {
	if len(body) > MaxDocumentBytes {
		return fmt.Errorf("body of %d bytes exceeds %d", len(body), MaxDocumentBytes)
	}
	return json.Unmarshal(body, into)
}

// checkIdentity refuses an order ID outside the API's alphabet (a client
// may echo it into a command it prints) and a state this build does not
// know.
func checkIdentity(orderID string, state workflow.ProcessState) error {
	if !message.ValidOrderID(orderID) {
		return fmt.Errorf("orderId %q is not an order ID", clip(orderID, 80))
	}
	if _, ok := workflow.ParseProcessState(string(state)); !ok {
		return fmt.Errorf("order %s: unknown state %q", orderID, clip(string(state), 40))
	}
	return nil
}

// CheckCursor accepts an opaque paging cursor a client can pass on: 1 to
// 2048 bytes of printable ASCII without spaces, fit for a query string and
// a shell command.
func CheckCursor(c string) error {
	if c == "" || len(c) > maxCursorBytes {
		return fmt.Errorf("length %d outside 1..%d", len(c), maxCursorBytes)
	}
	if i := strings.IndexFunc(c, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		return fmt.Errorf("byte %d is not printable ASCII", i)
	}
	return nil
}

// clip cuts s to at most n runes for an error message, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
