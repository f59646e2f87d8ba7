package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A Change is one transition of a state record, decided in full by the
// Machine: the Fence the record must pass (what the decision saw), the Patch
// to write, and what the actor does once the write is committed. Adapters
// only carry it out: a store turns Fence and Patch into one conditional write
// (a failed fence is ErrStale, never an overwrite), and the actors log the
// Transition, dispatch, hand back and alert as it says.
type Change struct {
	OrderID string
	Fence   Fence
	Patch   Patch
	// Transition is the change's name in the logs and metrics; empty for a
	// write nobody counts (an alert confirmed sent).
	Transition Transition
	// Dispatch: the written record claims a step or an undo, which the
	// Scheduler sends to its agent at once.
	Dispatch bool
	// Handback, when set, is the schedule message the written record waits
	// for (a retry after its backoff, a requeue, the start of a compensation,
	// a resubmission).
	Handback *Handback
	// Alert is the alert the written record owes an operator: the write sets
	// AlertPending (the outbox), and the alert is confirmed with AlertSent.
	Alert AlertKind
	// Notice is an alert told at once, outside the outbox, about a record
	// that goes on by itself (a step given up because its queue refused it,
	// whose compensation now runs; a step that waits).
	Notice AlertKind
	// MaxFailures is the threshold of the step an Alert or Notice is
	// about (its retry policy's, see Machine.MaxFailuresOf); zero when the
	// deciding Machine had no definition (Stranded), which leaves the
	// global one.
	MaxFailures int
}

// Handback is the schedule message a change asks for.
type Handback struct {
	StepIndex int
	Undo      bool
	Delay     time.Duration
	// Reason says who sent it and why, for the Scheduler's logs.
	Reason string
}

// CommitsReply reports whether the change commits an agent's reply: fenced
// on the step, its Attempt and a CompleteBy still ahead.
func (c Change) CommitsReply() bool { return !c.Fence.LiveAt.IsZero() }

// MovesOrder reports whether the change also writes the order's item in
// the orders table (its TTL): a store carries such a change out as one
// transaction of both items.
func (c Change) MovesOrder() bool { return c.Patch.KeepOrder || !c.Patch.OrderExpiresAt.IsZero() }

// AlertKind names what an operator is alerted about.
type AlertKind string

const (
	// AlertPermanentFailure: an agent reported a fault retrying cannot fix,
	// and nothing could be undone.
	AlertPermanentFailure AlertKind = "permanent-failure"
	// AlertRetriesExhausted: a step timed out MaxFailures times, and nothing
	// could be undone.
	AlertRetriesExhausted AlertKind = "retries-exhausted"
	// AlertCompensationFailed: an undo failed for good or too often; the
	// order is only partly undone.
	AlertCompensationFailed AlertKind = "compensation-failed"
	// AlertDispatchFailed: a step's request could not be sent to its
	// agent's queue MaxFailures times.
	AlertDispatchFailed AlertKind = "dispatch-failed"
	// AlertWorkflowMissing: an order is pinned to a workflow version the
	// deployment no longer runs (see Stranded).
	AlertWorkflowMissing AlertKind = "workflow-missing"
	// AlertNotUndoable: an order stopped with a step that may have been
	// applied and has no undo: it waits in Error with nothing undone, or
	// an operator's cancel undid the rest (see Definition.StopAt).
	AlertNotUndoable AlertKind = "not-undoable"
	// AlertWaiting: a step failed as often as its retry policy allows, and
	// the order waits before it is tried again (Waiting). A notice, not an
	// alert: the order goes on by itself (Severity).
	AlertWaiting AlertKind = "waiting"
)

// Severity is how urgent an alert is, for subscribers' filter policies on
// the alert topic's severity message attribute.
type Severity string

const (
	// SeverityError: an order stopped, or may stay stopped, until a person
	// acts.
	SeverityError Severity = "error"
	// SeverityWarning: something an operator should know of, that goes on
	// by itself (a waiting order).
	SeverityWarning Severity = "warning"
)

// Severity is the severity of an alert of kind k.
func (k AlertKind) Severity() Severity {
	if k == AlertWaiting {
		return SeverityWarning
	}
	return SeverityError
}

// Fence is what a record must hold for a change to apply: what the decision
// saw of it. Zero fields check nothing.
type Fence struct {
	// Workflow, when set: the record is pinned to this version (its ID). The
	// Machine fences every change on the version it decided with, so a
	// message naming another version than its order's is refused, never
	// carried out by the wrong definition.
	Workflow string
	// In: the record's state is one of these.
	In []ProcessState
	// Attempt and StepIndex, when set, must match.
	Attempt   *int
	StepIndex *int
	// Unlocked: no Scheduler holds the record.
	Unlocked bool
	// LiveAt, when set: the record's CompleteBy is after it (a reply still
	// in time).
	LiveAt time.Time
	// CompleteBy, when set: the record's CompleteBy is exactly it (the
	// deadline the Supervisor found expired).
	CompleteBy time.Time
	// AlertPending: the record still owes its alert.
	AlertPending bool
}

// Admits reports whether s passes the fence.
func (f Fence) Admits(s State) bool {
	switch {
	case f.Workflow != "" && s.Workflow != f.Workflow,
		len(f.In) > 0 && !slices.Contains(f.In, s.ProcessState),
		f.Attempt != nil && s.Attempt != *f.Attempt,
		f.StepIndex != nil && s.StepIndex != *f.StepIndex,
		f.Unlocked && s.LockedBy != "",
		!f.LiveAt.IsZero() && !s.CompleteBy.After(f.LiveAt),
		!f.CompleteBy.IsZero() && !s.CompleteBy.Equal(f.CompleteBy),
		f.AlertPending && !s.AlertPending:
		return false
	}
	return true
}

// Patch is what a change writes; zero fields leave the record as it is.
type Patch struct {
	// Now stamps the write (UpdatedAt).
	Now   time.Time
	State ProcessState
	// MoveTo makes another step the record's current one.
	MoveTo *StepRef
	// Lock sets LockedBy; Unlock clears it.
	Lock   string
	Unlock bool
	// CompleteBy is the record's new deadline.
	CompleteBy time.Time
	// NextAttempt adds one to Attempt: a claim's fencing token.
	NextAttempt  bool
	FailureCount *int
	// WaitRound, when set, is the record's new WaitRound.
	WaitRound    *int
	LastError    *string
	AlertPending *bool
	// Notify adds one to EventSeq: the write changes what the client is
	// told (StatusOf, or the step).
	Notify bool
	// InFlight, when set, puts the record in the Supervisor's index or
	// takes it out.
	InFlight *bool
	// ExpiresAt, when set, is the record's TTL: the change ends the order
	// (Policy.retain). Unexpire removes it: the change reopens the order.
	ExpiresAt time.Time
	Unexpire  bool
	// Seal removes OpenUntil: the change ends the order for good, or its
	// orders item is kept for an operator (KeepOrder), so the bound is
	// moot, and its bytes would count toward the write unit of every later
	// write. OpenUntil, when set, is the record's new bound instead (a
	// reopening, or a change past the old bound; see retention.go).
	Seal      bool
	OpenUntil time.Time
	// OrderExpiresAt, when set, is the new TTL of the order's item in the
	// orders table, and KeepOrder removes that TTL: the store writes it in
	// the same transaction as the record, so the orders item outlives its
	// record (see retention.go). Rare: a reopening, a change past
	// OpenUntil, an alert confirmed. Apply leaves the record alone for
	// them; the orders item is not part of State.
	OrderExpiresAt time.Time
	KeepOrder      bool
	// Cancel records that a cancel stopped the order; Requeue and
	// Resubmit count a requeue and an operator's resubmission.
	Cancel, Requeue, Resubmit bool
	Steps                     []StepPatch
}

// StepRef names a step of the workflow.
type StepRef struct {
	Index int
	Name  string
}

// StepPatch is what a change writes of one step's history.
type StepPatch struct {
	Index int
	State StepState
	// Claimed counts an attempt and stamps StartedAt; Failed counts a
	// failure; Finished stamps FinishedAt.
	Claimed, Failed, Finished bool
	Output                    json.RawMessage
	Error                     *string
	Compensation              StepState
	// UndoClaimed and UndoFailed count an undo's attempt and failure;
	// Undone stamps CompensatedAt.
	UndoClaimed, UndoFailed, Undone bool
	UndoOutput                      json.RawMessage
	UndoError                       *string
	// Refused and UndoRefused, when set, say whether the step's (its
	// undo's) last outcome was a certain rejection; Rekey and UndoRekey
	// start the next round of its key (StepRecord.KeyRound).
	Refused, UndoRefused *bool
	Rekey, UndoRekey     bool
}

// Apply returns s as the patch leaves it. It is the meaning of a Patch: the
// store's conditional write must leave exactly this (its conformance suite
// checks it on DynamoDB Local).
func (p Patch) Apply(s State) State {
	s.Steps = slices.Clone(s.Steps)
	setNonZero(&s.ProcessState, p.State)
	if p.MoveTo != nil {
		s.StepIndex, s.Step = p.MoveTo.Index, p.MoveTo.Name
	}
	if p.Unlock {
		s.LockedBy = ""
	}
	setNonZero(&s.LockedBy, p.Lock)
	if !p.CompleteBy.IsZero() {
		s.CompleteBy = p.CompleteBy
	}
	count(&s.Attempt, p.NextAttempt)
	setIf(&s.FailureCount, p.FailureCount)
	setIf(&s.WaitRound, p.WaitRound)
	setIf(&s.LastError, p.LastError)
	setIf(&s.AlertPending, p.AlertPending)
	setIf(&s.InFlight, p.InFlight)
	count(&s.EventSeq, p.Notify)
	s.Cancelled = s.Cancelled || p.Cancel
	count(&s.Requeues, p.Requeue)
	count(&s.Resubmits, p.Resubmit)
	if p.Unexpire {
		s.ExpiresAt = time.Time{}
	}
	if p.Seal {
		s.OpenUntil = time.Time{}
	}
	if !p.OpenUntil.IsZero() {
		s.OpenUntil = p.OpenUntil
	}
	if !p.ExpiresAt.IsZero() {
		s.ExpiresAt = p.ExpiresAt
	}
	s.UpdatedAt = p.Now
	for _, sp := range p.Steps {
		if sp.Index >= 0 && sp.Index < len(s.Steps) {
			s.Steps[sp.Index] = sp.apply(s.Steps[sp.Index], p.Now)
		}
	}
	return s
}

// ErrBadPatch: a patch names a step the record does not have, or one step
// twice, or sets a state under a fence that does not say whether the record
// is already in it. It is a bug of the patch's maker, never an answer to
// retry.
var ErrBadPatch = errors.New("bad patch")

// CheckSteps reports a patch whose step indexes are not distinct and within
// 0..n-1, for a record of n steps. Apply would skip such a step and a store
// would refuse the write (DynamoDB: two paths overlap, or a path that does
// not exist), so each store checks what it can before writing.
func (p Patch) CheckSteps(n int) error {
	seen := make(map[int]bool, len(p.Steps))
	for _, sp := range p.Steps {
		switch {
		case sp.Index < 0 || sp.Index >= n:
			return fmt.Errorf("%w: step %d of a record of %d steps", ErrBadPatch, sp.Index, n)
		case seen[sp.Index]:
			return fmt.Errorf("%w: step %d patched twice", ErrBadPatch, sp.Index)
		}
		seen[sp.Index] = true
	}
	return nil
}

// Moves reports whether the change moves the record into another state:
// its patch sets a state the fence says the record is not in. A store keeps
// what follows a state's change (the operators' listing, when the record
// entered its state) in the same write without reading the record first,
// so a patch that sets a state under a fence that admits the record both
// in that state and out of it is ErrBadPatch. Every change the Machine
// makes fences on the one state it saw.
func (c Change) Moves() (bool, error) {
	to, in := c.Patch.State, c.Fence.In
	switch {
	case to == "":
		return false, nil
	case len(in) > 0 && !slices.Contains(in, to):
		return true, nil
	case len(in) == 1:
		return false, nil
	}
	return false, fmt.Errorf("%w: it sets state %s under a fence of states %v, which does not say whether the record is in it already", ErrBadPatch, to, in)
}

// apply is one step's part of Apply; the store's update expression
// (statestore, patchOf) writes the same fields in the same order.
func (sp StepPatch) apply(r StepRecord, now time.Time) StepRecord {
	setNonZero(&r.State, sp.State)
	count(&r.Attempts, sp.Claimed)
	stampIf(&r.StartedAt, sp.Claimed, now)
	count(&r.Failures, sp.Failed)
	stampIf(&r.FinishedAt, sp.Finished, now)
	setNonEmpty(&r.Output, sp.Output)
	setIf(&r.Error, sp.Error)
	setNonZero(&r.Compensation, sp.Compensation)
	count(&r.CompensationAttempts, sp.UndoClaimed)
	count(&r.CompensationFailures, sp.UndoFailed)
	stampIf(&r.CompensatedAt, sp.Undone, now)
	setNonEmpty(&r.CompensationOutput, sp.UndoOutput)
	setIf(&r.CompensationError, sp.UndoError)
	setIf(&r.Refused, sp.Refused)
	setIf(&r.UndoRefused, sp.UndoRefused)
	count(&r.KeyRound, sp.Rekey)
	count(&r.UndoKeyRound, sp.UndoRekey)
	return r
}

// The field setters of Apply: each leaves the field as it is unless the
// patch says otherwise.

func count(n *int, add bool) {
	if add {
		*n++
	}
}

func stampIf(at **time.Time, stamp bool, now time.Time) {
	if stamp {
		*at = &now
	}
}

func setNonZero[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

func setNonEmpty(dst *json.RawMessage, v json.RawMessage) {
	if len(v) > 0 {
		*dst = v
	}
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// ptr returns a pointer to v, for the optional fields of fences and
// patches.
func ptr[T any](v T) *T { return &v }

// step returns the patch of step i, adding it if the patch has none yet.
func (p *Patch) step(i int) *StepPatch {
	for j := range p.Steps {
		if p.Steps[j].Index == i {
			return &p.Steps[j]
		}
	}
	p.Steps = append(p.Steps, StepPatch{Index: i})
	return &p.Steps[len(p.Steps)-1]
}

// lock holds the record for owner; unlock releases it. Of the two, the later
// call wins, as in one write of the store.
func (p *Patch) lock(owner string) { p.Lock, p.Unlock = owner, false }
func (p *Patch) unlock()           { p.Lock, p.Unlock = "", true }
