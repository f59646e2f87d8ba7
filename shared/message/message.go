// Package message defines the JSON messages that travel on the SQS queues
// between the Submission, Scheduler, Agents and Supervisor, and strict
// decoders for them: every message body is outside input.
package message

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/workflow"
)

// Version is the message schema version this code writes and reads.
const Version = 1

// MaxBodyBytes caps a message body before it is parsed: the SQS message
// limit (workflow.MaxMessageBytes). A valid definition keeps every request
// and reply well under it, so anything larger is poison, and a reply that
// would be larger is not sent.
const MaxBodyBytes = workflow.MaxMessageBytes

// Kind tells which message a body holds.
type Kind string

const (
	// KindSchedule asks the Scheduler to claim and dispatch an order's step.
	KindSchedule Kind = "schedule"
	// KindAgentRequest asks an Agent to perform a step.
	KindAgentRequest Kind = "agent.request"
	// KindAgentReply carries an Agent's outcome back to the Scheduler.
	KindAgentReply Kind = "agent.reply"
	// KindDeadline is a Deadline, for the Supervisor's fast path.
	KindDeadline Kind = "deadline"
)

// ErrPoison marks a body that can never be processed: not JSON, an unknown
// version or kind, or invalid fields. Handlers leave such a message to the
// queue's redrive policy, which moves it to the dead-letter queue.
var ErrPoison = errors.New("poison message")

// Outcome is how an Agent's step ended.
type Outcome string

const (
	Succeeded Outcome = "succeeded"
	// Failed means a permanent fault: retrying the step cannot help.
	Failed Outcome = "failed"
)

// Action is what an Agent is asked to do with its step.
type Action string

const (
	// Perform (also the empty value) applies the step's effect.
	Perform Action = "perform"
	// Compensate undoes the step's effect (the Compensating Transaction
	// pattern).
	Compensate Action = "compensate"
)

// Undo reports whether a is Compensate.
func (a Action) Undo() bool { return a == Compensate }

func (a Action) valid() bool { return a == "" || a == Perform || a == Compensate }

// Schedule asks the Scheduler to claim step StepIndex of an order, or its
// compensation when Compensate is set.
type Schedule struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind"`
	OrderID string `json:"orderId"`
	// Workflow is the version the order is pinned to (see WorkflowID).
	Workflow   string `json:"workflow,omitempty"`
	StepIndex  int    `json:"stepIndex"`
	Compensate bool   `json:"compensate,omitempty"`
	// Reason says who sent it and why (submitted, retry, requeue, released);
	// for logs only.
	Reason string `json:"reason,omitempty"`
}

// Deadline asks the Supervisor to look at an order when the CompleteBy of
// one phase of its record passes: the record's Attempt and CompleteBy as a
// write set them name the phase, so a Deadline for a phase the record has
// left is recognized and dropped. It arrives delayed until CompleteBy; the
// Supervisor's sweep stays the backstop for every Deadline that is lost.
type Deadline struct {
	V          int       `json:"v"`
	Kind       Kind      `json:"kind"`
	OrderID    string    `json:"orderId"`
	StepIndex  int       `json:"stepIndex"`
	Attempt    int       `json:"attempt"`
	CompleteBy time.Time `json:"completeBy"`
}

// AgentRequest asks an Agent to perform one attempt of a step.
type AgentRequest struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind"`
	OrderID string `json:"orderId"`
	// Workflow is the version the order is pinned to (see WorkflowID).
	Workflow   string    `json:"workflow,omitempty"`
	Step       string    `json:"step"`
	StepIndex  int       `json:"stepIndex"`
	Attempt    int       `json:"attempt"`
	CompleteBy time.Time `json:"completeBy"`
	// Action is Perform when empty.
	Action Action `json:"action,omitempty"`
	// IdempotencyKey is stable across every attempt of this step (or of its
	// compensation, which has a key of its own).
	IdempotencyKey string `json:"idempotencyKey"`
	// EffectKey, for a compensation, is the idempotency key the step's
	// effect was applied under: what the remote must undo.
	EffectKey string `json:"effectKey,omitempty"`
	// Input is the order as submitted.
	Input json.RawMessage `json:"input"`
	// Previous holds the outputs of the steps before this one, by step name;
	// for a compensation, of this step too.
	Previous map[string]json.RawMessage `json:"previous,omitempty"`
}

// Fault describes a permanent failure.
type Fault struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Uncertain says the remote may have applied the step all the same: it
	// answered 2xx with something the agent could not use, or a try before
	// the failing one ended without a clear answer (a timeout, a network
	// error, a 5xx). The step is undone either way; the flag tells an
	// operator reading the order what is known.
	Uncertain bool `json:"uncertain,omitempty"`
}

// FaultOutputTooLarge is the fault of a step whose output is over its
// limit (workflow.Step.OutputLimit): the agent reports it, and the Scheduler
// turns a reply carrying such an output into it.
const FaultOutputTooLarge = "output_too_large"

// Bounds of a fault's text; an agent truncates to them, so anything longer
// is not an agent's reply.
const (
	MaxFaultCodeBytes    = 64
	MaxFaultMessageBytes = 1024
)

// AgentReply is an Agent's answer for one attempt.
type AgentReply struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind"`
	OrderID string `json:"orderId"`
	// Workflow is the request's, sent back (see WorkflowID).
	Workflow  string          `json:"workflow,omitempty"`
	Step      string          `json:"step"`
	StepIndex int             `json:"stepIndex"`
	Attempt   int             `json:"attempt"`
	Action    Action          `json:"action,omitempty"`
	Outcome   Outcome         `json:"outcome"`
	Output    json.RawMessage `json:"output,omitempty"`
	Fault     *Fault          `json:"fault,omitempty"`
}

var (
	orderIDPattern  = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	stepNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
)

// ValidOrderID reports whether id has the shape of an order ID.
func ValidOrderID(id string) bool { return orderIDPattern.MatchString(id) }

// UUID writes 16 bytes as an RFC 9562 UUID of version (4 random, 8 a hash
// of one's own), the shape order IDs and Idempotency-Key slots take.
func UUID(b [16]byte, version byte) string {
	b[6] = b[6]&0x0f | version<<4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:16])
	return string(s[:])
}

const maxStepIndex = 100

type header struct {
	V    int  `json:"v"`
	Kind Kind `json:"kind"`
}

// Peek reads a body's version and kind so a handler that consumes several
// kinds can route it.
func Peek(body string) (Kind, error) {
	if err := checkBody(body); err != nil {
		return "", err
	}
	var h header
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		return "", poison("not a JSON object: %v", err)
	}
	return h.kind()
}

// kind is h's kind, when its version and kind are known.
func (h header) kind() (Kind, error) {
	if h.V != Version {
		return "", poison("unknown version %d", h.V)
	}
	switch h.Kind {
	case KindSchedule, KindAgentRequest, KindAgentReply, KindDeadline:
		return h.Kind, nil
	}
	return "", poison("unknown kind %q", h.Kind)
}

// DecodeSchedule parses and validates a Schedule body.
func DecodeSchedule(body string) (Schedule, error) {
	return decodeValid[Schedule](body, KindSchedule)
}

// DecodeAgentRequest parses and validates an AgentRequest body.
func DecodeAgentRequest(body string) (AgentRequest, error) {
	return decodeValid[AgentRequest](body, KindAgentRequest)
}

// DecodeAgentReply parses and validates an AgentReply body.
func DecodeAgentReply(body string) (AgentReply, error) {
	return decodeValid[AgentReply](body, KindAgentReply)
}

// DecodeDeadline parses and validates a Deadline body.
func DecodeDeadline(body string) (Deadline, error) {
	return decodeValid[Deadline](body, KindDeadline)
}

// WorkflowID is the workflow version the message's order is pinned to: the
// message's Workflow, or for a message sent before versions existed,
// which carries none, workflow.LegacyID.
func (m Schedule) WorkflowID() string { return orLegacy(m.Workflow) }

// WorkflowID is the version the request's order is pinned to (see
// Schedule.WorkflowID).
func (m AgentRequest) WorkflowID() string { return orLegacy(m.Workflow) }

// WorkflowID is the version the reply's order is pinned to (see
// Schedule.WorkflowID).
func (m AgentReply) WorkflowID() string { return orLegacy(m.Workflow) }

func orLegacy(id string) string {
	if id == "" {
		return workflow.LegacyID
	}
	return id
}

// checkWorkflow checks a message's workflow version: absent (a message
// from before versions) or an ID's shape.
func checkWorkflow(id string) error {
	if id != "" && !workflow.ValidID(id) {
		return poison("workflow %q is not a workflow version (name-vN)", id)
	}
	return nil
}

// validate applies a decoded message's rules beyond its JSON shape.
func (m Schedule) validate() error {
	if err := checkOrderStep(m.OrderID, m.StepIndex); err != nil {
		return err
	}
	return checkWorkflow(m.Workflow)
}

func (m Deadline) validate() error {
	if err := checkOrderStep(m.OrderID, m.StepIndex); err != nil {
		return err
	}
	switch {
	case m.Attempt < 0:
		// 0: a Pending record whose first claim is still to come.
		return poison("attempt %d must not be negative", m.Attempt)
	case m.CompleteBy.IsZero():
		return poison("completeBy is missing")
	}
	return nil
}

// NewDeadline is the Deadline of the phase st is in.
func NewDeadline(orderID string, stepIndex, attempt int, completeBy time.Time) Deadline {
	return Deadline{V: Version, Kind: KindDeadline, OrderID: orderID, StepIndex: stepIndex, Attempt: attempt, CompleteBy: completeBy}
}

func (m AgentRequest) validate() error {
	if err := checkAttempt(m.OrderID, m.StepIndex, m.Step, m.Attempt); err != nil {
		return err
	}
	if err := checkWorkflow(m.Workflow); err != nil {
		return err
	}
	switch {
	case m.CompleteBy.IsZero():
		return poison("completeBy is missing")
	case m.IdempotencyKey == "" || len(m.IdempotencyKey) > 200:
		return poison("idempotencyKey must have 1..200 bytes")
	case !isObject(m.Input):
		return poison("input must be a JSON object")
	case !m.Action.valid():
		return poison("unknown action %q", m.Action)
	case m.Action.Undo() && (m.EffectKey == "" || len(m.EffectKey) > 200):
		return poison("a compensation needs an effectKey of 1..200 bytes")
	case !m.Action.Undo() && m.EffectKey != "":
		return poison("effectKey belongs to compensations only")
	}
	return nil
}

func (m AgentReply) validate() error {
	if err := checkAttempt(m.OrderID, m.StepIndex, m.Step, m.Attempt); err != nil {
		return err
	}
	if err := checkWorkflow(m.Workflow); err != nil {
		return err
	}
	if !m.Action.valid() {
		return poison("unknown action %q", m.Action)
	}
	switch m.Outcome {
	case Succeeded:
		if m.Fault != nil {
			return poison("a succeeded reply carries a fault")
		}
	case Failed:
		switch {
		case m.Fault == nil || m.Fault.Code == "":
			return poison("a failed reply needs a fault code")
		case len(m.Fault.Code) > MaxFaultCodeBytes || len(m.Fault.Message) > MaxFaultMessageBytes:
			return poison("a fault's code and message must have at most %d and %d bytes", MaxFaultCodeBytes, MaxFaultMessageBytes)
		}
	default:
		return poison("unknown outcome %q", m.Outcome)
	}
	return nil
}

// Encode marshals a message; messages always marshal, so a failure is a bug.
// It does not escape HTML (see shared/jsonwire): an output travels as the
// bytes its size was checked at.
func Encode(m any) string {
	b, err := jsonwire.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("messages: encode %T: %v", m, err))
	}
	return string(b)
}

// NewSchedule builds a Schedule message for step stepIndex of an order
// pinned to the workflow version workflowID.
func NewSchedule(orderID, workflowID string, stepIndex int, reason string) Schedule {
	return Schedule{V: Version, Kind: KindSchedule, OrderID: orderID, Workflow: workflowID, StepIndex: stepIndex, Reason: reason}
}

// NewCompensation builds a Schedule message for the compensation of a step.
func NewCompensation(orderID, workflowID string, stepIndex int, reason string) Schedule {
	m := NewSchedule(orderID, workflowID, stepIndex, reason)
	m.Compensate = true
	return m
}

// message is a decoded message: its header, and its own rules.
type message interface {
	header() header
	validate() error
}

func (m Schedule) header() header     { return header{V: m.V, Kind: m.Kind} }
func (m AgentRequest) header() header { return header{V: m.V, Kind: m.Kind} }
func (m AgentReply) header() header   { return header{V: m.V, Kind: m.Kind} }
func (m Deadline) header() header     { return header{V: m.V, Kind: m.Kind} }

// decodeValid decodes body as a message of kind want, then applies the
// message's own rules; with an error it returns the zero message. A body
// is parsed once, and its header read from the message; only one that does
// not decode is parsed again (Peek), so that its error names its version
// or kind when those are what is wrong, as routing by Peek first would.
func decodeValid[M message](body string, want Kind) (M, error) {
	var m, zero M
	if err := checkBody(body); err != nil {
		return zero, err
	}
	if err := jsonstrict.Decode([]byte(body), &m); err != nil {
		kind, perr := Peek(body)
		switch {
		case perr != nil:
			return zero, perr
		case kind != want:
			return zero, poison("kind %q where %q was expected", kind, want)
		}
		return zero, poison("%s: %v", want, err)
	}
	kind, err := m.header().kind()
	if err != nil {
		return zero, err
	}
	if kind != want {
		return zero, poison("kind %q where %q was expected", kind, want)
	}
	if err := m.validate(); err != nil {
		return zero, err
	}
	return m, nil
}

func checkBody(body string) error {
	if len(body) > MaxBodyBytes {
		return poison("body of %d bytes exceeds %d", len(body), MaxBodyBytes)
	}
	if !utf8.ValidString(body) {
		return poison("body is not UTF-8")
	}
	return nil
}

func checkOrderStep(orderID string, stepIndex int) error {
	if !ValidOrderID(orderID) {
		return poison("orderId %q is not an order ID", orderID)
	}
	if stepIndex < 0 || stepIndex >= maxStepIndex {
		return poison("stepIndex %d outside 0..%d", stepIndex, maxStepIndex-1)
	}
	return nil
}

// checkAttempt checks the fields that name one attempt of a step, which an
// agent's request and its reply both carry.
func checkAttempt(orderID string, stepIndex int, step string, attempt int) error {
	if err := checkOrderStep(orderID, stepIndex); err != nil {
		return err
	}
	if !stepNamePattern.MatchString(step) {
		return poison("step %q is not a step name", step)
	}
	if attempt < 1 {
		return poison("attempt %d must be positive", attempt)
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 1 && raw[0] == '{' && json.Valid(raw)
}

func poison(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPoison, fmt.Sprintf(format, args...))
}
