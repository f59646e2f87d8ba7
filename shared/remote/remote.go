// Package remote is the HTTP contract between an Agent and the remote
// service it wraps: the routes, the request bodies and the error body. The
// agent (shared/agent) writes the requests and reads the answers; the
// simulator (internal/localstack/remotesim) serves them; the golden
// documents in testdata pin the JSON both sides exchange.
//
//	POST {base}/v1/steps/{step}             StepRequest, Idempotency-Key: the effect's key
//	POST {base}/v1/steps/{step}/compensate  CompensateRequest, Idempotency-Key: the undo's own key
//
// A 2xx answer's body is the step's output, any JSON in UTF-8 the service
// likes: the system stores it and hands it to later steps byte for byte
// (compacted) without reading it, so no output shape belongs to the
// contract. Any other answer may carry a Problem, or an RFC 9457 problem
// document (see ParseProblem). 408, 429 and 5xx are transient; so is a 409
// whose code is CodeInProgress:
//
//	409 in_progress   another call with the key is still at work: the caller asks again,
//	                  after Retry-After if the service sends one, until it gets the stored result
//	409 compensated   the key's effect was undone (or its undo came first): refused for good
//
// Any other 409 (idempotency_conflict, the key used with another body, say),
// and any other 4xx, is a permanent rejection. An undo of a key in progress
// is answered transiently (5xx) until the effect is settled.
//
// How strictly a service reads the requests, and how large it lets them
// be, is the service's own affair: the simulator's strict decoders live in
// the simulator.
package remote

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// IdempotencyKeyHeader carries the key a request applies its effect under
// at most once.
const IdempotencyKeyHeader = "Idempotency-Key"

// The routes as http.ServeMux patterns; PathStep names the wildcard.
const (
	StepRoute       = "POST /v1/steps/{step}"
	CompensateRoute = "POST /v1/steps/{step}/compensate"
	PathStep        = "step"
)

// StepPath is the path of step's route, below the service's base URL.
func StepPath(step string) string { return "/v1/steps/" + url.PathEscape(step) }

// CompensatePath is the path of the route that undoes step.
func CompensatePath(step string) string { return StepPath(step) + "/compensate" }

// StepRequest is the body of POST /v1/steps/{step}: the order's input and
// the outputs of the steps before, by step name.
type StepRequest struct {
	OrderID  string                     `json:"orderId"`
	Step     string                     `json:"step"`
	Input    json.RawMessage            `json:"input"`
	Previous map[string]json.RawMessage `json:"previous,omitempty"`
}

// CompensateRequest is the body of POST /v1/steps/{step}/compensate: the
// step's request, plus EffectKey, the key the step's effect was applied
// under: what to undo. Its members are the step's in the same order, not an
// embedded StepRequest, so the bytes on the wire stay as they were.
type CompensateRequest struct {
	OrderID   string                     `json:"orderId"`
	Step      string                     `json:"step"`
	EffectKey string                     `json:"effectKey"`
	Input     json.RawMessage            `json:"input"`
	Previous  map[string]json.RawMessage `json:"previous,omitempty"`
}

// Problem is the body of an error answer: a code a program can switch on
// and a message for a person.
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ParseProblem reads the code and message of an error answer's body. It
// takes a Problem, whose code may also be a number, and what an RFC 9457
// service writes: type as the code (unless about:blank, which means no type
// of its own), detail, else title, as the message. Anything else, and any
// member it cannot read, yields empty strings; the caller falls back on the
// status.
func ParseProblem(body []byte) (code, message string) {
	var p struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
		// RFC 9457's members.
		Type   string `json:"type"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return "", ""
	}
	switch c := p.Code.(type) {
	case string:
		code = c
	case float64:
		code = strconv.FormatFloat(c, 'f', -1, 64)
	}
	if strings.TrimSpace(code) == "" && p.Type != "about:blank" {
		code = p.Type
	}
	message = p.Message
	if message == "" {
		message = p.Detail
	}
	if message == "" {
		message = p.Title
	}
	return strings.TrimSpace(code), message
}

// Problem codes of a 409 Conflict whose meaning the Agent relies on (see
// the package doc).
const (
	// CodeInProgress: another call with the key is still being processed.
	// Nothing was refused: the effect may be applied any moment, so the
	// caller asks again, honouring a Retry-After, until the service answers
	// the stored result.
	CodeInProgress = "in_progress"
	// CodeCompensated: the key's effect was undone (or its undo came first),
	// and the service refuses the key for good.
	CodeCompensated = "compensated"
)
