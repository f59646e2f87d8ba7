package statestore

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
)

// TestTheWrittenCodecIsTheSDKs: the state record's written-out codec
// writes what attributevalue.MarshalMap writes of a stateItem, and reads
// back what UnmarshalMap reads, for items of every field filled or not.
func TestTheWrittenCodecIsTheSDKs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		it := randomItem(rng)
		want, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		got := it.marshal()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("item %d: written %#v\nthe SDK's %#v", i, got, want)
		}
		var back, sdk stateItem
		if err := back.unmarshal(got); err != nil {
			t.Fatal(err)
		}
		if err := attributevalue.UnmarshalMap(got, &sdk); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, sdk) {
			t.Fatalf("item %d: read %+v\nthe SDK's %+v", i, back, sdk)
		}
	}
}

// FuzzTheWrittenDecoderIsTheSDKs: on any item, the written-out decoder
// fails exactly when UnmarshalMap does, and otherwise reads the same.
func FuzzTheWrittenDecoderIsTheSDKs(f *testing.F) {
	for _, s := range []string{
		`{"OrderID":{"S":"o"},"EventSeq":{"N":"3"},"Steps":{"L":[{"M":{"Name":{"S":"a"},"Attempts":{"N":"2"}}}]}}`,
		`{"OrderID":{"N":"12"},"EventSeq":{"S":"3"}}`,
		`{"Steps":{"NULL":true},"Cancelled":{"BOOL":true},"Attempt":{"N":"+3"}}`,
		`{"Steps":{"L":[{"NULL":true},{"S":"x"}]}}`,
		`{"Steps":{"M":{}}}`,
		`{"Steps":{"L":[{"M":{"name":{"S":"a"},"Attempts":{"N":"2"}}}]}}`,
		`{"Steps":{"L":[{"M":{"Name":{"S":"a"},"compensationERROR":{"S":"b"}}}]},"Workflow":{"S":"w"},"orderID":{"S":"p"}}`,
		`{"CompleteBy":{"N":"99999999999999999999"}}`,
		`{"LockedBy":{"NULL":true},"AlertPending":{"S":"true"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		img, ok := unmarshalImage(b)
		if !ok {
			return
		}
		av, err := eachAttribute(img, toAttributeValue)
		if err != nil {
			return
		}
		var got, want stateItem
		gerr, werr := got.unmarshal(av), attributevalue.UnmarshalMap(av, &want)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("written decoder: %v, the SDK's: %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("written decoder read %+v, the SDK's %+v", got, want)
		}
	})
}

// randomItem is a stateItem with each field set at random, empty or not.
func randomItem(rng *rand.Rand) stateItem {
	str := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return []string{"a", "Processing", `{"x":1}`, "ü", "0"}[rng.IntN(5)]
	}
	num := func() int64 {
		if rng.IntN(3) == 0 {
			return 0
		}
		return rng.Int64N(1<<50) - 1<<20
	}
	b := func() bool { return rng.IntN(2) == 0 }
	it := stateItem{OrderID: str(), Workflow: str(), StepIndex: int(num()), Step: str(), ProcessState: str(), LockedBy: str(),
		CompleteBy: num(), InFlightShard: str(), FailureCount: int(num()), WaitRound: int(num()), Attempt: int(num()),
		LastError: str(), AlertPending: b(), Requeues: int(num()), ClientID: str(), Owner: str(), OwnerID: str(), Priority: str(),
		Trace: str(), EventSeq: int(num()), Cancelled: b(), Resubmits: int(num()), Input: str(), CreatedAt: num(), UpdatedAt: num(),
		ExpiresAt: num(), OpenUntil: num()}
	switch rng.IntN(3) {
	case 0:
	case 1:
		it.Steps = []stepItem{}
	default:
		for range 1 + rng.IntN(4) {
			it.Steps = append(it.Steps, stepItem{Name: str(), State: str(), Attempts: int(num()), Failures: int(num()),
				StartedAt: num(), FinishedAt: num(), Output: str(), Error: str(), Compensation: str(),
				CompensationAttempts: int(num()), CompensationFailures: int(num()), CompensatedAt: num(),
				CompensationOutput: str(), CompensationError: str(), Refused: b(), UndoRefused: b(),
				KeyRound: int(num()), UndoKeyRound: int(num())})
		}
	}
	return it
}

// FuzzTheImageDecoderIsDecodeStates: on any stream image, DecodeImage's
// direct read fails exactly when decoding the image converted to the
// SDK's AttributeValues does, and otherwise reads the same record, which
// DecodeImageHead reads too, but for its steps.
func FuzzTheImageDecoderIsDecodeStates(f *testing.F) {
	for _, s := range []string{
		`{"OrderID":{"S":"o"},"EventSeq":{"N":"3"},"Steps":{"L":[{"M":{"Name":{"S":"a"},"Attempts":{"N":"2"}}}]}}`,
		`{"OrderID":{"N":"12"},"EventSeq":{"S":"3"}}`,
		`{"Steps":{"NULL":true},"Cancelled":{"BOOL":true},"Attempt":{"N":"+3"}}`,
		`{"Steps":{"L":[{"NULL":true},{"S":"x"}]}}`,
		`{"steps":{"L":[]},"orderid":{"S":"o"}}`,
		`{"Steps":{"L":[{"M":{"name":{"S":"a"},"Attempts":{"N":"2"}}}]}}`,
		`{"Steps":{"L":[{"M":{"Name":{"S":"a"},"compensationERROR":{"S":"b"}}}]},"Workflow":{"S":"w"},"orderID":{"S":"p"}}`,
		`{"CompleteBy":{"N":"99999999999999999999"},"Input":{"S":"{}"}}`,
		`{"LockedBy":{"NULL":true},"AlertPending":{"S":"true"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		img, ok := unmarshalImage(b)
		if !ok || len(img) == 0 {
			return
		}
		got, gerr := DecodeImage(img)
		want, werr := decodeConverted(img)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("direct read: %v, converted: %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("direct read %+v, converted %+v", got, want)
		}
		// The head reads every image the whole read reads, the same but
		// for the steps.
		head, herr := DecodeImageHead(img)
		if gerr == nil {
			want.Steps = nil
			if herr != nil || !reflect.DeepEqual(head, want) {
				t.Fatalf("head %+v, %v; the whole read without its steps %+v", head, herr, want)
			}
		}
	})
}
