package step

import (
	"errors"
	"strings"

	"github.com/sasflow/sas/shared/message"
)

// mark is a kind an error can be marked with; errors.Is finds it anywhere
// in the chain, so an error can carry both kinds.
type mark struct{ prefix, suffix string }

func (m *mark) Error() string { return strings.TrimSpace(m.prefix + m.suffix) }

var (
	// permanent marks an error that retrying cannot fix.
	permanent = &mark{prefix: "permanent: "}
	// uncertain marks an error after which the effect may have been
	// applied all the same.
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

// Permanent marks err as permanent: the step fails without another try. It
// returns nil for nil and err itself when it is already permanent.
func Permanent(err error) error { return withMark(err, permanent) }

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool { return errors.Is(err, permanent) }

// Transient returns err unchanged: an error is transient unless marked
// Permanent, and the step is tried again while time remains. It says so
// where a reader might wonder.
func Transient(err error) error { return err }

// Uncertain marks err as an outcome that does not prove nothing was
// applied: an answer that could not be used, or a failure after a try that
// ended without a clear answer. A reply carries it as Fault.Uncertain, and
// the workflow undoes the step with the others.
func Uncertain(err error) error { return withMark(err, uncertain) }

// IsUncertain reports whether err, or any error it wraps, was marked with
// Uncertain.
func IsUncertain(err error) bool { return errors.Is(err, uncertain) }

// Faulter is implemented by errors that know their fault code, such as
// FaultError and the HTTP agent's RemoteError. A Failed reply prefers it
// to the error text.
type Faulter interface {
	Fault() message.Fault
}

// FaultError is a permanent error with a fault code of the step's choice.
type FaultError struct {
	Code    string
	Message string
}

func (e *FaultError) Error() string { return e.Code + ": " + e.Message }

// Fault returns the code and message.
func (e *FaultError) Fault() message.Fault { return message.Fault{Code: e.Code, Message: e.Message} }

var _ Faulter = (*FaultError)(nil)

// Reject returns a permanent error carrying a fault code, for a step that
// decides itself that it cannot succeed (out of stock, card declined). The
// code is what the order's record, the status events and the operators
// see: short, snake_case, stable.
func Reject(code, message string) error {
	return Permanent(&FaultError{Code: code, Message: message})
}
