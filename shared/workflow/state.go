package workflow

import (
	"encoding/json"
	"fmt"
	"time"
)

// The state record: the states an order goes through, the record the
// Scheduler keeps of it, and what a client is told of it.

// ProcessState is the state of an order's workflow, as in the pattern.
type ProcessState string

const (
	// Pending: the current step waits for a Scheduler to claim it.
	Pending ProcessState = "Pending"
	// Processing: a Scheduler claimed the current step and an Agent works on it
	// until CompleteBy.
	Processing ProcessState = "Processing"
	// Processed: every step completed. Terminal.
	Processed ProcessState = "Processed"
	// Error: a step failed permanently or too often, and the order cannot
	// be undone whole by itself: nothing it did has an undo, or a step that
	// may have been applied has none (see Definition.StopAt). It waits for
	// an operator, who resubmits the failed step or cancels the order; it
	// never expires meanwhile.
	Error ProcessState = "Error"
	// Waiting: the current step failed as often as its retry policy allows
	// and says to wait (Retry, ExhaustedWait): nothing runs until
	// CompleteBy, when the Supervisor hands the step back to the Scheduler
	// with a fresh failure count (WaitRound counts the waits). An operator
	// may retry it at once or cancel it meanwhile.
	Waiting ProcessState = "Waiting"

	// CompensationPending: the order stopped (failed or cancelled) and the
	// compensation of step StepIndex waits for a Scheduler to claim it.
	CompensationPending ProcessState = "CompensationPending"
	// Compensating: a Scheduler claimed the compensation of step StepIndex
	// and its Agent undoes the step's effect until CompleteBy.
	Compensating ProcessState = "Compensating"
	// Compensated: the order stopped by itself and every step whose effect
	// may have been applied was undone, last step first. Ended for good.
	Compensated ProcessState = "Compensated"
	// CompensationFailed: a compensation failed permanently or too often; a
	// person must act (fix the cause, then resubmit the compensation). It
	// waits for an operator and never expires meanwhile.
	CompensationFailed ProcessState = "CompensationFailed"
	// Cancelled: an operator's cancel stopped the order, and every step
	// whose effect may have been applied and has an undo was undone; one
	// that may have been applied and has none is named in LastError and
	// was reported to the operator (see Machine.Cancel). Ended for good.
	Cancelled ProcessState = "Cancelled"
)

// ProcessStates lists every state.
func ProcessStates() []ProcessState {
	return []ProcessState{Pending, Processing, Processed, Error, Waiting, CompensationPending, Compensating, Compensated, CompensationFailed, Cancelled}
}

// ParseProcessState reads a state name as the API and the CLI take it.
func ParseProcessState(s string) (ProcessState, bool) {
	for _, p := range ProcessStates() {
		if string(p) == s {
			return p, true
		}
	}
	return "", false
}

// InFlight reports whether the Supervisor watches records in this state.
func (s ProcessState) InFlight() bool {
	return s == Pending || s == Processing || s == Waiting || s == CompensationPending || s == Compensating
}

// Terminal reports whether no actor moves the record on by itself.
func (s ProcessState) Terminal() bool { return s.Ended() || s.NeedsOperator() }

// Ended reports whether the order ended for good: nothing reopens it, so
// it expires the retention later (see retention.go).
func (s ProcessState) Ended() bool { return s == Processed || s == Compensated || s == Cancelled }

// Claimed reports whether a Scheduler holds the record and an Agent works on
// it until CompleteBy.
func (s ProcessState) Claimed() bool { return s == Processing || s == Compensating }

// Undoing reports whether the record is in its compensation phase.
func (s ProcessState) Undoing() bool { return s == CompensationPending || s == Compensating }

// NeedsOperator reports whether the state waits for a person: the states
// that raise an alert and that an operator can resubmit.
func (s ProcessState) NeedsOperator() bool { return s == Error || s == CompensationFailed }

// Listed reports whether operators list the records in this state (GET
// /ops/orders?state=): the states an operator acts on (Error,
// CompensationFailed), may act on (Waiting: retry now, or cancel) or
// reviews (Compensated, Cancelled). The other states in flight are the
// Supervisor's to watch, and Processed, the bulk of all
// orders, is looked up by ID or through its owner's listing; keeping them
// out keeps the listing's index small and its writes rare.
func (s ProcessState) Listed() bool {
	return s == Error || s == Waiting || s == CompensationFailed || s == Compensated || s == Cancelled
}

// ListedStates lists the states operators list, in the order of
// ProcessStates.
func ListedStates() []ProcessState {
	var out []ProcessState
	for _, s := range ProcessStates() {
		if s.Listed() {
			out = append(out, s)
		}
	}
	return out
}

// StepState is the state of one step in a record's step history.
type StepState string

const (
	StepPending    StepState = "pending"
	StepProcessing StepState = "processing"
	StepSucceeded  StepState = "succeeded"
	StepFailed     StepState = "failed"
	// StepCancelled: the order was cancelled while the step was pending or
	// running; its outcome is unknown, so it is compensated if it can be.
	StepCancelled StepState = "cancelled"
)

// StepRecord is the history of one step inside a state record. Compensation
// and the status API read it.
type StepRecord struct {
	Name       string          `json:"name" dynamodbav:"Name"`
	State      StepState       `json:"state" dynamodbav:"State"`
	Attempts   int             `json:"attempts" dynamodbav:"Attempts"`
	Failures   int             `json:"failures" dynamodbav:"Failures"`
	StartedAt  *time.Time      `json:"startedAt,omitempty" dynamodbav:"StartedAt,omitempty"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty" dynamodbav:"FinishedAt,omitempty"`
	Output     json.RawMessage `json:"output,omitempty" dynamodbav:"-"`
	Error      string          `json:"error,omitempty" dynamodbav:"Error,omitempty"`

	// Compensation is the state of the step's undo: empty when none was
	// asked for, else pending, processing, succeeded (undone) or failed.
	Compensation         StepState       `json:"compensation,omitempty" dynamodbav:"-"`
	CompensationAttempts int             `json:"compensationAttempts,omitempty" dynamodbav:"-"`
	CompensationFailures int             `json:"compensationFailures,omitempty" dynamodbav:"-"`
	CompensatedAt        *time.Time      `json:"compensatedAt,omitempty" dynamodbav:"-"`
	CompensationOutput   json.RawMessage `json:"compensationOutput,omitempty" dynamodbav:"-"`
	CompensationError    string          `json:"compensationError,omitempty" dynamodbav:"-"`

	// Refused says the step's last outcome was a certain rejection: its
	// service refused it and said so cleanly, so nothing was applied under
	// its key (UndoRefused, the same of its undo). An operator's retry then
	// runs it under a fresh key, the next round (Machine.Resubmit).
	Refused     bool `json:"refused,omitempty" dynamodbav:"-"`
	UndoRefused bool `json:"undoRefused,omitempty" dynamodbav:"-"`
	// KeyRound and UndoKeyRound are the rounds of the step's and its undo's
	// idempotency keys (StepKey, UndoKey): 0 until an operator retried a
	// certain rejection.
	KeyRound     int `json:"keyRound,omitempty" dynamodbav:"-"`
	UndoKeyRound int `json:"undoKeyRound,omitempty" dynamodbav:"-"`
}

// Keys are the idempotency keys step i of s runs under now: its own and
// its undo's, each of its current round (StepKey, UndoKey).
func (s State) Keys(i int) (step, undo string) {
	if i < 0 || i >= len(s.Steps) {
		return "", ""
	}
	r := s.Steps[i]
	return StepKey(s.OrderID, r.Name, r.KeyRound), UndoKey(s.OrderID, r.Name, r.UndoKeyRound)
}

// State is the state record the Scheduler keeps for an order: one record per
// order, fenced by Attempt, with a history entry per step.
type State struct {
	OrderID      string
	Workflow     string
	StepIndex    int
	Step         string
	ProcessState ProcessState
	// LockedBy names the Scheduler invocation that holds the claim; empty when
	// unlocked.
	LockedBy string
	// CompleteBy is the deadline of the current phase: for Processing, the
	// Agent's deadline; for Pending, the time by which a Scheduler should have
	// claimed it; for Waiting, the end of the wait; for Error with
	// AlertPending, the time by which the alert should have gone out.
	CompleteBy time.Time
	// FailureCount counts expired attempts of the current step; it restarts
	// at zero when the workflow moves to the next step.
	FailureCount int
	// WaitRound counts the extended waits of the current step (Waiting);
	// like FailureCount it restarts at zero on the next step, and at an
	// operator's resubmission.
	WaitRound int
	// Attempt grows with every claim and is the fencing token a reply must
	// carry to be committed.
	Attempt      int
	LastError    string
	AlertPending bool
	// Requeues counts how often the Supervisor re-sent an unclaimed Pending
	// record to the Scheduler.
	Requeues int
	// ClientID names the client application that asked to be told of the
	// order's progress; empty when it did not ask.
	ClientID string
	// Owner and OwnerID are what the record keeps of the caller who
	// submitted the order (see Order.Owner and Order.OwnerID): what the
	// owner is matched on (OwnerKey), and no more, since every write of
	// the record costs a write unit per started KiB of it. So OwnerID
	// where the owner's principal has a unique ID, and Owner only where it
	// has none (the root user, a federated user, a Cognito identity, an
	// order written before IDs were recorded); the order keeps both, for
	// operators to read.
	Owner   string
	OwnerID string
	// Priority is the order's class (see Priority); empty for normal.
	Priority Priority
	// Trace is the order's X-Ray trace header (its Root and sampling
	// decision, see shared/trace), chosen at its Submission and written
	// with the record, so the actors that start from a schedule or a
	// stream work on the order in its trace.
	Trace string
	// EventSeq numbers the order's client-visible changes (see Status): 1
	// for accepted, and one more for each write that changes the Status.
	// Writes that leave the Status alone keep it, so the events derived
	// from the committed records have no gaps.
	EventSeq int
	// Cancelled records that a cancel request stopped the order.
	Cancelled bool
	// Resubmits counts operator resubmissions.
	Resubmits int
	// InFlight says the Supervisor watches the record (its index holds
	// it): every state in flight, and Error or CompensationFailed until
	// their alert is confirmed sent.
	InFlight  bool
	Input     json.RawMessage
	Steps     []StepRecord
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the record is deleted (the state table's TTL, in
	// whole seconds): set by the write that ends the order for good
	// (ProcessState.Ended), Retention after it; zero while the order is
	// open or waits for an operator.
	ExpiresAt time.Time
	// OpenUntil is how long the order may stay open before its orders
	// item needs a later TTL: that item expires Retention after it, and an
	// order that ends by then expires before it. A change past it that
	// keeps the order open moves both on (see retention.go). Set at
	// creation and at every reopening; removed when the order ends for
	// good or waits for an operator (whose orders item then never
	// expires); zero for a record written before retention existed.
	OpenUntil time.Time
}

// OwnerKey is what the record's owner is matched on (see OwnerKey).
func (s State) OwnerKey() string { return OwnerKey(s.Owner, s.OwnerID) }

// Expired reports whether the record is past its ExpiresAt at now: gone,
// whether or not DynamoDB's TTL has deleted it yet.
func (s State) Expired(now time.Time) bool { return pastTTL(s.ExpiresAt, now) }

// CurrentStep returns the definition of the record's current step.
func (s State) CurrentStep(d Definition) (Step, error) {
	if s.StepIndex < 0 || s.StepIndex >= len(d.Steps) {
		return Step{}, fmt.Errorf("order %s: step index %d outside workflow %q of %d steps", s.OrderID, s.StepIndex, d.ID(), len(d.Steps))
	}
	return d.Steps[s.StepIndex], nil
}

// NewState builds the initial record of an order: Pending at step 0, to be
// claimed by claimBy.
func NewState(orderID string, d Definition, input json.RawMessage, now, claimBy time.Time) State {
	steps := make([]StepRecord, len(d.Steps))
	for i, st := range d.Steps {
		steps[i] = StepRecord{Name: st.Name, State: StepPending}
	}
	return State{
		OrderID:      orderID,
		Workflow:     d.ID(),
		StepIndex:    0,
		Step:         d.Steps[0].Name,
		ProcessState: Pending,
		CompleteBy:   claimBy,
		EventSeq:     1,
		InFlight:     true,
		Input:        input,
		Steps:        steps,
		CreatedAt:    now,
		UpdatedAt:    now,
	}
}

// Status is what a client is told of an order: the event a change of the
// record means. It depends only on the committed record, so the event
// publisher derives it from each stored image.
type Status string

const (
	StatusAccepted           Status = "accepted"
	StatusProcessing         Status = "processing"
	StatusProcessed          Status = "processed"
	StatusError              Status = "error"
	StatusWaiting            Status = "waiting"
	StatusCompensating       Status = "compensating"
	StatusCompensated        Status = "compensated"
	StatusCompensationFailed Status = "compensation-failed"
	StatusCancelled          Status = "cancelled"
)

// StatusOf returns the client status of a record. A record goes from
// accepted to processing when it moves past its first step, and it is
// compensating step N while step N is undone, whether or not a Scheduler has
// claimed it.
func StatusOf(s State) Status {
	switch s.ProcessState {
	case Pending, Processing:
		if s.EventSeq <= 1 {
			return StatusAccepted
		}
		return StatusProcessing
	case Processed:
		return StatusProcessed
	case Error:
		return StatusError
	case Waiting:
		return StatusWaiting
	case CompensationPending, Compensating:
		return StatusCompensating
	case Compensated:
		return StatusCompensated
	case CompensationFailed:
		return StatusCompensationFailed
	case Cancelled:
		return StatusCancelled
	}
	return Status("unknown")
}
