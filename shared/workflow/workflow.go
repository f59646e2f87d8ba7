// Package workflow holds the domain of the system: orders, the workflow that
// runs them as ordered steps, the state record the Scheduler keeps for each
// order, and the pure decisions (what comes after a step, how the Supervisor
// recovers an expired record) that the handlers act on.
package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

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
	return []ProcessState{Pending, Processing, Processed, Error, CompensationPending, Compensating, Compensated, CompensationFailed, Cancelled}
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
	return s == Pending || s == Processing || s == CompensationPending || s == Compensating
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
// CompensationFailed) or reviews (Compensated, Cancelled). The states in
// flight are the Supervisor's to watch, and Processed, the bulk of all
// orders, is looked up by ID or through its owner's listing; keeping them
// out keeps the listing's index small and its writes rare.
func (s ProcessState) Listed() bool {
	return s == Error || s == CompensationFailed || s == Compensated || s == Cancelled
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

// Step is one stage of a workflow, performed by one Agent.
type Step struct {
	// Name identifies the step and names the Agent that performs it.
	Name string
	// Budget is the time an Agent has for the remote service in one
	// attempt. A compensation attempt has the same budget.
	Budget time.Duration
	// Wait is how long a dispatched request may wait in its Agent's queue
	// without costing the Agent any of its Budget: CompleteBy is the claim
	// time plus Wait plus Budget, so an Agent that starts within Wait still
	// has the whole Budget. The API sheds new orders long before queues
	// hold Wait's worth of work (see topology.Capacity), so Wait is a guard
	// band, not a queue to fill. Zero makes the Budget cover the wait too.
	Wait time.Duration
	// Compensable says the step's Agent can undo its effect (the Compensating
	// Transaction pattern). Steps without it are left as they are when the
	// order stops.
	Compensable bool
	// MaxOutputBytes bounds the step's output and its undo's output (see
	// OutputLimit); zero means DefaultMaxOutputBytes.
	MaxOutputBytes int
}

// Definition is one version of a workflow: an ordered list of steps.
// Versions are declared in shared/catalog/workflows.json.
type Definition struct {
	// Name names the workflow; Version numbers this definition of it. A
	// state record pins both (ID).
	Name    string
	Version int
	Steps   []Step
}

var stepName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Validate checks that the definition can run, reporting every problem at
// once: names, budgets, and payload bounds (see limits.go).
func (d Definition) Validate() error {
	if d.Name == "" {
		return errors.New("workflow: definition has no name")
	}
	var errs []error
	if !workflowName.MatchString(d.Name) || versionTail.MatchString(d.Name) {
		errs = append(errs, fmt.Errorf("workflow %q: the name must match %s and not end in -v<number>", d.Name, workflowName))
	}
	if d.Version < 1 || d.Version > MaxVersion {
		errs = append(errs, fmt.Errorf("workflow %q: version %d must be within 1..%d", d.ID(), d.Version, MaxVersion))
	}
	if len(d.Steps) == 0 {
		return errors.Join(append(errs, fmt.Errorf("workflow %q: no steps", d.ID()))...)
	}
	seen := make(map[string]bool, len(d.Steps))
	for i, s := range d.Steps {
		if !stepName.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("workflow %q: step %d: name %q must match %s", d.ID(), i, s.Name, stepName))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("workflow %q: step %q appears twice", d.ID(), s.Name))
		}
		seen[s.Name] = true
		if s.Budget < time.Second || s.Budget > 15*time.Minute {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: budget %v must be within 1s..15m (a Lambda's limit)", d.ID(), s.Name, s.Budget))
		}
		if s.Wait < 0 || s.Wait > MaxWait {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: wait %v must be within 0..%v", d.ID(), s.Name, s.Wait, MaxWait))
		}
		if s.Lease() > MaxLease {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: wait %v plus budget %v exceeds the %v an Agent Lambda can use", d.ID(), s.Name, s.Wait, s.Budget, MaxLease))
		}
	}
	errs = append(errs, d.validateSizes()...)
	if run := d.LongestRun(); run > MinRetention {
		// The orders item's TTL counts on an order ending, without a
		// Supervisor's change, within the retention (see retention.go).
		errs = append(errs, fmt.Errorf("workflow %q: a run can take %v, every step and every undo at its whole lease, over the %v of the shortest retention: fewer steps or shorter leases",
			d.ID(), run, MinRetention))
	}
	return errors.Join(errs...)
}

// LongestRun is the longest an order of d can go on by the Scheduler's
// commits alone: every step and every undo taking its whole lease. Anything
// longer is the Supervisor's doing (a retry, a requeue) or an operator's.
func (d Definition) LongestRun() time.Duration {
	var run time.Duration
	for _, s := range d.Steps {
		run += s.Lease()
		if s.Compensable {
			run += s.Lease()
		}
	}
	return run
}

// MaxWait bounds a step's Wait: a request that may sit in its queue longer
// than this is a backlog the API should have shed.
const MaxWait = 5 * time.Minute

// Lease is how long a claim of the step holds: its CompleteBy is the claim
// time plus Lease.
func (s Step) Lease() time.Duration { return s.Wait + s.Budget }

// StepNames lists the step names in order.
func (d Definition) StepNames() []string {
	names := make([]string, len(d.Steps))
	for i, s := range d.Steps {
		names[i] = s.Name
	}
	return names
}

// DefaultWait is the default steps' queue allowance: five times the wait
// at which the deployed API starts shedding (topology.DefaultCapacity's
// AdmitWait), so a burst the admission check sees late still leaves every
// Agent its whole Budget.
const DefaultWait = 5 * time.Second

// Reference is order-v1, the order workflow this project shipped first
// (reserve the goods, then take the payment): the fixed definition the
// tests and the cost, load and recovery benchmarks measure, so that a
// change of the deployed catalog (shared/catalog/workflows.json) does not
// change them. The catalog's order-v1, while it is declared, must be
// exactly this (its test checks), since orders are pinned to it.
func Reference() Definition {
	return Definition{
		Name: "order", Version: 1,
		Steps: []Step{
			{Name: "reserve-inventory", Budget: 30 * time.Second, Wait: DefaultWait, Compensable: true},
			{Name: "charge-payment", Budget: 30 * time.Second, Wait: DefaultWait, Compensable: true},
		},
	}
}

// Item is one order line.
type Item struct {
	SKU            string `json:"sku" dynamodbav:"sku"`
	Quantity       int    `json:"quantity" dynamodbav:"quantity"`
	UnitPriceCents int64  `json:"unitPriceCents" dynamodbav:"unitPriceCents"`
}

// Order is the business record kept in the orders table.
type Order struct {
	OrderID    string `json:"orderId" dynamodbav:"OrderID"`
	CustomerID string `json:"customerId" dynamodbav:"CustomerID"`
	// ClientID, when set, names the client application to notify of the
	// order's progress on the order-events topic.
	ClientID string `json:"clientId,omitempty" dynamodbav:"ClientID,omitempty"`
	// Owner is the caller who submitted the order: the IAM principal API
	// Gateway authenticated. Only its owner reads or lists an order.
	Owner      string `json:"-" dynamodbav:"Owner,omitempty"`
	Currency   string `json:"currency" dynamodbav:"Currency"`
	Items      []Item `json:"items" dynamodbav:"Items"`
	TotalCents int64  `json:"totalCents" dynamodbav:"TotalCents"`
	// IdempotencyKey is the client's Idempotency-Key header, if it sent one.
	IdempotencyKey string `json:"-" dynamodbav:"IdempotencyKey,omitempty"`
	// RequestHash fingerprints the request body so a replay with the same key
	// but another body is told apart from a true retry.
	RequestHash string    `json:"-" dynamodbav:"RequestHash"`
	CreatedAt   time.Time `json:"createdAt" dynamodbav:"CreatedAt"`
	// ExpiresAt is when the order is deleted (Machine.OrderExpiresAt): the
	// orders table's TTL, in whole seconds; zero for an order written
	// before retention existed, which never expires. The store writes it,
	// and moves it with the rare changes that keep the order open longer
	// (Patch.OrderExpiresAt, Patch.KeepOrder), so it outlives its record.
	ExpiresAt time.Time `json:"-" dynamodbav:"-"`
	// KeyExpiresAt is when the store forgets IdempotencyKey
	// (Machine.KeyExpiresAt): until then a request with the key is
	// answered with this order; from then on it makes a new one.
	KeyExpiresAt time.Time `json:"-" dynamodbav:"-"`
}

// KeyUse is what the store remembers of an Idempotency-Key: the order it
// made, and the fingerprint of the request that made it.
type KeyUse struct {
	OrderID, Owner, RequestHash string
}

// Expired reports whether the order is past its ExpiresAt at now: gone,
// whether or not DynamoDB's TTL has deleted it yet.
func (o Order) Expired(now time.Time) bool { return pastTTL(o.ExpiresAt, now) }

// pastTTL reports whether at, a TTL (zero: none), has come at now.
func pastTTL(at, now time.Time) bool { return !at.IsZero() && !now.Before(at) }

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
	// claimed it; for Error with AlertPending, the time by which the alert
	// should have gone out.
	CompleteBy time.Time
	// FailureCount counts expired attempts of the current step; it restarts
	// at zero when the workflow moves to the next step.
	FailureCount int
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
	// Owner is the caller who submitted the order (see Order.Owner).
	Owner string
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

// IdempotencyKey is the key an Agent passes to the remote service for a step:
// the same for every retry of that step of that order, so the remote service
// applies the effect at most once.
func IdempotencyKey(orderID, step string) string { return orderID + "/" + step }

// CompensationKey is the key of the compensation of a step: its own, stable
// for every retry of the compensation, so the remote undoes at most once.
func CompensationKey(orderID, step string) string { return orderID + "/" + step + "/undo" }
