package dlq

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/message"
)

// Body is what a dead-lettered message's body says, decoded with the
// system's wire types (shared/message). It names IDs, the step and the
// attempt, never the order's contents or a step's output.
type Body struct {
	Kind      message.Kind `json:"kind,omitempty"`
	OrderID   string       `json:"orderId,omitempty"`
	Step      string       `json:"step,omitempty"`
	StepIndex int          `json:"stepIndex"`
	Attempt   int          `json:"attempt,omitempty"`
	// Action is perform or compensate for requests and replies; for a
	// Schedule, compensate when it asks for the undo.
	Action message.Action `json:"action,omitempty"`
	// Outcome and FaultCode are an Agent reply's.
	Outcome   message.Outcome `json:"outcome,omitempty"`
	FaultCode string          `json:"faultCode,omitempty"`
	// Reason is a Schedule's.
	Reason string `json:"reason,omitempty"`
	// Poison is why no consumer can read the body, when it cannot.
	Poison string `json:"poison,omitempty"`
}

// maxPoisonText bounds the decode error quoted for a poison body.
const maxPoisonText = 300

// DecodeBody decodes a body taken from a dead-letter queue: outside input,
// so anything at all. A body the system's decoders refuse comes back with
// Poison set, and with the IDs its header shows when it is a JSON object.
func DecodeBody(body string) Body {
	kind, err := message.Peek(body)
	if err != nil {
		return Body{Poison: clip(err.Error())}
	}
	var b Body
	switch kind {
	case message.KindSchedule:
		var m message.Schedule
		if m, err = message.DecodeSchedule(body); err == nil {
			b = Body{OrderID: m.OrderID, StepIndex: m.StepIndex, Reason: m.Reason}
			if m.Compensate {
				b.Action = message.Compensate
			}
		}
	case message.KindAgentRequest:
		var m message.AgentRequest
		if m, err = message.DecodeAgentRequest(body); err == nil {
			b = Body{OrderID: m.OrderID, Step: m.Step, StepIndex: m.StepIndex, Attempt: m.Attempt, Action: m.Action}
		}
	case message.KindAgentReply:
		var m message.AgentReply
		if m, err = message.DecodeAgentReply(body); err == nil {
			b = Body{OrderID: m.OrderID, Step: m.Step, StepIndex: m.StepIndex, Attempt: m.Attempt, Action: m.Action, Outcome: m.Outcome}
			if m.Fault != nil {
				b.FaultCode = m.Fault.Code
			}
		}
	case message.KindDeadline:
		var m message.Deadline
		if m, err = message.DecodeDeadline(body); err == nil {
			b = Body{OrderID: m.OrderID, StepIndex: m.StepIndex, Attempt: m.Attempt}
		}
	}
	b.Kind = kind
	if err != nil {
		b.Poison = clip(err.Error())
	}
	if b.Action == message.Perform {
		b.Action = ""
	}
	return b
}

// clip bounds text quoted from outside and keeps it one valid line.
func clip(s string) string {
	s = strings.ToValidUTF8(strings.Join(strings.Fields(s), " "), "\uFFFD")
	if utf8.RuneCountInString(s) <= maxPoisonText {
		return s
	}
	return string([]rune(s)[:maxPoisonText-1]) + "…"
}

// Summary is the body in a few words for a table cell: the action and
// outcome, or why it is poison.
func (b Body) Summary() string {
	if b.Poison != "" {
		return "poison: " + b.Poison
	}
	var parts []string
	if b.Action != "" {
		parts = append(parts, string(b.Action))
	}
	if b.Outcome != "" {
		o := string(b.Outcome)
		if b.FaultCode != "" {
			o += fmt.Sprintf(" (%s)", b.FaultCode)
		}
		parts = append(parts, o)
	}
	if b.Reason != "" {
		parts = append(parts, "reason "+b.Reason)
	}
	return strings.Join(parts, ", ")
}
