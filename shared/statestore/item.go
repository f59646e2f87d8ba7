package statestore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// stateItem is a state record as stored. It is kept small, because every
// write of it costs one write unit per started KiB of the item: times are
// Unix milliseconds, and counters and flags at zero are left out (a missing
// one reads as zero; the store's counters add with if_not_exists). Attempt,
// StepIndex and CompleteBy are always there, for the fences compare them.
type stateItem struct {
	OrderID       string     `dynamodbav:"OrderID"`
	Workflow      string     `dynamodbav:"Workflow"`
	StepIndex     int        `dynamodbav:"StepIndex"`
	Step          string     `dynamodbav:"Step"`
	ProcessState  string     `dynamodbav:"ProcessState"`
	LockedBy      string     `dynamodbav:"LockedBy,omitempty"`
	CompleteBy    int64      `dynamodbav:"CompleteBy"`
	InFlightShard string     `dynamodbav:"InFlightShard,omitempty"`
	FailureCount  int        `dynamodbav:"FailureCount,omitempty"`
	WaitRound     int        `dynamodbav:"WaitRound,omitempty"`
	Attempt       int        `dynamodbav:"Attempt"`
	LastError     string     `dynamodbav:"LastError,omitempty"`
	AlertPending  bool       `dynamodbav:"AlertPending,omitempty"`
	Requeues      int        `dynamodbav:"Requeues,omitempty"`
	ClientID      string     `dynamodbav:"ClientID,omitempty"`
	Owner         string     `dynamodbav:"Owner,omitempty"`
	OwnerID       string     `dynamodbav:"OwnerID,omitempty"`
	Priority      string     `dynamodbav:"Priority,omitempty"`
	Trace         string     `dynamodbav:"Trace,omitempty"`
	EventSeq      int        `dynamodbav:"EventSeq"`
	Cancelled     bool       `dynamodbav:"Cancelled,omitempty"`
	Resubmits     int        `dynamodbav:"Resubmits,omitempty"`
	Input         string     `dynamodbav:"Input,omitempty"`
	Steps         []stepItem `dynamodbav:"Steps"`
	CreatedAt     int64      `dynamodbav:"CreatedAt"`
	UpdatedAt     int64      `dynamodbav:"UpdatedAt"`
	// ExpiresAt is the table's TTL attribute (ExpiresAtAttr), in Unix
	// seconds as TTL wants it; OpenUntil is in Unix milliseconds.
	ExpiresAt int64 `dynamodbav:"ExpiresAt,omitempty"`
	OpenUntil int64 `dynamodbav:"OpenUntil,omitempty"`
}

type stepItem struct {
	Name       string `dynamodbav:"Name"`
	State      string `dynamodbav:"State"`
	Attempts   int    `dynamodbav:"Attempts,omitempty"`
	Failures   int    `dynamodbav:"Failures,omitempty"`
	StartedAt  int64  `dynamodbav:"StartedAt,omitempty"`
	FinishedAt int64  `dynamodbav:"FinishedAt,omitempty"`
	Output     string `dynamodbav:"Output,omitempty"`
	Error      string `dynamodbav:"Error,omitempty"`

	Compensation         string `dynamodbav:"Compensation,omitempty"`
	CompensationAttempts int    `dynamodbav:"CompensationAttempts,omitempty"`
	CompensationFailures int    `dynamodbav:"CompensationFailures,omitempty"`
	CompensatedAt        int64  `dynamodbav:"CompensatedAt,omitempty"`
	CompensationOutput   string `dynamodbav:"CompensationOutput,omitempty"`
	CompensationError    string `dynamodbav:"CompensationError,omitempty"`

	// Only after a rejection, and after an operator's retry of one: absent
	// otherwise, so a step's history costs no byte more.
	Refused      bool `dynamodbav:"Refused,omitempty"`
	UndoRefused  bool `dynamodbav:"UndoRefused,omitempty"`
	KeyRound     int  `dynamodbav:"KeyRound,omitempty"`
	UndoKeyRound int  `dynamodbav:"UndoKeyRound,omitempty"`
}

// compactTrace is the order's trace header as its record keeps it: the Root,
// then ";" and the sampling decision when there is one
// ("1-5f84c7a1-0123456789abcdef01234567;1"), without the header's field
// names, which would take 14 of the 1,024 bytes a write unit covers. A
// value that does not parse is kept as it is.
func compactTrace(header string) string {
	h, err := trace.Parse(header)
	if err != nil || h.IsZero() {
		return header
	}
	if h.Sampled == "" {
		return h.Root
	}
	return h.Root + ";" + h.Sampled
}

// expandTrace is the header a compactTrace value stands for. A value that
// is already a header (it names its fields) is one.
func expandTrace(stored string) string {
	if stored == "" || strings.Contains(stored, "=") {
		return stored
	}
	root, sampled, _ := strings.Cut(stored, ";")
	return trace.Header{Root: root, Sampled: sampled}.String()
}

// unixMilli is a time as the store keeps it; the zero time is 0 (left out).
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func unixMilliPtr(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return unixMilli(*t)
}

// unixSeconds is a TTL as the store keeps it: Unix seconds (the Machine
// sets whole seconds); the zero time is 0 (left out).
func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// fromSeconds reads a stored TTL; 0 is the zero time.
func fromSeconds(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// fromMilli reads a stored time; 0 is the zero time.
func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func encodeState(s workflow.State) (map[string]types.AttributeValue, error) {
	it := stateItem{
		OrderID:      s.OrderID,
		Workflow:     s.Workflow,
		StepIndex:    s.StepIndex,
		Step:         s.Step,
		ProcessState: string(s.ProcessState),
		LockedBy:     s.LockedBy,
		CompleteBy:   s.CompleteBy.UnixMilli(),
		FailureCount: s.FailureCount,
		WaitRound:    s.WaitRound,
		Attempt:      s.Attempt,
		LastError:    s.LastError,
		AlertPending: s.AlertPending,
		Requeues:     s.Requeues,
		ClientID:     s.ClientID,
		Owner:        s.Owner,
		OwnerID:      s.OwnerID,
		Priority:     string(s.Priority.Stored()),
		Trace:        compactTrace(s.Trace),
		EventSeq:     s.EventSeq,
		Cancelled:    s.Cancelled,
		Resubmits:    s.Resubmits,
		Input:        string(s.Input),
		CreatedAt:    unixMilli(s.CreatedAt),
		UpdatedAt:    unixMilli(s.UpdatedAt),
		ExpiresAt:    unixSeconds(s.ExpiresAt),
		OpenUntil:    unixMilli(s.OpenUntil),
	}
	if s.InFlight {
		it.InFlightShard = ShardOf(s.OrderID)
	}
	for _, st := range s.Steps {
		si := stepItem{Name: st.Name, State: string(st.State), Attempts: st.Attempts, Failures: st.Failures, Output: string(st.Output), Error: st.Error,
			Compensation: string(st.Compensation), CompensationAttempts: st.CompensationAttempts, CompensationFailures: st.CompensationFailures,
			CompensationOutput: string(st.CompensationOutput), CompensationError: st.CompensationError,
			StartedAt: unixMilliPtr(st.StartedAt), FinishedAt: unixMilliPtr(st.FinishedAt), CompensatedAt: unixMilliPtr(st.CompensatedAt),
			Refused: st.Refused, UndoRefused: st.UndoRefused, KeyRound: st.KeyRound, UndoKeyRound: st.UndoKeyRound}
		it.Steps = append(it.Steps, si)
	}
	return it.marshal(), nil
}

// DecodeState reads a state record as stored: from GetItem, UpdateItem's
// ALL_NEW or a stream image converted to AttributeValues.
func DecodeState(av map[string]types.AttributeValue) (workflow.State, error) {
	var it stateItem
	if err := it.unmarshal(av); err != nil {
		return workflow.State{}, fmt.Errorf("decode state record: %w", err)
	}
	return it.state(), nil
}

// decodeHead is DecodeState without the record's steps (Steps is nil).
func decodeHead(av map[string]types.AttributeValue) (workflow.State, error) {
	var it stateItem
	if readState[types.AttributeValue, sdkValues](av, &it, false) {
		return it.state(), nil
	}
	head := make(map[string]types.AttributeValue, len(av))
	for name, v := range av {
		if name != "Steps" {
			head[name] = v
		}
	}
	return DecodeState(head)
}

// state is the record the item holds.
func (it *stateItem) state() workflow.State {
	s := workflow.State{
		OrderID:      it.OrderID,
		Workflow:     it.Workflow,
		StepIndex:    it.StepIndex,
		Step:         it.Step,
		ProcessState: workflow.ProcessState(it.ProcessState),
		LockedBy:     it.LockedBy,
		CompleteBy:   time.UnixMilli(it.CompleteBy).UTC(),
		FailureCount: it.FailureCount,
		WaitRound:    it.WaitRound,
		Attempt:      it.Attempt,
		LastError:    it.LastError,
		AlertPending: it.AlertPending,
		Requeues:     it.Requeues,
		ClientID:     it.ClientID,
		Owner:        it.Owner,
		OwnerID:      it.OwnerID,
		Priority:     workflow.Priority(it.Priority),
		Trace:        expandTrace(it.Trace),
		EventSeq:     it.EventSeq,
		Cancelled:    it.Cancelled,
		Resubmits:    it.Resubmits,
		InFlight:     it.InFlightShard != "",
	}
	if it.Input != "" {
		s.Input = json.RawMessage(it.Input)
	}
	s.CreatedAt, s.UpdatedAt = fromMilli(it.CreatedAt), fromMilli(it.UpdatedAt)
	s.ExpiresAt, s.OpenUntil = fromSeconds(it.ExpiresAt), fromMilli(it.OpenUntil)
	if len(it.Steps) == 0 {
		return s
	}
	// One allocation for the steps' times, not one a time: a record is
	// decoded for every write, read and stream record.
	times := make([]time.Time, 0, 3*len(it.Steps))
	at := func(ms int64) *time.Time {
		if ms == 0 {
			return nil
		}
		times = append(times, time.UnixMilli(ms).UTC())
		return &times[len(times)-1]
	}
	s.Steps = make([]workflow.StepRecord, len(it.Steps))
	for i, si := range it.Steps {
		st := &s.Steps[i]
		*st = workflow.StepRecord{Name: si.Name, State: workflow.StepState(si.State), Attempts: si.Attempts, Failures: si.Failures, Error: si.Error,
			Compensation: workflow.StepState(si.Compensation), CompensationAttempts: si.CompensationAttempts,
			CompensationFailures: si.CompensationFailures, CompensationError: si.CompensationError,
			StartedAt: at(si.StartedAt), FinishedAt: at(si.FinishedAt), CompensatedAt: at(si.CompensatedAt),
			Refused: si.Refused, UndoRefused: si.UndoRefused, KeyRound: si.KeyRound, UndoKeyRound: si.UndoKeyRound}
		if si.Output != "" {
			st.Output = json.RawMessage(si.Output)
		}
		if si.CompensationOutput != "" {
			st.CompensationOutput = json.RawMessage(si.CompensationOutput)
		}
	}
	return s
}
