package opsclient

import (
	"encoding/json"

	"github.com/sasflow/sas/shared/api"
)

// MaxResponseBytes caps a response body before it is decoded: api's bound
// on the documents it reads.
const MaxResponseBytes = api.MaxDocumentBytes

// The answers of the API are shared/api's documents, decoded and checked by
// api's decoders; the types here add the body as the API sent it, which
// --json prints untouched.

// Page is one page of GET /ops/orders.
type Page struct {
	api.Page
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage
	// rawOrders are the orders as sent, so --all can print one document.
	rawOrders []json.RawMessage
}

// Order is an order as GET /ops/orders/{id} shows it, owner included.
type Order struct {
	api.Order
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage `json:"-"`
}

// Accepted is the 202 answer to a retry or a cancel.
type Accepted struct {
	api.Accepted
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage `json:"-"`
}

// Workflows is the answer of GET /ops/workflows.
type Workflows struct {
	api.Workflows
	// Raw is the body as the API sent it, for --json.
	Raw json.RawMessage `json:"-"`
}

func decodeWorkflows(body []byte) (Workflows, error) {
	w, err := api.DecodeWorkflows(body)
	if err != nil {
		return Workflows{}, err
	}
	return Workflows{Workflows: w, Raw: body}, nil
}

func decodePage(body []byte) (Page, error) {
	p, raws, err := api.DecodePage(body)
	if err != nil {
		return Page{}, err
	}
	return Page{Page: p, Raw: body, rawOrders: raws}, nil
}

func decodeOrder(body []byte) (Order, error) {
	o, err := api.DecodeOrder(body)
	if err != nil {
		return Order{}, err
	}
	return Order{Order: o, Raw: body}, nil
}

func decodeAccepted(body []byte) (Accepted, error) {
	a, err := api.DecodeAccepted(body)
	if err != nil {
		return Accepted{}, err
	}
	return Accepted{Accepted: a, Raw: body}, nil
}

// decodeErrorBody reads an error answer: the API's RFC 9457 problem, or
// API Gateway's own {"message"} (bad signature, throttling, no route, its
// 5xx). Anything else yields neither, and the caller quotes the body.
func decodeErrorBody(body []byte) (p *api.Problem, message string) {
	if prob, ok := api.DecodeProblem(body); ok {
		return &prob, ""
	}
	var gw struct {
		Message string `json:"message"`
	}
	if len(body) > MaxResponseBytes || json.Unmarshal(body, &gw) != nil {
		return nil, ""
	}
	return nil, gw.Message
}
