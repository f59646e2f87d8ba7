// Package agent is the runtime every Agent Lambda shares: it consumes
// AgentRequest messages, performs the step through a Service (usually the
// remote service over HTTP) with retries, a circuit breaker and deadlines, and
// answers the Scheduler with an AgentReply — or stays silent when it is too
// late, leaving recovery to the Supervisor.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/message"
)

// Request is one attempt of a step, as the Scheduler asked for it.
type Request struct {
	OrderID   string
	Step      string
	StepIndex int
	Attempt   int
	// Action is message.Compensate for an undo; Perform otherwise.
	Action message.Action
	// IdempotencyKey is stable across every attempt of the step; the remote
	// service applies the effect at most once per key. A compensation has a
	// key of its own.
	IdempotencyKey string
	// EffectKey, for a compensation, is the key of the effect to undo.
	EffectKey string
	Input     json.RawMessage
	Previous  map[string]json.RawMessage
}

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

// Service performs a step. It returns the step's output (JSON) on success.
// Errors wrapped with Permanent end the step as Failed; any other error is
// transient and the step is tried again while time remains.
type Service interface {
	Do(ctx context.Context, req Request) (json.RawMessage, error)
}

// ServiceFunc adapts a function to Service.
type ServiceFunc func(ctx context.Context, req Request) (json.RawMessage, error)

// Do calls f.
func (f ServiceFunc) Do(ctx context.Context, req Request) (json.RawMessage, error) {
	return f(ctx, req)
}

var _ Service = ServiceFunc(nil)

// Compensator is implemented by Services whose steps can be undone. The
// remote must undo the effect applied under req.EffectKey at most once per
// req.IdempotencyKey, answer success when there was nothing to undo, and
// refuse that effect from then on (a late try of the step may still be on
// its way). Errors are classified as Do's are.
type Compensator interface {
	Compensate(ctx context.Context, req Request) (json.RawMessage, error)
}

// CodeNotCompensable is the fault of a compensation asked of a Service that
// cannot undo anything.
const CodeNotCompensable = "not_compensable"

// mark is a kind an error can be marked with; errors.Is finds it anywhere
// in the chain, so an error can carry both kinds.
type mark struct{ prefix, suffix string }

func (m *mark) Error() string { return strings.TrimSpace(m.prefix + m.suffix) }

var (
	// permanent marks an error that retrying cannot fix.
	permanent = &mark{prefix: "permanent: "}
	// uncertain marks an error after which the remote may have applied the
	// step all the same.
	uncertain = &mark{suffix: " (the remote may have applied it)"}
)

// markedError is err marked with a kind, which its text shows.
type markedError struct {
	err  error
	mark *mark
}

func (e *markedError) Error() string        { return e.mark.prefix + e.err.Error() + e.mark.suffix }
func (e *markedError) Unwrap() error        { return e.err }
func (e *markedError) Is(target error) bool { return target == e.mark }

// withMark marks err with m, unless it is nil or carries m already.
func withMark(err error, m *mark) error {
	if err == nil || errors.Is(err, m) {
		return err
	}
	return &markedError{err: err, mark: m}
}

// Permanent marks err as permanent. It returns nil for nil and err itself when
// it is already permanent.
func Permanent(err error) error { return withMark(err, permanent) }

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool { return errors.Is(err, permanent) }

// Uncertain marks err as an outcome that does not prove nothing was
// applied: a 2xx the agent could not use, or a failure after a try that
// ended without a clear answer. A reply carries it as Fault.Uncertain.
func Uncertain(err error) error { return withMark(err, uncertain) }

// IsUncertain reports whether err, or any error it wraps, was marked with
// Uncertain.
func IsUncertain(err error) bool { return errors.Is(err, uncertain) }

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

// Faulter is implemented by errors that know their fault code, such as
// *RemoteError. FaultOf prefers it to the error text.
type Faulter interface {
	Fault() message.Fault
}

// FaultError is a permanent error with a fault code of the caller's choice.
type FaultError struct {
	Code    string
	Message string
}

func (e *FaultError) Error() string { return e.Code + ": " + e.Message }

// Fault returns the code and message.
func (e *FaultError) Fault() message.Fault { return message.Fault{Code: e.Code, Message: e.Message} }

var _ Faulter = (*FaultError)(nil)

// Reject returns a permanent error carrying a fault code, for Services that
// decide themselves that a step cannot succeed.
func Reject(code, message string) error {
	return Permanent(&FaultError{Code: code, Message: message})
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
	var fr Faulter
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
	f.Uncertain = IsUncertain(err)
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
