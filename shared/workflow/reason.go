package workflow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A record keeps the whole cause of a failure, for operators: LastError and
// each step's Error and CompensationError may quote what AWS answered (a
// queue URL, an account ID, a role's ARN) or what a remote service wrote.
// A client is told a Reason instead: a code from a small fixed set and a
// text made only of our own words, the step's name and, for a step its
// service refused, that service's fault code when it is a plain token.
// The Reason is read from the texts the producers below write, so records
// stored before it existed are classified too.

// ReasonCode says, in a word a client can switch on, why an order met a
// failure. The set is reasons' (ReasonCodes); a client treats a code it
// does not know as ReasonFailed.
type ReasonCode string

// The reason codes; reasons documents each.
const (
	ReasonRejected           ReasonCode = "rejected"
	ReasonUndoRejected       ReasonCode = "undo-rejected"
	ReasonTimedOut           ReasonCode = "timed-out"
	ReasonUndoTimedOut       ReasonCode = "undo-timed-out"
	ReasonDispatchFailed     ReasonCode = "dispatch-failed"
	ReasonUndoDispatchFailed ReasonCode = "undo-dispatch-failed"
	ReasonOutputInvalid      ReasonCode = "output-invalid"
	ReasonWorkflowMissing    ReasonCode = "workflow-missing"
	ReasonCancelled          ReasonCode = "cancelled"
	ReasonNotUndoable        ReasonCode = "not-undoable"
	ReasonFailed             ReasonCode = "failed"
)

// Reason is what a client is told of a failure: Code, and Text, a sentence
// for a person. The zero Reason means no failure.
type Reason struct {
	Code ReasonCode
	Text string
}

// The texts the producers write and the classifier reads, with
// StrandedPrefix (recovery.go) and NotUndoablePrefix (compensation.go).
// TestReasonOfEveryProducer holds the producers that spell them out
// (Machine.Cancel, Machine.DispatchFailed) to them.
const (
	// DispatchFailurePrefix starts the LastError of a failed dispatch, so
	// an alert re-sent later still says what failed.
	DispatchFailurePrefix = "dispatch of "
	// UndoRejectedPrefix starts the LastError of an undo its service
	// refused, before RejectionMessage's text.
	UndoRejectedPrefix = "compensation "
	// FaultSeparator ends a refused step's fault code in RejectionMessage.
	FaultSeparator = ": "
	// UncertainNote ends the text of a refusal after which the remote may
	// have applied the step all the same.
	UncertainNote = " (outcome uncertain: the remote may have applied it)"
	// CancelledPrefix starts the text of a step a cancel stopped, before
	// the step's name (Machine.Cancel).
	CancelledPrefix = "cancelled at step "
	// undoDispatch follows DispatchFailurePrefix in the text of an undo
	// that could not be sent (Machine.DispatchFailed).
	undoDispatch = "compensation of "
	// timeoutPrefix and timeoutMarker frame the step's name and attempt in
	// TimeoutMessage.
	timeoutPrefix = "step "
	timeoutMarker = " did not complete by "
	// strandedAt precedes the step's name, and strandedEnd follows it, in
	// the text Stranded writes.
	strandedAt  = "the order stopped at step "
	strandedEnd = ";"
)

// TimeoutMessage is the LastError of a claim whose CompleteBy passed.
func TimeoutMessage(s State) string {
	return fmt.Sprintf("%s%s attempt %d%s%s", timeoutPrefix, s.Step, s.Attempt, timeoutMarker, s.CompleteBy.UTC().Format(time.RFC3339))
}

// outputFaults are the fault codes of a step whose result could not be
// used: the agent's and the Scheduler's own (shared/agent CodeInvalidOutput,
// CodeOutputTooLarge, CodeResponseTooLarge, CodeBadResponse;
// message.FaultOutputTooLarge), which import this package; the Scheduler's
// TestRefusalsGiveClientsAReason feeds each of them here.
var outputFaults = []string{"invalid_output", "output_too_large", "response_too_large", "bad_response"}

// RejectionMessage is the LastError of a step whose agent reported a
// permanent fault (UndoRejectedPrefix is put before it for an undo): the
// service's fault code and message, and whether the step may have been
// applied all the same.
func RejectionMessage(code, message string, uncertain bool) string {
	msg := code + FaultSeparator + message
	if uncertain {
		msg += UncertainNote
	}
	return msg
}

// safeFault is the shape of a service's fault code a client may read: a
// plain token that starts with a letter. A problem type URI, a code with
// spaces or punctuation, or a bare number (an account ID is one) is left
// out.
var safeFault = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// kind is what a producer's text says happened, before it is known whether
// a step or its undo failed.
type kind int

const (
	kindUnknown kind = iota
	kindWorkflowMissing
	kindDispatch
	kindCancelled
	kindTimeout
	kindOutput
	kindRejected
	kindNotUndoable
)

// phase says whether a row of reasons is for the failure of a step, of
// its undo, or of either.
type phase int

const (
	eitherPhase phase = iota
	stepPhase
	undoPhase
)

// reasons is the one table of reason codes: which kind of text each is for,
// in which phase, what a client reads (%s is "step <name>", or "the undo
// of step <name>" for an undo) and what it means, for the documentation.
// A new producer of failure texts adds its kind to classify and its row
// here; a text no row takes is ReasonFailed.
var reasons = []struct {
	code  ReasonCode
	kind  kind
	phase phase
	text  string
	about string
}{
	{ReasonRejected, kindRejected, stepPhase, "%s was refused by its service",
		"The service of a step refused it for good. reasonText names the step, and the service's fault code when that is a plain token (a letter, then up to 63 letters, digits, '_', '.' or '-')."},
	{ReasonUndoRejected, kindRejected, undoPhase, "%s was refused by its service",
		"The service of a step refused to undo it: the order is only partly undone until an operator acts. reasonText carries the fault code as for rejected."},
	{ReasonTimedOut, kindTimeout, stepPhase, "%s did not complete in time",
		"A step did not complete in time. It is tried again; after the last try the order stops."},
	{ReasonUndoTimedOut, kindTimeout, undoPhase, "%s did not complete in time",
		"The undo of a step did not complete in time. It is tried again; after the last try an operator acts."},
	{ReasonDispatchFailed, kindDispatch, stepPhase, "%s could not be sent for processing",
		"A step could not be sent for processing. It is tried again; after the last try the order stops."},
	{ReasonUndoDispatchFailed, kindDispatch, undoPhase, "%s could not be sent for processing",
		"The undo of a step could not be sent for processing. It is tried again; after the last try an operator acts."},
	{ReasonOutputInvalid, kindOutput, eitherPhase, "the result of %s could not be used",
		"The result of a step could not be used (not JSON, or over its size limit). The step may have been applied, so it is undone."},
	{ReasonWorkflowMissing, kindWorkflowMissing, eitherPhase, "the order's workflow version is not deployed; it stopped at %s",
		"The workflow version the order runs on is not deployed: the order stopped where it was until an operator acts."},
	{ReasonCancelled, kindCancelled, eitherPhase, "the order was cancelled at %s",
		"The order was cancelled."},
	{ReasonNotUndoable, kindNotUndoable, eitherPhase, "%s may have been applied and has no undo, so the order cannot be undone whole",
		"The order stopped, and a step that was applied, or may have been, has no undo. Nothing was undone and an operator decides (the order is in Error), or an operator's cancel undid the rest (Cancelled)."},
	{ReasonFailed, kindUnknown, eitherPhase, "%s failed",
		"Any other failure."},
}

// ReasonCodes lists every code, in the order of the table.
func ReasonCodes() []ReasonCode {
	out := make([]ReasonCode, len(reasons))
	for i, r := range reasons {
		out[i] = r.code
	}
	return out
}

// About says what code means, for the documentation; "" for a code that
// is not one of ReasonCodes.
func (c ReasonCode) About() string {
	for _, r := range reasons {
		if r.code == c {
			return r.about
		}
	}
	return ""
}

// ReasonOf is what a client is told of the record's LastError; the zero
// Reason when it has none. The step, and whether its undo failed, are read
// from the step history when a step's Error or CompensationError is the
// same text (every stop writes both). Else the failure is one being retried,
// or the record is a listing's, read without its history: the step is the
// one the text names, or the record's own where that is still the failed
// one, or none ("a step"); an undo is what the text says, or else the
// record's phase.
func ReasonOf(s State) Reason {
	if s.LastError == "" {
		return Reason{}
	}
	for i := len(s.Steps) - 1; i >= 0; i-- {
		switch r := s.Steps[i]; s.LastError {
		case r.Error:
			return ReasonFor(r.Error, r.Name, false)
		case r.CompensationError:
			return ReasonFor(r.CompensationError, r.Name, true)
		}
	}
	k, step, _ := classify(s.LastError)
	known := len(s.Steps) == 0 || slices.ContainsFunc(s.Steps, func(r StepRecord) bool { return r.Name == step })
	if step == "" || !known {
		// A record stays at the step it stopped on until an operator
		// acts; one in flight or ended may have moved past it since.
		step = ""
		if len(s.Steps) > 0 || s.ProcessState == Error || s.ProcessState == CompensationFailed || s.ProcessState == Cancelled {
			step = s.Step
		}
	}
	var undo bool
	switch k {
	case kindDispatch:
		undo = strings.HasPrefix(s.LastError, DispatchFailurePrefix+undoDispatch)
	case kindRejected, kindOutput:
		undo = strings.HasPrefix(s.LastError, UndoRejectedPrefix)
	case kindCancelled, kindNotUndoable:
	default:
		// Once the undos began every stop writes its own text, so a
		// retried failure left in LastError is an undo's.
		undo = s.ProcessState.Undoing() || s.ProcessState == Compensated || s.ProcessState == CompensationFailed
	}
	return ReasonFor(s.LastError, step, undo)
}

// StepReasons is what a client is told of a step's Error and of its
// CompensationError; each is the zero Reason when the text is empty.
func StepReasons(r StepRecord) (step, undo Reason) {
	if r.Error != "" {
		step = ReasonFor(r.Error, r.Name, false)
	}
	if r.CompensationError != "" {
		undo = ReasonFor(r.CompensationError, r.Name, true)
	}
	return step, undo
}

// ReasonFor classifies msg, a failure of step (of its undo when undo is
// set) written by one of the producers above, or by an older build. Of the
// inputs only the step's name, when it has the shape of one, and a safe
// fault code reach the Reason; the rest of its text is ours.
func ReasonFor(msg, step string, undo bool) Reason {
	k, _, fault := classify(msg)
	subject := "a step"
	if stepName.MatchString(step) {
		subject = "step " + step
	}
	if undo {
		subject = "the undo of " + subject
	}
	for _, r := range reasons {
		if r.kind != k || r.phase != eitherPhase && (r.phase == undoPhase) != undo {
			continue
		}
		text := strings.Replace(r.text, "%s", subject, 1)
		if fault != "" {
			text += " (" + fault + ")"
		}
		return Reason{Code: r.code, Text: text}
	}
	// Unreachable while every kind has a row for either phase; a client
	// still gets a Reason.
	return Reason{Code: ReasonFailed, Text: subject + " failed"}
}

// classify reads a producer's text: its kind, the step it names (when the
// producer writes one; unchecked), and the fault code of a refusal when it
// is safe to show.
func classify(msg string) (k kind, step, fault string) {
	switch {
	case strings.HasPrefix(msg, NotUndoablePrefix):
		// The first step named is the first without an undo.
		return kindNotUndoable, stepBefore(strings.TrimPrefix(msg, NotUndoablePrefix), " "), ""
	case strings.HasPrefix(msg, StrandedPrefix):
		_, rest, _ := strings.Cut(msg, strandedAt)
		step, _, _ = strings.Cut(rest, strandedEnd)
		return kindWorkflowMissing, step, ""
	case strings.HasPrefix(msg, DispatchFailurePrefix):
		rest := strings.TrimPrefix(strings.TrimPrefix(msg, DispatchFailurePrefix), undoDispatch)
		return kindDispatch, stepBefore(rest, " attempt "), ""
	case strings.HasPrefix(msg, CancelledPrefix):
		return kindCancelled, strings.TrimPrefix(msg, CancelledPrefix), ""
	case strings.HasPrefix(msg, timeoutPrefix) && strings.Contains(msg, timeoutMarker):
		return kindTimeout, stepBefore(msg, " attempt "), ""
	}
	code, _, ok := strings.Cut(strings.TrimPrefix(msg, UndoRejectedPrefix), FaultSeparator)
	if !ok {
		return kindUnknown, "", ""
	}
	if slices.Contains(outputFaults, code) {
		return kindOutput, "", ""
	}
	if safeFault.MatchString(code) {
		fault = code
	}
	return kindRejected, "", fault
}

// stepBefore is the name in "step <name><end>..." at the start of s.
func stepBefore(s, end string) string {
	rest, ok := strings.CutPrefix(s, "step ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, end)
	return name
}
