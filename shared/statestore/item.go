package statestore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// stateItem is a state record as stored. Times the GSI sorts on are Unix
// milliseconds; the others are RFC 3339 for people reading the table.
type stateItem struct {
	OrderID       string     `dynamodbav:"OrderID"`
	Workflow      string     `dynamodbav:"Workflow"`
	StepIndex     int        `dynamodbav:"StepIndex"`
	Step          string     `dynamodbav:"Step"`
	ProcessState  string     `dynamodbav:"ProcessState"`
	LockedBy      string     `dynamodbav:"LockedBy,omitempty"`
	CompleteBy    int64      `dynamodbav:"CompleteBy"`
	InFlightShard string     `dynamodbav:"InFlightShard,omitempty"`
	FailureCount  int        `dynamodbav:"FailureCount"`
	Attempt       int        `dynamodbav:"Attempt"`
	LastError     string     `dynamodbav:"LastError,omitempty"`
	AlertPending  bool       `dynamodbav:"AlertPending"`
	Requeues      int        `dynamodbav:"Requeues"`
	ClientID      string     `dynamodbav:"ClientID,omitempty"`
	Owner         string     `dynamodbav:"Owner,omitempty"`
	EventSeq      int        `dynamodbav:"EventSeq"`
	Cancelled     bool       `dynamodbav:"Cancelled"`
	Resubmits     int        `dynamodbav:"Resubmits"`
	Input         string     `dynamodbav:"Input,omitempty"`
	Steps         []stepItem `dynamodbav:"Steps"`
	CreatedAt     string     `dynamodbav:"CreatedAt"`
	UpdatedAt     string     `dynamodbav:"UpdatedAt"`
}

type stepItem struct {
	Name       string `dynamodbav:"Name"`
	State      string `dynamodbav:"State"`
	Attempts   int    `dynamodbav:"Attempts"`
	Failures   int    `dynamodbav:"Failures"`
	StartedAt  string `dynamodbav:"StartedAt,omitempty"`
	FinishedAt string `dynamodbav:"FinishedAt,omitempty"`
	Output     string `dynamodbav:"Output,omitempty"`
	Error      string `dynamodbav:"Error,omitempty"`

	Compensation         string `dynamodbav:"Compensation,omitempty"`
	CompensationAttempts int    `dynamodbav:"CompensationAttempts"`
	CompensationFailures int    `dynamodbav:"CompensationFailures"`
	CompensatedAt        string `dynamodbav:"CompensatedAt,omitempty"`
	CompensationOutput   string `dynamodbav:"CompensationOutput,omitempty"`
	CompensationError    string `dynamodbav:"CompensationError,omitempty"`
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

func parseTimePtr(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return &t, err
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
		Attempt:      s.Attempt,
		LastError:    s.LastError,
		AlertPending: s.AlertPending,
		Requeues:     s.Requeues,
		ClientID:     s.ClientID,
		Owner:        s.Owner,
		EventSeq:     s.EventSeq,
		Cancelled:    s.Cancelled,
		Resubmits:    s.Resubmits,
		Input:        string(s.Input),
		CreatedAt:    fmtTime(s.CreatedAt),
		UpdatedAt:    fmtTime(s.UpdatedAt),
	}
	if s.InFlight {
		it.InFlightShard = ShardOf(s.OrderID)
	}
	for _, st := range s.Steps {
		si := stepItem{Name: st.Name, State: string(st.State), Attempts: st.Attempts, Failures: st.Failures, Output: string(st.Output), Error: st.Error,
			Compensation: string(st.Compensation), CompensationAttempts: st.CompensationAttempts, CompensationFailures: st.CompensationFailures,
			CompensationOutput: string(st.CompensationOutput), CompensationError: st.CompensationError}
		if st.CompensatedAt != nil {
			si.CompensatedAt = fmtTime(*st.CompensatedAt)
		}
		if st.StartedAt != nil {
			si.StartedAt = fmtTime(*st.StartedAt)
		}
		if st.FinishedAt != nil {
			si.FinishedAt = fmtTime(*st.FinishedAt)
		}
		it.Steps = append(it.Steps, si)
	}
	return attributevalue.MarshalMap(it)
}

// DecodeState reads a state record as stored: from GetItem, UpdateItem's
// ALL_NEW or a stream image converted to AttributeValues.
func DecodeState(av map[string]types.AttributeValue) (workflow.State, error) {
	var it stateItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return workflow.State{}, fmt.Errorf("decode state record: %w", err)
	}
	s := workflow.State{
		OrderID:      it.OrderID,
		Workflow:     it.Workflow,
		StepIndex:    it.StepIndex,
		Step:         it.Step,
		ProcessState: workflow.ProcessState(it.ProcessState),
		LockedBy:     it.LockedBy,
		CompleteBy:   time.UnixMilli(it.CompleteBy).UTC(),
		FailureCount: it.FailureCount,
		Attempt:      it.Attempt,
		LastError:    it.LastError,
		AlertPending: it.AlertPending,
		Requeues:     it.Requeues,
		ClientID:     it.ClientID,
		Owner:        it.Owner,
		EventSeq:     it.EventSeq,
		Cancelled:    it.Cancelled,
		Resubmits:    it.Resubmits,
		InFlight:     it.InFlightShard != "",
	}
	if it.Input != "" {
		s.Input = json.RawMessage(it.Input)
	}
	var err error
	if s.CreatedAt, err = parseTime(it.CreatedAt); err != nil {
		return workflow.State{}, fmt.Errorf("decode state record %s: CreatedAt: %w", it.OrderID, err)
	}
	if s.UpdatedAt, err = parseTime(it.UpdatedAt); err != nil {
		return workflow.State{}, fmt.Errorf("decode state record %s: UpdatedAt: %w", it.OrderID, err)
	}
	for _, si := range it.Steps {
		st := workflow.StepRecord{Name: si.Name, State: workflow.StepState(si.State), Attempts: si.Attempts, Failures: si.Failures, Error: si.Error,
			Compensation: workflow.StepState(si.Compensation), CompensationAttempts: si.CompensationAttempts,
			CompensationFailures: si.CompensationFailures, CompensationError: si.CompensationError}
		if si.Output != "" {
			st.Output = json.RawMessage(si.Output)
		}
		if si.CompensationOutput != "" {
			st.CompensationOutput = json.RawMessage(si.CompensationOutput)
		}
		if st.CompensatedAt, err = parseTimePtr(si.CompensatedAt); err != nil {
			return workflow.State{}, fmt.Errorf("decode state record %s: step %s: %w", it.OrderID, si.Name, err)
		}
		if st.StartedAt, err = parseTimePtr(si.StartedAt); err != nil {
			return workflow.State{}, fmt.Errorf("decode state record %s: step %s: %w", it.OrderID, si.Name, err)
		}
		if st.FinishedAt, err = parseTimePtr(si.FinishedAt); err != nil {
			return workflow.State{}, fmt.Errorf("decode state record %s: step %s: %w", it.OrderID, si.Name, err)
		}
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}
