package statestore

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

func mustImage(t testing.TB, st workflow.State) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	img, err := EncodeImage(st)
	if err != nil {
		t.Fatalf("EncodeImage: %v", err)
	}
	return img
}

// viaJSON sends an image through JSON, as the Lambda runtime delivers it.
func viaJSON(t testing.TB, img map[string]events.DynamoDBAttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	b, err := json.Marshal(img)
	if err != nil {
		t.Fatalf("marshal image: %v", err)
	}
	var out map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal image %s: %v", b, err)
	}
	return out
}

// sampleState is a record with every field set, mid-compensation.
func sampleState() workflow.State {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 123000000, time.UTC)
	started, finished, undone := t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(5*time.Second)
	return workflow.State{
		OrderID: "ord-7f3a", Workflow: "order-v1", StepIndex: 0, Step: "reserve-inventory",
		ProcessState: workflow.Compensating, LockedBy: "sched/req-1", CompleteBy: t0.Add(time.Minute).Truncate(time.Millisecond),
		FailureCount: 1, WaitRound: 2, Attempt: 4, LastError: "card declined\nby issuer", AlertPending: true, Requeues: 2,
		ClientID: "client-a", Priority: workflow.PriorityHigh, EventSeq: 3, Cancelled: true, Resubmits: 1,
		Input: json.RawMessage(`{"orderId":"ord-7f3a","items":[1,2]}`),
		Steps: []workflow.StepRecord{
			{
				Name: "reserve-inventory", State: workflow.StepSucceeded, Attempts: 1, StartedAt: &started, FinishedAt: &finished,
				Output: json.RawMessage(`{"reservation":"r-1"}`), Compensation: workflow.StepProcessing, CompensationAttempts: 1,
			},
			{
				Name: "charge-payment", State: workflow.StepFailed, Attempts: 2, Failures: 1, Error: "declined",
				Compensation: workflow.StepSucceeded, CompensationAttempts: 1, CompensatedAt: &undone,
				CompensationOutput: json.RawMessage(`{}`), CompensationError: "first try timed out",
			},
		},
		CreatedAt: t0,
		UpdatedAt: t0.Add(6 * time.Second),
	}
}

func TestDecodeImageReadsWhatTheStoreWrites(t *testing.T) {
	t.Parallel()
	accepted := workflow.NewState("ord-1", workflow.Reference(), json.RawMessage(`{"orderId":"ord-1"}`),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 5, 5, 0, time.UTC))
	noClient := sampleState()
	noClient.ClientID, noClient.Input, noClient.Steps = "", nil, nil
	tests := []struct {
		name string
		st   workflow.State
	}{
		{"every field", sampleState()},
		{"new order", accepted},
		{"no client, input or steps", noClient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			img := mustImage(t, tc.st)
			for _, path := range []struct {
				name string
				img  map[string]events.DynamoDBAttributeValue
			}{{"direct", img}, {"through JSON", viaJSON(t, img)}} {
				got, err := DecodeImage(path.img)
				if err != nil {
					t.Fatalf("%s: DecodeImage: %v", path.name, err)
				}
				if !reflect.DeepEqual(got, tc.st) {
					t.Errorf("%s: DecodeImage =\n%+v\nwant\n%+v", path.name, got, tc.st)
				}
			}
		})
	}
}

func TestImageAttributeConversionCoversEveryType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   events.DynamoDBAttributeValue
		want types.AttributeValue
	}{
		{"S", events.NewStringAttribute("héllo"), &types.AttributeValueMemberS{Value: "héllo"}},
		{"empty S", events.NewStringAttribute(""), &types.AttributeValueMemberS{Value: ""}},
		{"N", events.NewNumberAttribute("-12.5e3"), &types.AttributeValueMemberN{Value: "-12.5e3"}},
		{"B", events.NewBinaryAttribute([]byte{0, 1, 0xff}), &types.AttributeValueMemberB{Value: []byte{0, 1, 0xff}}},
		{"BOOL true", events.NewBooleanAttribute(true), &types.AttributeValueMemberBOOL{Value: true}},
		{"BOOL false", events.NewBooleanAttribute(false), &types.AttributeValueMemberBOOL{Value: false}},
		{"NULL", events.NewNullAttribute(), &types.AttributeValueMemberNULL{Value: true}},
		{"SS", events.NewStringSetAttribute([]string{"a", "b"}), &types.AttributeValueMemberSS{Value: []string{"a", "b"}}},
		{"NS", events.NewNumberSetAttribute([]string{"1", "2.5"}), &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}}},
		{"BS", events.NewBinarySetAttribute([][]byte{{1}, {2, 3}}), &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}},
		{"empty L", events.NewListAttribute([]events.DynamoDBAttributeValue{}), &types.AttributeValueMemberL{Value: []types.AttributeValue{}}},
		{
			"nested L and M",
			events.NewListAttribute([]events.DynamoDBAttributeValue{
				events.NewNumberAttribute("1"),
				events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
					"inner": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewNullAttribute(), events.NewStringSetAttribute([]string{"x"})}),
					"flag":  events.NewBooleanAttribute(true),
				}),
			}),
			&types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberN{Value: "1"},
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
					"inner": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberSS{Value: []string{"x"}}}},
					"flag":  &types.AttributeValueMemberBOOL{Value: true},
				}},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := toAttributeValue(tc.in)
			if err != nil {
				t.Fatalf("toAttributeValue: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("toAttributeValue = %#v, want %#v", got, tc.want)
			}
			// And back, as EncodeImage converts.
			if back, err := fromAttributeValue(got); err != nil || !reflect.DeepEqual(back, tc.in) {
				t.Errorf("round trip = %v, %v, want %v", back, err, tc.in)
			}
		})
	}
}

func TestDecodeImageRejectsBadImages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		change  func(map[string]events.DynamoDBAttributeValue)
		wantErr string
	}{
		{"nil image", func(m map[string]events.DynamoDBAttributeValue) { clear(m) }, "image is empty"},
		{"zero value", func(m map[string]events.DynamoDBAttributeValue) { m["ClientID"] = events.DynamoDBAttributeValue{} }, `attribute "ClientID"`},
		{
			"zero value deep in a list",
			func(m map[string]events.DynamoDBAttributeValue) {
				m["Steps"] = events.NewListAttribute([]events.DynamoDBAttributeValue{
					events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"Name": {}}),
				})
			},
			`attribute "Steps": list element 0: map: attribute "Name"`,
		},
		{"sequence as a string", func(m map[string]events.DynamoDBAttributeValue) { m["EventSeq"] = events.NewStringAttribute("3") }, "decode state record"},
		{"sequence not an integer", func(m map[string]events.DynamoDBAttributeValue) { m["EventSeq"] = events.NewNumberAttribute("3.5") }, "decode state record"},
		{"bad time", func(m map[string]events.DynamoDBAttributeValue) {
			m["UpdatedAt"] = events.NewStringAttribute("yesterday")
		}, "decode state record"},
		{"steps not a list", func(m map[string]events.DynamoDBAttributeValue) { m["Steps"] = events.NewBooleanAttribute(true) }, "decode state record"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			img := mustImage(t, sampleState())
			tc.change(img)
			_, err := DecodeImage(img)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecodeImage error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecodeImage feeds DecodeImage stream images built from arbitrary JSON:
// the image is outside input to the event publisher, which must not panic
// on it. When an image decodes, the record must survive the store's own
// encoding unchanged, or the publisher and the store would disagree on it.
func FuzzDecodeImage(f *testing.F) {
	for _, st := range []workflow.State{sampleState(), {OrderID: "o", EventSeq: 1}} {
		b, err := json.Marshal(mustImage(f, st))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"OrderID":{"S":"o"},"EventSeq":{"N":"99999999999999999999"}}`))
	f.Add([]byte(`{"OrderID":{"S":"o"},"Steps":{"L":[{"M":{"Name":{"NULL":true}}},{"S":"x"}]}}`))
	f.Add([]byte(`{"OrderID":{"S":"o"},"UpdatedAt":{"S":"9999-12-31T23:59:59-23:59"}}`))
	f.Add([]byte(`{"OrderID":{"B":"AAE="},"Input":{"SS":["a"]},"Cancelled":{"BOOL":true}}`))
	f.Add([]byte(`{"OrderID":{"NS":["1"]},"Step":{"BS":["AA=="]},"Steps":{"NULL":true}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, ok := unmarshalImage(b)
		if !ok {
			return
		}
		st, err := DecodeImage(img)
		if err != nil {
			return
		}
		if s, isS := img["OrderID"]; isS && s.DataType() == events.DataTypeString && st.OrderID != s.String() {
			t.Fatalf("OrderID = %q, image has %q", st.OrderID, s.String())
		}
		if !timesFitRFC3339(st) {
			// A time near year 0 or 9999 in another zone leaves the range
			// RFC 3339 can write once turned to UTC; real records hold UTC
			// times of this century.
			return
		}
		img, err = EncodeImage(st)
		if err != nil {
			t.Fatalf("decoded record does not encode: %v\nrecord: %+v", err, st)
		}
		again, err := DecodeImage(img)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v\nrecord: %+v", err, st)
		}
		if !reflect.DeepEqual(normalize(again), normalize(st)) {
			t.Fatalf("record changed through the store's encoding:\n got %+v\nwant %+v", again, st)
		}
	})
}

// unmarshalImage parses fuzz bytes as the Lambda runtime would. Its
// UnmarshalJSON panics on a BS set holding a non-string (aws-lambda-go
// v1.55.1, unmarshalBinarySet); that is the library's, not DecodeImage's, so
// such inputs are dropped rather than reported.
func unmarshalImage(b []byte) (img map[string]events.DynamoDBAttributeValue, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, false
	}
	return img, true
}

func timesFitRFC3339(st workflow.State) bool {
	ts := []time.Time{st.CreatedAt, st.UpdatedAt}
	for _, s := range st.Steps {
		for _, p := range []*time.Time{s.StartedAt, s.FinishedAt, s.CompensatedAt} {
			if p != nil {
				ts = append(ts, *p)
			}
		}
	}
	for _, t := range ts {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return false
		}
	}
	return true
}

// normalize puts every time in UTC: the store writes UTC, so a time read
// with another offset comes back as the same instant in UTC.
func normalize(st workflow.State) workflow.State {
	utc := func(t time.Time) time.Time { return t.UTC() }
	st.CreatedAt, st.UpdatedAt, st.CompleteBy = utc(st.CreatedAt), utc(st.UpdatedAt), utc(st.CompleteBy)
	steps := make([]workflow.StepRecord, len(st.Steps))
	for i, s := range st.Steps {
		for _, p := range []**time.Time{&s.StartedAt, &s.FinishedAt, &s.CompensatedAt} {
			if *p != nil {
				u := utc(**p)
				*p = &u
			}
		}
		steps[i] = s
	}
	if st.Steps != nil {
		st.Steps = steps
	}
	return st
}

// ImageEventSeq reads what DecodeImage reads of EventSeq, and gives up on
// any value the written codec would not read as a number.
func TestImageEventSeqReadsOnlyAPlainNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		img  map[string]events.DynamoDBAttributeValue
		seq  int
		ok   bool
	}{
		{"absent", map[string]events.DynamoDBAttributeValue{}, 0, true},
		{"a number", map[string]events.DynamoDBAttributeValue{"EventSeq": events.NewNumberAttribute("3")}, 3, true},
		{"a string", map[string]events.DynamoDBAttributeValue{"EventSeq": events.NewStringAttribute("3")}, 0, false},
		{"a fraction", map[string]events.DynamoDBAttributeValue{"EventSeq": events.NewNumberAttribute("3.5")}, 0, false},
		{"null", map[string]events.DynamoDBAttributeValue{"EventSeq": events.NewNullAttribute()}, 0, false},
		{"zero value", map[string]events.DynamoDBAttributeValue{"EventSeq": {}}, 0, false},
	} {
		seq, ok := ImageEventSeq(tc.img)
		if seq != tc.seq || ok != tc.ok {
			t.Errorf("%s: %d, %t; want %d, %t", tc.name, seq, ok, tc.seq, tc.ok)
		}
		if !ok {
			continue
		}
		tc.img["OrderID"] = events.NewStringAttribute("o-1")
		if st, err := DecodeImage(tc.img); err != nil || st.EventSeq != seq {
			t.Errorf("%s: DecodeImage reads %d, %v", tc.name, st.EventSeq, err)
		}
	}
}
