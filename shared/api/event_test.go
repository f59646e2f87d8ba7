package api_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

var at = time.Date(2026, 11, 22, 9, 41, 5, 120_000_000, time.UTC)

func event(status workflow.Status, ps workflow.ProcessState, seq int) api.Event {
	return api.Event{
		V: api.EventVersion, Kind: "order.event", OrderID: "o-1", ClientID: "client-a", Seq: seq, Status: status, State: ps,
		Priority: workflow.PriorityNormal, Step: "charge-payment", StepIndex: 1, At: at,
	}
}

func TestEventValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		change  func(*api.Event)
		wantErr string // "" for a valid event
	}{
		{"valid", func(*api.Event) {}, ""},
		{"version", func(e *api.Event) { e.V = 2 }, "version 2, want 3"},
		{"high", func(e *api.Event) { e.Priority = workflow.PriorityHigh }, ""},
		{"no priority", func(e *api.Event) { e.Priority = "" }, `unknown priority ""`},
		{"unknown priority", func(e *api.Event) { e.Priority = "urgent" }, `unknown priority "urgent"`},
		{"kind", func(e *api.Event) { e.Kind = "order.alert" }, `kind "order.alert"`},
		{"no order", func(e *api.Event) { e.OrderID = "" }, "orderId: empty"},
		{"no client", func(e *api.Event) { e.ClientID = "" }, "clientId: empty"},
		{"client not UTF-8", func(e *api.Event) { e.ClientID = "a\xff" }, "clientId: not valid UTF-8"},
		{"client with a newline", func(e *api.Event) { e.ClientID = "a\nb" }, "clientId: holds a control character"},
		{"seq 0", func(e *api.Event) { e.Seq = 0 }, "seq 0"},
		{"unknown state", func(e *api.Event) { e.State = "Lost" }, `unknown state "Lost"`},
		{"unknown status", func(e *api.Event) { e.Status = "unknown" }, `unknown status "unknown"`},
		{"status not the state's", func(e *api.Event) { e.Status = workflow.StatusProcessed }, `status "processed" does not match state "Processing" at seq 2`},
		{"waiting", func(e *api.Event) {
			e.State, e.Status, e.Reason, e.ReasonText = workflow.Waiting, workflow.StatusWaiting, "timed-out", "step charge-payment did not answer in time"
		}, ""},
		{"waiting told as processing", func(e *api.Event) { e.State = workflow.Waiting }, `status "processing" does not match state "Waiting" at seq 2`},
		{"negative step", func(e *api.Event) { e.StepIndex = -1 }, "stepIndex -1"},
		{"year JSON cannot write", func(e *api.Event) { e.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "year outside"},
		{"a reason", func(e *api.Event) { e.Reason, e.ReasonText = "dispatch-failed", "step b could not be sent" }, ""},
		{"a reason this build does not know", func(e *api.Event) { e.Reason, e.ReasonText = "no-undo", "step x may have been applied" }, ""},
		{"a reason without its text", func(e *api.Event) { e.Reason = "failed" }, "come together"},
		{"a text without its reason", func(e *api.Event) { e.ReasonText = "failed" }, "come together"},
		{"a reason that is not a code", func(e *api.Event) { e.Reason, e.ReasonText = "Access Denied", "x" }, `reason "Access Denied" is not a reason code`},
		{"a reason text too long", func(e *api.Event) { e.Reason, e.ReasonText = "failed", strings.Repeat("x", 513) }, "reasonText of 513 bytes exceeds 512"},
		{"a reason text with a newline", func(e *api.Event) { e.Reason, e.ReasonText = "failed", "a\nb" }, "reasonText: holds a control character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := event(workflow.StatusProcessing, workflow.Processing, 2)
			tc.change(&e)
			err := e.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// envelope wraps a message as SNS does for a subscription without raw
// delivery.
func envelope(t testing.TB, msg string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"Type": "Notification", "MessageId": "9f1c2b3a-1111-2222-3333-444455556666",
		"TopicArn": "arn:aws:sns:us-east-1:000000000000:order-events", "Subject": nil, "Message": msg,
		"Timestamp": "2026-11-22T09:41:06.700Z", "SignatureVersion": "1", "Signature": "EXAMPLE",
		"SigningCertURL": "https://sns.us-east-1.amazonaws.com/x.pem", "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
		"MessageAttributes": map[string]any{"clientId": map[string]string{"Type": "String", "Value": "client-a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecodeEvent(t *testing.T) {
	t.Parallel()
	want := event(workflow.StatusError, workflow.Error, 3)
	want.Reason, want.ReasonText, want.Cancelled = workflow.ReasonRejected, "step charge-payment was refused by its service (card-declined)", true
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(b)
	tests := []struct {
		name    string
		body    string
		wantErr string // "" to expect want
	}{
		{"raw delivery", raw, ""},
		{"SNS envelope", envelope(t, raw), ""},
		{"surrounding space", "\n " + raw + "\n", ""},
		{"unknown field", strings.Replace(raw, `"v":3`, `"v":3,"extra":true`, 1), `unknown field "extra"`},
		{"version 3 with version 1's lastError", strings.Replace(raw, `"v":3`, `"v":3,"lastError":"x"`, 1), `unknown field "lastError"`},
		{"version 2 with version 3's priority", strings.Replace(raw, `"v":3`, `"v":2`, 1), `unknown field "priority"`},
		{"data after", raw + "{}", "data after the event"},
		{"not an object", `[1,2]`, "not a JSON object"},
		{"empty", ``, "not a JSON object"},
		{"null", `null`, "invalid order event"},
		{"wrong version", strings.Replace(raw, `"v":3`, `"v":4`, 1), "version 4"},
		{"version 1 with version 2's reason", strings.Replace(strings.Replace(raw, `"v":3`, `"v":1`, 1), `"priority":"normal",`, "", 1), `unknown field "reason"`},
		{"wrong status", strings.Replace(raw, `"status":"error"`, `"status":"processed"`, 1), "does not match"},
		{"missing client", strings.Replace(raw, `"clientId":"client-a"`, `"clientId":""`, 1), "clientId: empty"},
		{"envelope of another type", strings.Replace(envelope(t, raw), `"Type":"Notification"`, `"Type":"SubscriptionConfirmation"`, 1), `Type "SubscriptionConfirmation"`},
		{"envelope without message", `{"Type":"Notification"}`, "without a Message"},
		{"envelope message not a string", `{"Type":"Notification","Message":{"v":1}}`, "not a string"},
		{"envelope in an envelope", envelope(t, envelope(t, raw)), `unknown field`},
		{"data after the envelope", envelope(t, raw) + " 1", "data after the SNS envelope"},
		{"envelope with bad JSON inside", envelope(t, raw[:20]), "decode order event"},
		{"too large", raw + strings.Repeat(" ", api.MaxDocumentBytes), "exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := api.DecodeEvent(tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DecodeEvent = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeEvent =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestDecodeEventVersion2: a client that takes up this package before the
// Notifier writes version 3 still reads version 2, the golden
// event.v2.json, as version 3 of the normal class, the only one there was.
func TestDecodeEventVersion2(t *testing.T) {
	t.Parallel()
	v2 := string(golden(t, "event.v2.json"))
	want := api.Event{V: 3, Kind: "order.event", OrderID: "9b2f0c1e-5d7a-4c3b-8e6f-0a1b2c3d4e5f", ClientID: "shop-web", Seq: 3,
		Status: workflow.StatusCompensating, Priority: workflow.PriorityNormal, State: workflow.CompensationPending, Step: "charge-payment", StepIndex: 1,
		Reason: workflow.ReasonRejected, ReasonText: "step charge-payment was refused by its service (card-declined)", Cancelled: true, At: at}
	for _, body := range []string{v2, envelope(t, v2)} {
		got, err := api.DecodeEvent(body)
		if err != nil || !sameEvent(got, want) {
			t.Fatalf("DecodeEvent(version 2) = %+v, %v; want %+v", got, err, want)
		}
	}
}

// TestDecodeEventVersion1: a client that takes up this package before the
// Notifier writes version 2 still reads version 1, the golden
// event.v1.json, as the current version: its lastError, the failure's whole text,
// becomes the reason a record's LastError gives (workflow.ReasonOf); as an
// event has no step history, a refusal names no step.
func TestDecodeEventVersion1(t *testing.T) {
	t.Parallel()
	v1 := string(golden(t, "event.v1.json"))
	want := api.Event{V: 3, Kind: "order.event", OrderID: "9b2f0c1e-5d7a-4c3b-8e6f-0a1b2c3d4e5f", ClientID: "shop-web", Seq: 3,
		Status: workflow.StatusCompensating, Priority: workflow.PriorityNormal, State: workflow.CompensationPending, Step: "charge-payment", StepIndex: 1,
		Reason: workflow.ReasonRejected, ReasonText: "a step was refused by its service (payment)", Cancelled: true, At: at}
	for _, body := range []string{v1, envelope(t, v1)} {
		got, err := api.DecodeEvent(body)
		if err != nil || !sameEvent(got, want) {
			t.Fatalf("DecodeEvent(version 1) = %+v, %v; want %+v", got, err, want)
		}
	}
	leaky := strings.Replace(v1, `"payment: 422 card declined"`,
		`"dispatch of step charge-payment attempt 4 failed: send to https://sqs.eu-west-1.amazonaws.com/444455556666/q: AccessDenied: User: arn:aws:sts::444455556666:assumed-role/r/s"`, 1)
	got, err := api.DecodeEvent(leaky)
	if err != nil || got.Reason != workflow.ReasonDispatchFailed || got.ReasonText != "step charge-payment could not be sent for processing" {
		t.Fatalf("DecodeEvent(version 1 with a dispatch failure) = %+v, %v", got, err)
	}
}

// FuzzDecodeEvent: a client's queue body is outside input. DecodeEvent must
// not panic, and what it accepts must be a valid event that survives being
// written and read again, raw or in an envelope.
func FuzzDecodeEvent(f *testing.F) {
	valid := event(workflow.StatusProcessing, workflow.Processing, 2)
	b, err := json.Marshal(valid)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(b),
		string(golden(f, "event.json")),
		string(golden(f, "event.v1.json")),
		string(golden(f, "event.v2.json")),
		envelope(f, string(b)),
		`{"Type":"Notification","Message":"{\"v\":1}"}`,
		`{"v":1,"kind":"order.event","orderId":"o","clientId":"c","seq":1,"status":"accepted","state":"Pending","step":"","stepIndex":0,"at":"0001-01-01T00:00:00Z"}`,
		`{"V":1,"KIND":"order.event","orderId":"o","clientId":"c","seq":1,"status":"accepted","state":"Pending","at":"2026-01-01T00:00:00+23:59"}`,
		`{"Type":null}`,
		`{"Message":"x"}`,
		`"just a string"`,
		`{"v":1e400}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ev, err := api.DecodeEvent(body)
		if err != nil {
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("DecodeEvent accepted an invalid event: %v\nbody: %q", err, body)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v\nbody: %q", err, body)
		}
		for _, again := range []string{string(b), envelope(t, string(b))} {
			got, err := api.DecodeEvent(again)
			if err != nil {
				t.Fatalf("re-encoded event does not decode: %v\nbody: %q\nre-encoded: %s", err, body, again)
			}
			if !sameEvent(got, ev) {
				t.Fatalf("event changed through JSON:\n got %+v\nwant %+v", got, ev)
			}
		}
	})
}

// sameEvent compares events, At as an instant: JSON keeps the offset but
// not the time.Location behind it.
func sameEvent(a, b api.Event) bool {
	if !a.At.Equal(b.At) {
		return false
	}
	a.At, b.At = time.Time{}, time.Time{}
	return a == b
}
