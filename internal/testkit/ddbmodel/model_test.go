package ddbmodel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sasflow/sas/internal/testkit/ddbmodel"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
)

var (
	bg = context.Background()
	t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{statestore.KeyOrderID: s(id)}
}

// record is a state-like item: a list of step maps, counters, a shard.
func record(id string) map[string]types.AttributeValue {
	step := func(state string) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"Name": s("a"), "State": s(state)}}
	}
	return map[string]types.AttributeValue{
		statestore.KeyOrderID: s(id), "ProcessState": s("Pending"), "Attempt": n("2"), "Workflow": s("order-v1"),
		"Steps": &types.AttributeValueMemberL{Value: []types.AttributeValue{step("Succeeded"), step("Pending")}},
		"Input": s("abc"), "Flag": &types.AttributeValueMemberBOOL{Value: true},
	}
}

// put writes an item with a transaction of one Put.
func put(t *testing.T, m *ddbmodel.Model, table string, it map[string]types.AttributeValue) {
	t.Helper()
	if _, err := m.TransactWriteItems(bg, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: it}}}}); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, m *ddbmodel.Model, id string, consistent bool) map[string]types.AttributeValue {
	t.Helper()
	out, err := m.GetItem(bg, &dynamodb.GetItemInput{TableName: aws.String("state"), Key: key(id), ConsistentRead: aws.Bool(consistent)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func isValidation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}

func text(v types.AttributeValue) string {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return x.Value
	case *types.AttributeValueMemberN:
		return x.Value
	case nil:
		return "<absent>"
	}
	return fmt.Sprintf("%T", v)
}

// TestConditions evaluates condition expressions against one item, as
// DynamoDB does: comparisons of absent attributes or of different types
// are false, numbers compare by value, AND binds tighter than OR.
func TestConditions(t *testing.T) {
	t.Parallel()
	names := map[string]string{"#st": "ProcessState", "#a": "Attempt", "#steps": "Steps", "#state": "State", "#no": "Missing", "#id": statestore.KeyOrderID}
	tests := []struct {
		cond string
		want bool
	}{
		{"attribute_exists(#id)", true},
		{"attribute_not_exists(#id)", false},
		{"attribute_not_exists(#no)", true},
		{"attribute_exists(#steps[1].#state)", true},
		{"attribute_exists(#steps[2].#state)", false},
		{"#steps[0].#state = :succeeded", true},
		{"#st = :pending", true},
		{"#st <> :pending", false},
		{"#a = :two", true},
		{"#a = :twoDotZero", true}, // numbers by value
		{"#a > :ten", false},       // not by text
		{"#a < :ten", true},
		{"#a <= :two AND #a >= :two", true},
		{"#a BETWEEN :two AND :ten", true},
		{"#st IN (:running, :pending)", true},
		{"#st IN (:running)", false},
		{"#no = :pending", false}, // absent
		{"#no <> :pending", false},
		{"#st = :two", false}, // types differ
		{"#st > :two", false},
		{"begins_with(#st, :pen)", true},
		{"NOT #st = :running", true},
		{"#st = :running AND #a = :two OR #a = :two", true},
		{"#st = :running AND (#a = :two OR #a = :two)", false},
		{"attribute_not_exists(#id) OR #a <= :two", true},
	}
	values := map[string]types.AttributeValue{":pending": s("Pending"), ":running": s("Running"), ":succeeded": s("Succeeded"),
		":two": n("2"), ":twoDotZero": n("2.0"), ":ten": n("10"), ":pen": s("Pen")}
	for _, tc := range tests {
		t.Run(tc.cond, func(t *testing.T) {
			t.Parallel()
			m := open(t, ddbmodel.Options{Clock: clock.NewFake(t0)})
			put(t, m, "state", record("o1"))
			// Only the placeholders this condition uses: DynamoDB refuses
			// unused ones.
			ns, vs := map[string]string{}, map[string]types.AttributeValue{}
			for k, v := range names {
				if strings.Contains(tc.cond, k+")") || strings.Contains(tc.cond, k+" ") || strings.Contains(tc.cond, k+"[") || strings.Contains(tc.cond, k+".") || strings.Contains(tc.cond, k+",") {
					ns[k] = v
				}
			}
			for k, v := range values {
				if strings.Contains(tc.cond+" ", k+" ") || strings.Contains(tc.cond, k+")") || strings.Contains(tc.cond, k+",") {
					vs[k] = v
				}
			}
			ns["#mark"] = "Mark"
			vs[":mark"] = s("x")
			_, err := m.UpdateItem(bg, &dynamodb.UpdateItemInput{TableName: aws.String("state"), Key: key("o1"),
				UpdateExpression: aws.String("SET #mark = :mark"), ConditionExpression: aws.String(tc.cond),
				ExpressionAttributeNames: ns, ExpressionAttributeValues: vs})
			var failed *types.ConditionalCheckFailedException
			switch {
			case tc.want && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.want && !errors.As(err, &failed):
				t.Fatalf("got %v, want ConditionalCheckFailedException", err)
			}
		})
	}
}

// TestUpdates applies update expressions: nested list paths, counters from
// if_not_exists, REMOVE, and every right-hand side read from the item as it
// was; and refuses what DynamoDB refuses.
func TestUpdates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		update string
		names  map[string]string
		values map[string]types.AttributeValue
		check  func(it map[string]types.AttributeValue) string // "" when right
		refuse bool
	}{{
		name: "a nested path in a list", update: "SET #steps[1].#state = :v",
		names: map[string]string{"#steps": "Steps", "#state": "State"}, values: map[string]types.AttributeValue{":v": s("Running")},
		check: func(it map[string]types.AttributeValue) string {
			l := it["Steps"].(*types.AttributeValueMemberL).Value
			return want(text(l[1].(*types.AttributeValueMemberM).Value["State"]), "Running") + want(text(l[0].(*types.AttributeValueMemberM).Value["State"]), "Succeeded")
		},
	}, {
		name: "counters count from zero when absent", update: "SET #a = if_not_exists(#a, :z) + :one, #f = if_not_exists(#f, :z) + :one",
		names: map[string]string{"#a": "Attempt", "#f": "FailureCount"}, values: map[string]types.AttributeValue{":z": n("0"), ":one": n("1")},
		check: func(it map[string]types.AttributeValue) string {
			return want(text(it["Attempt"]), "3") + want(text(it["FailureCount"]), "1")
		},
	}, {
		name: "remove, and a nested member", update: "REMOVE #flag, #steps[0].#state",
		names: map[string]string{"#flag": "Flag", "#steps": "Steps", "#state": "State"},
		check: func(it map[string]types.AttributeValue) string {
			_, flag := it["Flag"]
			_, st := it["Steps"].(*types.AttributeValueMemberL).Value[0].(*types.AttributeValueMemberM).Value["State"]
			return want(fmt.Sprint(flag, st), "false false")
		},
	}, {
		name: "values from the item as it was", update: "SET #a = #b, #b = #a",
		names: map[string]string{"#a": "Input", "#b": "Workflow"},
		check: func(it map[string]types.AttributeValue) string {
			return want(text(it["Input"]), "order-v1") + want(text(it["Workflow"]), "abc")
		},
	}, {
		name: "an index past the end appends", update: "SET #steps[5] = :v",
		names: map[string]string{"#steps": "Steps"}, values: map[string]types.AttributeValue{":v": s("x")},
		check: func(it map[string]types.AttributeValue) string {
			return want(fmt.Sprint(len(it["Steps"].(*types.AttributeValueMemberL).Value)), "3")
		},
	}, {
		name: "a path past the end of a list", update: "SET #steps[7].#state = :v",
		names: map[string]string{"#steps": "Steps", "#state": "State"}, values: map[string]types.AttributeValue{":v": s("x")}, refuse: true,
	}, {
		name: "overlapping paths", update: "SET #steps[1].#state = :v REMOVE #steps",
		names: map[string]string{"#steps": "Steps", "#state": "State"}, values: map[string]types.AttributeValue{":v": s("x")}, refuse: true,
	}, {
		name: "the key", update: "SET #id = :v",
		names: map[string]string{"#id": statestore.KeyOrderID}, values: map[string]types.AttributeValue{":v": s("x")}, refuse: true,
	}, {
		name: "arithmetic on a string", update: "SET #a = #st + :one",
		names: map[string]string{"#a": "Attempt", "#st": "ProcessState"}, values: map[string]types.AttributeValue{":one": n("1")}, refuse: true,
	}, {
		name: "an unused name", update: "SET #a = :one",
		names: map[string]string{"#a": "Attempt", "#b": "Other"}, values: map[string]types.AttributeValue{":one": n("1")}, refuse: true,
	}, {
		name: "an unused value", update: "SET #a = :one",
		names: map[string]string{"#a": "Attempt"}, values: map[string]types.AttributeValue{":one": n("1"), ":two": n("2")}, refuse: true,
	}, {
		name: "an undefined value", update: "SET #a = :one",
		names: map[string]string{"#a": "Attempt"}, refuse: true,
	}, {
		name: "over 400 KB", update: "SET #in = :big",
		names: map[string]string{"#in": "Input"}, values: map[string]types.AttributeValue{":big": s(strings.Repeat("x", ddbmodel.MaxItemBytes))}, refuse: true,
	}, {
		name: "a clause twice", update: "SET #a = :one SET #a = :one",
		names: map[string]string{"#a": "Attempt"}, values: map[string]types.AttributeValue{":one": n("1")}, refuse: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := open(t, ddbmodel.Options{Clock: clock.NewFake(t0)})
			put(t, m, "state", record("o1"))
			before := get(t, m, "o1", true)
			out, err := m.UpdateItem(bg, &dynamodb.UpdateItemInput{TableName: aws.String("state"), Key: key("o1"),
				UpdateExpression: aws.String(tc.update), ExpressionAttributeNames: tc.names, ExpressionAttributeValues: tc.values,
				ReturnValues: types.ReturnValueAllNew})
			if tc.refuse {
				if !isValidation(err) {
					t.Fatalf("got %v, want a ValidationException", err)
				}
				if got := get(t, m, "o1", true); fmt.Sprint(got) != fmt.Sprint(before) {
					t.Fatalf("a refused update changed the item")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(out.Attributes); msg != "" {
				t.Fatalf("ALL_NEW: %s", msg)
			}
			if msg := tc.check(get(t, m, "o1", true)); msg != "" {
				t.Fatalf("stored: %s", msg)
			}
			// The item an earlier read returned is as it was.
			if msg := want(text(before["Steps"].(*types.AttributeValueMemberL).Value[1].(*types.AttributeValueMemberM).Value["State"]), "Pending"); msg != "" {
				t.Fatalf("an earlier answer changed: %s", msg)
			}
		})
	}
}

func want(got, want string) string {
	if got != want {
		return fmt.Sprintf("got %q, want %q; ", got, want)
	}
	return ""
}

// TestAFailedConditionAnswersTheItem: ReturnValuesOnConditionCheckFailure
// ALL_OLD puts the item in the exception; NONE does not; an absent item
// answers none.
func TestAFailedConditionAnswersTheItem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		id       string
		rv       types.ReturnValuesOnConditionCheckFailure
		wantItem bool
	}{
		{"all old", "o1", types.ReturnValuesOnConditionCheckFailureAllOld, true},
		{"none", "o1", types.ReturnValuesOnConditionCheckFailureNone, false},
		{"absent", "o2", types.ReturnValuesOnConditionCheckFailureAllOld, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := open(t, ddbmodel.Options{Clock: clock.NewFake(t0)})
			put(t, m, "state", record("o1"))
			_, err := m.UpdateItem(bg, &dynamodb.UpdateItemInput{TableName: aws.String("state"), Key: key(tc.id),
				UpdateExpression: aws.String("SET #a = :v"), ConditionExpression: aws.String("#a = :v"),
				ExpressionAttributeNames: map[string]string{"#a": "Attempt"}, ExpressionAttributeValues: map[string]types.AttributeValue{":v": n("9")},
				ReturnValuesOnConditionCheckFailure: tc.rv})
			var failed *types.ConditionalCheckFailedException
			if !errors.As(err, &failed) {
				t.Fatalf("got %v", err)
			}
			if got := len(failed.Item) > 0; got != tc.wantItem || (got && text(failed.Item["Attempt"]) != "2") {
				t.Fatalf("item %v, want one: %t", failed.Item, tc.wantItem)
			}
		})
	}
}

// transaction is CreateOrder's shape: the order, the record, a key item
// conditional on its absence or expiry.
func transaction(id string, now int64, token *string) *dynamodb.TransactWriteItemsInput {
	notExists := aws.String("attribute_not_exists(" + statestore.KeyOrderID + ")")
	return &dynamodb.TransactWriteItemsInput{ClientRequestToken: token, TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("orders"), Item: key(id), ConditionExpression: notExists}},
		{Put: &types.Put{TableName: aws.String("state"), Item: record(id), ConditionExpression: notExists,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{statestore.KeyOrderID: s("key-" + id), "ExpiresAt": n("100")},
			ConditionExpression:       aws.String("attribute_not_exists(#id) OR #exp <= :now"),
			ExpressionAttributeNames:  map[string]string{"#id": statestore.KeyOrderID, "#exp": "ExpiresAt"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(fmt.Sprint(now))}}},
	}}
}

// TestTransactionsAreAllOrNothing: a failed condition cancels the whole
// transaction with a reason per action, in order, "None" for those that
// would have passed and the item where ALL_OLD asks; and a transaction
// that names two actions on one item is refused.
func TestTransactionsAreAllOrNothing(t *testing.T) {
	t.Parallel()
	m := open(t, ddbmodel.Options{Clock: clock.NewFake(t0)})
	if _, err := m.TransactWriteItems(bg, transaction("o1", 0, nil)); err != nil {
		t.Fatal(err)
	}
	// The record exists, the key item has not expired (100 > now 50).
	_, err := m.TransactWriteItems(bg, transaction("o1", 50, nil))
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		t.Fatalf("got %v, want TransactionCanceledException", err)
	}
	var codes []string
	for _, r := range canceled.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	if fmt.Sprint(codes) != "[ConditionalCheckFailed ConditionalCheckFailed ConditionalCheckFailed]" ||
		len(canceled.CancellationReasons[0].Item) != 0 || text(canceled.CancellationReasons[1].Item["Attempt"]) != "2" {
		t.Fatalf("reasons %v, items %v / %v", codes, canceled.CancellationReasons[0].Item, canceled.CancellationReasons[1].Item)
	}
	// Past the key's expiry only the order's and the record's conditions
	// fail; the key item's would have passed.
	_, err = m.TransactWriteItems(bg, transaction("o1", 200, nil))
	codes = nil
	if errors.As(err, &canceled) {
		for _, r := range canceled.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
	}
	if fmt.Sprint(codes) != "[ConditionalCheckFailed ConditionalCheckFailed None]" {
		t.Fatalf("reasons %v (%v)", codes, err)
	}
	// A transaction that fails on one action writes none of the others.
	in := transaction("o2", 50, nil)
	in.TransactItems[2].Put.Item = map[string]types.AttributeValue{statestore.KeyOrderID: s("key-o1")}
	if _, err := m.TransactWriteItems(bg, in); !errors.As(err, &canceled) {
		t.Fatalf("got %v", err)
	}
	if it := get(t, m, "o2", true); it != nil {
		t.Fatalf("a cancelled transaction wrote %v", it)
	}
	twice := transaction("o3", 0, nil)
	twice.TransactItems[2] = twice.TransactItems[0]
	if _, err := m.TransactWriteItems(bg, twice); !isValidation(err) {
		t.Fatalf("two actions on one item: %v", err)
	}
}

// TestClientRequestTokens: a transaction sent again with its token within
// 10 minutes succeeds without writing again; with other parameters it is
// IdempotentParameterMismatchException; after 10 minutes it is a new
// request. The SDK's own token is sent again by its retry: the Call hook's
// second attempt.
func TestClientRequestTokens(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	writes := 0
	m := open(t, ddbmodel.Options{Clock: clk, OnWrite: func(context.Context, ddbmodel.Write) { writes++ }})
	tok := aws.String("tok-1")
	if _, err := m.TransactWriteItems(bg, transaction("o1", 0, tok)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(9 * time.Minute)
	if _, err := m.TransactWriteItems(bg, transaction("o1", 0, tok)); err != nil || writes != 3 {
		t.Fatalf("the same request again: %v, %d writes, want none more than 3", err, writes)
	}
	var mismatch *types.IdempotentParameterMismatchException
	if _, err := m.TransactWriteItems(bg, transaction("o1", 1, tok)); !errors.As(err, &mismatch) {
		t.Fatalf("other parameters: %v", err)
	}
	clk.Advance(2 * time.Minute)
	var canceled *types.TransactionCanceledException
	if _, err := m.TransactWriteItems(bg, transaction("o1", 0, tok)); !errors.As(err, &canceled) {
		t.Fatalf("past 10 minutes: %v, want its conditions to fail", err)
	}
	// The SDK's retry of a transaction whose answer was lost.
	retry := open(t, ddbmodel.Options{Clock: clk, Call: func(_ context.Context, c ddbmodel.Call) error {
		if err := c.Attempt(); err != nil || !c.Write {
			return err
		}
		return c.Attempt()
	}})
	if _, err := retry.TransactWriteItems(bg, transaction("o1", 0, nil)); err != nil {
		t.Fatalf("a retry with the SDK's token: %v", err)
	}
}

// TestEventualConsistency: an eventually consistent read within the lag
// of a write may answer the item as it was (absent, when it was created
// since); a strongly consistent one, and any read once the lag has
// passed, the latest.
func TestEventualConsistency(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	oldest := func(n int) int { return n - 1 }
	m := open(t, ddbmodel.Options{Clock: clk, Stale: oldest})
	put(t, m, "state", record("o1"))
	if it := get(t, m, "o1", false); it != nil {
		t.Fatalf("created within the lag: read %v, may be absent", it)
	}
	clk.Advance(ddbmodel.DefaultLag)
	set := func(v string) {
		if _, err := m.UpdateItem(bg, &dynamodb.UpdateItemInput{TableName: aws.String("state"), Key: key("o1"),
			UpdateExpression: aws.String("SET #st = :v"), ExpressionAttributeNames: map[string]string{"#st": "ProcessState"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	set("Processing")
	clk.Advance(400 * time.Millisecond)
	set("Processed")
	for _, tc := range []struct {
		after      time.Duration
		consistent bool
		want       string
	}{
		{0, false, "Pending"},
		{0, true, "Processed"},
		{700 * time.Millisecond, false, "Processing"}, // the first write is past the lag
		{400 * time.Millisecond, false, "Processed"},
	} {
		clk.Advance(tc.after)
		if got := text(get(t, m, "o1", tc.consistent)["ProcessState"]); got != tc.want {
			t.Fatalf("%v later, consistent %t: %s, want %s", tc.after, tc.consistent, got, tc.want)
		}
	}
}

// query reads partition part of an index of the state table.
func query(m *ddbmodel.Model, index, hash, part string, limit int32, start map[string]types.AttributeValue, forward bool) (*dynamodb.QueryOutput, error) {
	return m.Query(bg, &dynamodb.QueryInput{TableName: aws.String("state"), IndexName: aws.String(index),
		KeyConditionExpression: aws.String("#p = :p"), ExpressionAttributeNames: map[string]string{"#p": hash},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(part)}, Limit: aws.Int32(limit), ExclusiveStartKey: start,
		ScanIndexForward: aws.Bool(forward)})
}

func ids(out *dynamodb.QueryOutput) []string {
	var ids []string
	for _, it := range out.Items {
		ids = append(ids, text(it[statestore.KeyOrderID]))
	}
	return ids
}

// TestIndexes: a global secondary index holds the items with its keys
// only (sparse), keys only (KEYS_ONLY), in sort key order, by pages
// (Limit, LastEvaluatedKey); it follows the table within the lag, so an
// item that left it may still show; and it refuses a consistent read.
func TestIndexes(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	m := open(t, ddbmodel.Options{Clock: clk, Stale: func(n int) int { return n - 1 }})
	for i, id := range []string{"o1", "o2", "o3", "o4"} {
		it := record(id)
		if i < 3 {
			it[statestore.ByStateKeyAttr] = s("Error#01")
			it[statestore.ByStateSortAttr] = s(fmt.Sprintf("%013d#%s", i, id))
		}
		put(t, m, "state", it)
	}
	clk.Advance(time.Second)
	// Newest first, two a page.
	var got []string
	var start map[string]types.AttributeValue
	for page := 0; ; page++ {
		out, err := query(m, statestore.ByStateIndex, statestore.ByStateKeyAttr, "Error#01", 2, start, false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(out)...)
		for _, it := range out.Items {
			if len(it) != 3 {
				t.Fatalf("a KEYS_ONLY item holds %v", it)
			}
		}
		if start = out.LastEvaluatedKey; start == nil || page > 3 {
			break
		}
	}
	if fmt.Sprint(got) != "[o3 o2 o1]" {
		t.Fatalf("pages %v, want [o3 o2 o1]", got)
	}
	// o2 leaves the index: within the lag a query may still find it.
	if _, err := m.UpdateItem(bg, &dynamodb.UpdateItemInput{TableName: aws.String("state"), Key: key("o2"),
		UpdateExpression: aws.String("REMOVE #k, #s"), ExpressionAttributeNames: map[string]string{"#k": statestore.ByStateKeyAttr, "#s": statestore.ByStateSortAttr}}); err != nil {
		t.Fatal(err)
	}
	out, _ := query(m, statestore.ByStateIndex, statestore.ByStateKeyAttr, "Error#01", 10, nil, true)
	if fmt.Sprint(ids(out)) != "[o1 o2 o3]" {
		t.Fatalf("within the lag: %v", ids(out))
	}
	clk.Advance(time.Second)
	out, _ = query(m, statestore.ByStateIndex, statestore.ByStateKeyAttr, "Error#01", 10, nil, true)
	if fmt.Sprint(ids(out)) != "[o1 o3]" || out.LastEvaluatedKey != nil {
		t.Fatalf("past the lag: %v, %v", ids(out), out.LastEvaluatedKey)
	}
	if _, err := m.Query(bg, &dynamodb.QueryInput{TableName: aws.String("state"), IndexName: aws.String(statestore.ByStateIndex),
		KeyConditionExpression: aws.String("#p = :p"), ExpressionAttributeNames: map[string]string{"#p": statestore.ByStateKeyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("Error#01")}, ConsistentRead: aws.Bool(true)}); !isValidation(err) {
		t.Fatalf("a consistent read of an index: %v", err)
	}
}

// TestBatchGetItem: the keys Unprocessed names come back in
// UnprocessedKeys, with the request's projection; a batch of which no key
// was read is ProvisionedThroughputExceededException; over 100 keys, or a
// key twice, is refused.
func TestBatchGetItem(t *testing.T) {
	t.Parallel()
	m := open(t, ddbmodel.Options{Clock: clock.NewFake(t0), Unprocessed: func(_, k string) bool { return k == "o2" || k == "x" }})
	for _, id := range []string{"o1", "o2", "o3"} {
		put(t, m, "state", record(id))
	}
	batch := func(ids ...string) (*dynamodb.BatchGetItemOutput, error) {
		var keys []map[string]types.AttributeValue
		for _, id := range ids {
			keys = append(keys, key(id))
		}
		return m.BatchGetItem(bg, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"state": {
			Keys: keys, ProjectionExpression: aws.String("#a, #b"), ExpressionAttributeNames: map[string]string{"#a": statestore.KeyOrderID, "#b": "Attempt"}}}})
	}
	out, err := batch("o1", "o2", "o3", "o9")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range out.Responses["state"] {
		got = append(got, text(it[statestore.KeyOrderID]))
		if len(it) != 2 {
			t.Fatalf("projected %v", it)
		}
	}
	left := out.UnprocessedKeys["state"]
	if fmt.Sprint(got) != "[o1 o3]" || len(left.Keys) != 1 || text(left.Keys[0][statestore.KeyOrderID]) != "o2" || aws.ToString(left.ProjectionExpression) != "#a, #b" {
		t.Fatalf("read %v, unprocessed %+v", got, left)
	}
	var throttled *types.ProvisionedThroughputExceededException
	if _, err := batch("o2", "x"); !errors.As(err, &throttled) {
		t.Fatalf("nothing read: %v", err)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	if _, err := batch(many...); !isValidation(err) {
		t.Fatalf("101 keys: %v", err)
	}
	if _, err := batch("o1", "o1"); !isValidation(err) {
		t.Fatalf("a key twice: %v", err)
	}
}

// TestTTLAndTheStream: the stream has a record of each write that changed
// an item, in order, with both images; TTL's pass deletes an item
// TTLDelay after its TTL, not before, and not when its TTL moved, with a
// REMOVE record of the service.
func TestTTLAndTheStream(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	var recs []*ddbmodel.Record
	m := open(t, ddbmodel.Options{Clock: clk, TTLDelay: time.Hour, OnWrite: func(_ context.Context, w ddbmodel.Write) {
		if w.Record != nil {
			recs = append(recs, w.Record)
		}
	}})
	exp := t0.Add(time.Minute).Unix()
	for _, id := range []string{"o1", "o2"} {
		it := record(id)
		it[statestore.ExpiresAtAttr] = n(fmt.Sprint(exp))
		put(t, m, "state", it)
	}
	setTTL := func(id string, at int64) {
		if _, err := m.UpdateItem(bg, &dynamodb.UpdateItemInput{TableName: aws.String("state"), Key: key(id),
			UpdateExpression: aws.String("SET #e = :e"), ExpressionAttributeNames: map[string]string{"#e": statestore.ExpiresAtAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": n(fmt.Sprint(at))}}); err != nil {
			t.Fatal(err)
		}
	}
	setTTL("o2", exp+3600)
	setTTL("o2", exp+3600) // no change: no record
	clk.Advance(time.Hour)
	if n := m.RunTTL(); n != 0 {
		t.Fatalf("deleted %d before their time", n)
	}
	clk.Advance(time.Minute)
	if n := m.RunTTL(); n != 1 || get(t, m, "o1", true) != nil || get(t, m, "o2", true) == nil {
		t.Fatalf("deleted %d; o1 %v", n, get(t, m, "o1", true))
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s %s %t", r.EventName, text(r.Keys[statestore.KeyOrderID]), r.ByTTL))
	}
	if fmt.Sprint(got) != "[INSERT o1 false INSERT o2 false MODIFY o2 false REMOVE o1 true]" {
		t.Fatalf("records %v", got)
	}
	modify, remove := recs[2], recs[3]
	if text(modify.OldImage[statestore.ExpiresAtAttr]) != fmt.Sprint(exp) || text(modify.NewImage[statestore.ExpiresAtAttr]) != fmt.Sprint(exp+3600) ||
		remove.NewImage != nil || remove.OldImage == nil || !(remove.Seq > modify.Seq) {
		t.Fatalf("images: %+v / %+v", modify, remove)
	}
	ev, err := remove.Event("us-east-1", "arn:stream")
	if err != nil || ev.UserIdentity == nil || ev.UserIdentity.PrincipalID != "dynamodb.amazonaws.com" || ev.EventName != "REMOVE" {
		t.Fatalf("event %+v, %v", ev, err)
	}
	// SizeBytes counts the keys and both images, as StreamRecord's does.
	for _, r := range recs {
		ev, err := r.Event("us-east-1", "arn:stream")
		if want := ddbmodel.ItemSize(r.Keys) + ddbmodel.ItemSize(r.NewImage) + ddbmodel.ItemSize(r.OldImage); err != nil || ev.Change.SizeBytes != int64(want) {
			t.Errorf("%s %d: SizeBytes %d, %v; want %d", r.EventName, r.Seq, ev.Change.SizeBytes, err, want)
		}
	}
}
