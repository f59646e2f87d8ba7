package dlq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/message"
)

func TestDecodeBody(t *testing.T) {
	t.Parallel()
	const id = "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90"
	for _, tc := range []struct {
		name, body string
		want       Body
		summary    string
	}{
		{"reply", `{"v":1,"kind":"agent.reply","orderId":"` + id + `","step":"reserve-inventory","stepIndex":0,"attempt":2,"outcome":"succeeded","output":{"secret":"x"}}`,
			Body{Kind: message.KindAgentReply, OrderID: id, Step: "reserve-inventory", Attempt: 2, Outcome: message.Succeeded}, "succeeded"},
		{"failed undo", `{"v":1,"kind":"agent.reply","orderId":"` + id + `","step":"charge-payment","stepIndex":1,"attempt":5,"action":"compensate","outcome":"failed","fault":{"code":"declined","message":"no"}}`,
			Body{Kind: message.KindAgentReply, OrderID: id, Step: "charge-payment", StepIndex: 1, Attempt: 5, Action: message.Compensate, Outcome: message.Failed, FaultCode: "declined"}, "compensate, failed (declined)"},
		{"schedule", `{"v":1,"kind":"schedule","orderId":"` + id + `","stepIndex":1,"compensate":true,"reason":"retry"}`,
			Body{Kind: message.KindSchedule, OrderID: id, StepIndex: 1, Action: message.Compensate, Reason: "retry"}, "compensate, reason retry"},
		{"deadline", `{"v":1,"kind":"deadline","orderId":"` + id + `","stepIndex":0,"attempt":3,"completeBy":"2026-01-02T03:04:05Z"}`,
			Body{Kind: message.KindDeadline, OrderID: id, Attempt: 3}, ""},
		{"request", `{"v":1,"kind":"agent.request","orderId":"` + id + `","step":"reserve-inventory","stepIndex":0,"attempt":1,"action":"perform","completeBy":"2026-01-02T03:04:05Z","idempotencyKey":"k","input":{"customerId":"c-1"}}`,
			Body{Kind: message.KindAgentRequest, OrderID: id, Step: "reserve-inventory", Attempt: 1}, ""},
		{"not JSON", "hello\nworld", Body{Poison: "poison message: not a JSON object: invalid character 'h' looking for beginning of value"}, "poison: poison message: not a JSON object: invalid character 'h' looking for beginning of value"},
		{"unknown version", `{"v":99}`, Body{Poison: "poison message: unknown version 99"}, "poison: poison message: unknown version 99"},
		{"known kind, bad fields", `{"v":1,"kind":"schedule","orderId":"a b","stepIndex":0}`, Body{Kind: message.KindSchedule}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := DecodeBody(tc.body)
			if tc.name == "known kind, bad fields" {
				if got.Kind != message.KindSchedule || got.OrderID != "" || !strings.HasPrefix(got.Poison, "poison message") {
					t.Fatalf("DecodeBody = %+v", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("DecodeBody = %+v\nwant %+v", got, tc.want)
			}
			if s := got.Summary(); s != tc.summary {
				t.Errorf("Summary = %q, want %q", s, tc.summary)
			}
		})
	}
}

func TestDecodeBodySamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../shared/message/testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got := DecodeBody(string(b))
		valid := strings.HasPrefix(filepath.Base(file), "valid-")
		if valid != (got.Poison == "") || valid && (got.OrderID == "" || got.Kind == "") {
			t.Errorf("%s: %+v", file, got)
		}
	}
}

func TestMessageReason(t *testing.T) {
	t.Parallel()
	m := Message{ReceiveCount: 6}
	if got := m.Reason(5); got != "not processed in 5 receives (received 6 times, peeks included)" {
		t.Errorf("Reason = %q", got)
	}
	if got := m.Reason(0); got != "not processed (received 6 times, peeks included)" {
		t.Errorf("Reason without a policy = %q", got)
	}
	m.Body.Poison = "poison message: unknown version 2"
	if got := m.Reason(5); got != "poison: no consumer can read it (poison message: unknown version 2)" {
		t.Errorf("Reason of poison = %q", got)
	}
}

// FuzzDecodeBody: a DLQ holds anything at all. Decoding never panics, says
// poison or names an order, and quotes at most a bounded line of valid
// UTF-8.
func FuzzDecodeBody(f *testing.F) {
	files, _ := filepath.Glob("../../shared/message/testdata/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(string(b))
	}
	f.Add(`{"v":99}`)
	f.Add("\xff\xfe")
	f.Add(`{"v":1,"kind":"schedule","orderId":"a\u202eb","stepIndex":0}`)
	f.Add(strings.Repeat("x", message.MaxBodyBytes+1))
	f.Fuzz(func(t *testing.T, body string) {
		b := DecodeBody(body)
		if (b.Poison == "") == (b.OrderID == "") {
			t.Fatalf("neither poison nor an order, or both: %+v", b)
		}
		if !utf8.ValidString(b.Poison) || utf8.RuneCountInString(b.Poison) > maxPoisonText || strings.ContainsAny(b.Poison, "\n\r\t") {
			t.Fatalf("poison text %q", b.Poison)
		}
		if b.OrderID != "" && !message.ValidOrderID(b.OrderID) {
			t.Fatalf("order ID %q", b.OrderID)
		}
	})
}
