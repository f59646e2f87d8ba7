// Package agent is the runtime every Agent Lambda shares: it consumes
// AgentRequest messages, performs the step through a Service (usually the
// remote service over HTTP) with retries, a circuit breaker and deadlines, and
// answers the Scheduler with an AgentReply — or stays silent when it is too
// late, leaving recovery to the Supervisor.
package agent

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
)

// Request is one try of a step, as the Scheduler asked for it.
type Request = step.Request

// RequestFrom builds a Request from a decoded message.
func RequestFrom(m message.AgentRequest) Request {
	return Request{
		OrderID:        m.OrderID,
		Step:           m.Step,
		StepIndex:      m.StepIndex,
		Attempt:        m.Attempt,
		Action:         m.Action,
		IdempotencyKey: m.IdempotencyKey,
		EffectKey:      m.EffectKey,
		Input:          m.Input,
		Previous:       m.Previous,
	}
}

// Service performs a step: the remote service over HTTP (HTTPService) or
// a code step (shared/codestep). Errors marked step.Permanent end the step
// as Failed; any other error is transient and the step is tried again
// while time remains. A Service whose steps can be undone implements
// step.Undoer too.
type Service = step.Step

// CodeNotCompensable is the fault of a compensation asked of a Service that
// cannot undo anything.
const CodeNotCompensable = "not_compensable"

// ErrInProgress is a Service's answer that another try holding the step's
// key is still at work: transient, and counted as an answer of a working
// service by the breaker, like the remote's 409 in_progress.
var ErrInProgress = errors.New("another try of the step holds its key")

// ErrRedeliver ends a try as if the Lambda had died in it: the handler
// sends no reply and lists the message in BatchItemFailures, so SQS
// delivers it again after its visibility timeout. The code-step runtime's
// fault points return it (shared/codestep's AfterEffect and AfterLedger).
var ErrRedeliver = errors.New("the try ended without an answer; the request comes back")

// mayHaveApplied reports whether a try that failed with err may have
// reached the remote and applied the step: anything but a call that was
// never made (an open breaker, a connection refused or never dialled) or one
// the remote turned away before doing anything (429 Too Many Requests). A
// 409 in_progress did not apply it, but the other call holding the key may
// have, and that call is this step's effect too.
func mayHaveApplied(err error) bool {
	var re *RemoteError
	var op *net.OpError
	switch {
	case errors.Is(err, ErrOpen):
		return false
	case errors.As(err, &re):
		return re.Status != http.StatusTooManyRequests
	case errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// Fault codes the runtime itself uses.
const (
	// CodePermanent is the code of a permanent error that names none.
	CodePermanent = "permanent"
	// CodeInvalidOutput: the Service returned output that is not JSON.
	CodeInvalidOutput = "invalid_output"
	// CodeOutputTooLarge: the output is over its step's limit, or does not
	// fit in a reply message.
	CodeOutputTooLarge = message.FaultOutputTooLarge
)

// Limits on fault text: it comes from the remote service and travels in a
// message with a size limit.
const (
	maxCodeBytes    = message.MaxFaultCodeBytes
	maxMessageBytes = message.MaxFaultMessageBytes
)

// FaultOf describes err for a Failed reply. The code comes from a Faulter in
// err's chain, else it is CodePermanent with the error text as message. The
// code is never empty and both fields are valid, bounded UTF-8.
func FaultOf(err error) message.Fault {
	if err == nil {
		return message.Fault{Code: CodePermanent}
	}
	f := message.Fault{Code: CodePermanent, Message: err.Error()}
	var fr step.Faulter
	if errors.As(err, &fr) {
		got := fr.Fault()
		if strings.TrimSpace(got.Code) != "" {
			f.Code = got.Code
		}
		if got.Message != "" {
			f.Message = got.Message
		}
	}
	f.Code = truncate(strings.TrimSpace(f.Code), maxCodeBytes)
	if f.Code == "" {
		f.Code = CodePermanent
	}
	f.Message = truncate(f.Message, maxMessageBytes)
	f.Uncertain = step.IsUncertain(err)
	return f
}

// RetryAfter returns the wait an error asks for before the next try: a
// remote's Retry-After, or the rest of an open breaker's cooldown.
func RetryAfter(err error) (time.Duration, bool) {
	var h interface{ RetryAfter() time.Duration }
	if errors.As(err, &h) {
		if d := h.RetryAfter(); d > 0 {
			return d, true
		}
	}
	return 0, false
}

// truncate makes s valid UTF-8 and cuts it to at most n bytes on a rune
// boundary.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
