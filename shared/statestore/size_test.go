package statestore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/workflow"
)

// worstState is the largest state record an order of d can have, as the
// payload bounds see it: the input, every output and undo output at their
// limits, every error text clipped at its bound, every name at its longest,
// every counter and time set.
func worstState(d workflow.Definition) workflow.State {
	text := func(n int) string { return strings.Repeat("é", n/2) }
	output := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }
	now := time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
	big := 1<<31 - 1
	s := workflow.State{
		OrderID: strings.Repeat("o", 64), Workflow: d.ID(), StepIndex: len(d.Steps) - 1, Step: d.Steps[len(d.Steps)-1].Name,
		ProcessState: workflow.CompensationPending, LockedBy: strings.Repeat("l", 128), CompleteBy: now,
		FailureCount: big, WaitRound: big, Attempt: big, LastError: text(workflow.MaxErrorBytes), AlertPending: true, Requeues: big,
		ClientID: strings.Repeat("c", 64), Priority: workflow.PriorityHigh,
		// An IAM principal ARN of up to 1,024 bytes (the Submission's bound),
		// or a shorter Cognito identity, and IAM's longest unique ID.
		Owner: strings.Repeat("p", 1024), OwnerID: "AIDA" + strings.Repeat("i", 124),
		Trace: "Root=1-6b02b8b1-4d2e6f8a0b1c3d5e7f9a1b2c;Sampled=1", EventSeq: big, Cancelled: true, Resubmits: big,
		InFlight: true, Input: output(workflow.MaxInputBytes), CreatedAt: now, UpdatedAt: now, ExpiresAt: now, OpenUntil: now,
	}
	for _, st := range d.Steps {
		r := workflow.StepRecord{Name: st.Name, State: workflow.StepCancelled, Attempts: big, Failures: big,
			StartedAt: &now, FinishedAt: &now, Output: output(st.OutputLimit()), Error: text(workflow.MaxErrorBytes),
			Compensation: workflow.StepProcessing, CompensationAttempts: big, CompensationFailures: big, CompensatedAt: &now,
			CompensationError: text(workflow.MaxErrorBytes)}
		if st.Compensable {
			r.CompensationOutput = output(st.OutputLimit())
		}
		s.Steps = append(s.Steps, r)
	}
	return s
}

// itemSize is an item's size as DynamoDB counts it toward its 400 KB, from
// above: names and strings by their UTF-8 bytes, a number by its digits
// (DynamoDB counts one byte per two and one more), a boolean one byte, a
// map or list 3 bytes and one more per element
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
func itemSize(t *testing.T, item map[string]types.AttributeValue) int {
	t.Helper()
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(t, v)
	}
	return n
}

func valueSize(t *testing.T, v types.AttributeValue) int {
	t.Helper()
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value) + 1
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + itemSize(t, v.Value)
	case *types.AttributeValueMemberL:
		n := 3 + len(v.Value)
		for _, e := range v.Value {
			n += valueSize(t, e)
		}
		return n
	}
	t.Fatalf("no size for attribute value %T", v)
	return 0
}

// largeDefinitions are definitions Validate accepts, some at the item
// limit: one step with the largest output limit the item leaves it, the
// same with an undo, and many steps sharing the room.
func largeDefinitions(t *testing.T) []workflow.Definition {
	t.Helper()
	one := func(out int, undo bool) workflow.Definition {
		return workflow.Definition{Name: "big", Version: 1, Steps: []workflow.Step{
			{Name: strings.Repeat("s", 63), Budget: time.Second, MaxOutputBytes: out, Compensable: undo}}}
	}
	// room is what a one-step record leaves its outputs.
	room := workflow.MaxItemBytes - one(1, false).WorstItemBytes() + 1
	many := workflow.Definition{Name: "many", Version: 1}
	for k := range 8 {
		many.Steps = append(many.Steps, workflow.Step{Name: fmt.Sprintf("%s-%d", strings.Repeat("s", 60), k), Budget: time.Second,
			MaxOutputBytes: 20 << 10, Compensable: true})
	}
	defs := []workflow.Definition{workflow.Reference(), one(room, false), one(room/2, true), many}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			t.Fatalf("a definition the test counts on is refused: %v", err)
		}
	}
	if err := one(room+1, false).Validate(); err == nil {
		t.Fatalf("an output limit of %d, one byte past the item's room, is accepted", room+1)
	}
	return defs
}

// TestWorstRecordIsWithinItsBound: the record Validate's worst case stands
// for, as this store writes it, is no larger than WorstItemBytes says, so a
// definition Validate accepts has records that fit a DynamoDB item, up to
// the largest output limits the item allows, which are larger than an SQS
// message of 256 KiB would carry.
func TestWorstRecordIsWithinItsBound(t *testing.T) {
	t.Parallel()
	for _, d := range largeDefinitions(t) {
		item, err := encodeState(worstState(d))
		if err != nil {
			t.Fatal(err)
		}
		if size, bound := itemSize(t, item), d.WorstItemBytes(); size > bound || bound > workflow.MaxItemBytes {
			t.Errorf("%s: the worst record takes %d bytes, its bound is %d, the item limit %d", d.ID(), size, bound, workflow.MaxItemBytes)
		}
	}
}

// TestWorstRecordIsStored: DynamoDB Local, which holds items to 400 KB,
// stores the worst record of every large definition.
func TestWorstRecordIsStored(t *testing.T) {
	t.Parallel()
	db := enginetest.DynamoDB(t)
	tables := Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := CreateTables(context.Background(), db, tables, WithoutTTL()); err != nil {
		t.Fatal(err)
	}
	for i, d := range largeDefinitions(t) {
		s := worstState(d)
		s.OrderID = fmt.Sprintf("%s%02d", s.OrderID[:62], i)
		item, err := encodeState(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tables.State), Item: item}); err != nil {
			t.Errorf("%s: the worst record of %d bytes is refused: %v", d.ID(), itemSize(t, item), err)
		}
	}
}
