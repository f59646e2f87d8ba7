package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/jsonstrict"
)

var validRequest = `{"v":1,"kind":"agent.request","orderId":"o-1","step":"charge-payment","stepIndex":1,"attempt":2,` +
	`"completeBy":"2026-11-22T12:00:00Z","idempotencyKey":"o-1/charge-payment","input":{"a":1}}`

func TestDecodeRejectsPoison(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not json":        `{`,
		"array":           `[]`,
		"no version":      `{"kind":"schedule","orderId":"o","stepIndex":0}`,
		"future version":  `{"v":2,"kind":"schedule","orderId":"o","stepIndex":0}`,
		"unknown kind":    `{"v":1,"kind":"launch","orderId":"o","stepIndex":0}`,
		"unknown field":   `{"v":1,"kind":"schedule","orderId":"o","stepIndex":0,"x":1}`,
		"bad order id":    `{"v":1,"kind":"schedule","orderId":"o/../x","stepIndex":0}`,
		"negative step":   `{"v":1,"kind":"schedule","orderId":"o","stepIndex":-1}`,
		"trailing data":   `{"v":1,"kind":"schedule","orderId":"o","stepIndex":0} {}`,
		"invalid utf8":    "{\"v\":1,\"kind\":\"schedule\",\"orderId\":\"\xff\",\"stepIndex\":0}",
		"wrong kind":      strings.Replace(validRequest, "agent.request", "agent.reply", 1),
		"huge":            `{"v":1,"kind":"schedule","orderId":"` + strings.Repeat("a", MaxBodyBytes) + `"}`,
		"wrong type":      `{"v":1,"kind":"schedule","orderId":7,"stepIndex":0}`,
		"fractional step": `{"v":1,"kind":"schedule","orderId":"o","stepIndex":0.5}`,
		"bad workflow":    `{"v":1,"kind":"schedule","orderId":"o","workflow":"order","stepIndex":0}`,
		"workflow v0":     `{"v":1,"kind":"schedule","orderId":"o","workflow":"order-v0","stepIndex":0}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := DecodeSchedule(body); !errors.Is(err, ErrPoison) {
				t.Fatalf("DecodeSchedule(%.60q) error = %v, want ErrPoison", body, err)
			}
		})
	}
}

// TestWorkflowID: a message names its order's version; one sent before
// versions existed names none and means order-v1, the only workflow then.
func TestWorkflowID(t *testing.T) {
	t.Parallel()
	pinned, err := DecodeSchedule(`{"v":1,"kind":"schedule","orderId":"o","workflow":"order-v2","stepIndex":0}`)
	if err != nil || pinned.WorkflowID() != "order-v2" {
		t.Fatalf("pinned: %q, %v", pinned.WorkflowID(), err)
	}
	legacy, err := DecodeSchedule(`{"v":1,"kind":"schedule","orderId":"o","stepIndex":0}`)
	if err != nil || legacy.WorkflowID() != "order-v1" {
		t.Fatalf("legacy: %q, %v", legacy.WorkflowID(), err)
	}
	req, err := DecodeAgentRequest(strings.Replace(validRequest, `"workflow":"order-v1",`, "", 1))
	if err != nil || req.Workflow != "" || req.WorkflowID() != "order-v1" {
		t.Fatalf("legacy request: %q, %v", req.WorkflowID(), err)
	}
	// Written back, a message keeps what it carried: none stays none.
	if got := Encode(legacy); strings.Contains(got, "workflow") {
		t.Fatalf("re-encoded legacy message %s", got)
	}
}

func TestDecodeAgentRequest(t *testing.T) {
	t.Parallel()
	m, err := DecodeAgentRequest(validRequest)
	if err != nil {
		t.Fatal(err)
	}
	if m.OrderID != "o-1" || m.Attempt != 2 || !m.CompleteBy.Equal(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("decoded %+v", m)
	}
	for name, edit := range map[string][2]string{
		"zero attempt":   {`"attempt":2`, `"attempt":0`},
		"no deadline":    {`"completeBy":"2026-11-22T12:00:00Z",`, ``},
		"no key":         {`"idempotencyKey":"o-1/charge-payment"`, `"idempotencyKey":""`},
		"bad step name":  {`"step":"charge-payment"`, `"step":"Charge Payment"`},
		"input not json": {`"input":{"a":1}`, `"input":null`},
	} {
		body := strings.Replace(validRequest, edit[0], edit[1], 1)
		if _, err := DecodeAgentRequest(body); !errors.Is(err, ErrPoison) {
			t.Errorf("%s: error = %v, want ErrPoison", name, err)
		}
	}
}

func TestDecodeAgentReply(t *testing.T) {
	t.Parallel()
	ok := `{"v":1,"kind":"agent.reply","orderId":"o-1","step":"reserve-inventory","stepIndex":0,"attempt":1,"outcome":"succeeded","output":{"id":"r"}}`
	if _, err := DecodeAgentReply(ok); err != nil {
		t.Fatal(err)
	}
	failed := `{"v":1,"kind":"agent.reply","orderId":"o-1","step":"reserve-inventory","stepIndex":0,"attempt":1,"outcome":"failed","fault":{"code":"rejected","message":"no stock"}}`
	if _, err := DecodeAgentReply(failed); err != nil {
		t.Fatal(err)
	}
	uncertain := strings.Replace(failed, `"message":"no stock"`, `"message":"no stock","uncertain":true`, 1)
	if m, err := DecodeAgentReply(uncertain); err != nil || !m.Fault.Uncertain {
		t.Fatalf("uncertain fault decoded as %+v, %v", m.Fault, err)
	}
	for name, body := range map[string]string{
		"failed without fault":  strings.Replace(failed, `,"fault":{"code":"rejected","message":"no stock"}`, ``, 1),
		"success with fault":    strings.Replace(failed, `"outcome":"failed"`, `"outcome":"succeeded"`, 1),
		"unknown outcome":       strings.Replace(ok, `"succeeded"`, `"maybe"`, 1),
		"fault with empty code": strings.Replace(failed, `"code":"rejected"`, `"code":""`, 1),
		"fault code too long":   strings.Replace(failed, `"code":"rejected"`, `"code":"`+strings.Repeat("c", MaxFaultCodeBytes+1)+`"`, 1),
		"fault message too long": strings.Replace(failed, `"message":"no stock"`,
			`"message":"`+strings.Repeat("m", MaxFaultMessageBytes+1)+`"`, 1),
	} {
		if _, err := DecodeAgentReply(body); !errors.Is(err, ErrPoison) {
			t.Errorf("%s: error = %v, want ErrPoison", name, err)
		}
	}
}

// TestBodyCapIsTheSQSLimit: a body up to the SQS message limit (1 MiB)
// decodes, an output past 256 KiB included; one byte more is poison.
func TestBodyCapIsTheSQSLimit(t *testing.T) {
	t.Parallel()
	if MaxBodyBytes != 1<<20 {
		t.Fatalf("MaxBodyBytes = %d, want SQS's 1 MiB", MaxBodyBytes)
	}
	reply := func(outputBytes int) string {
		out := `"` + strings.Repeat("x", outputBytes-2) + `"`
		return Encode(AgentReply{V: Version, Kind: KindAgentReply, OrderID: "o-1", Step: "charge-payment", StepIndex: 1, Attempt: 2,
			Outcome: Succeeded, Output: json.RawMessage(out)})
	}
	if m, err := DecodeAgentReply(reply(300 << 10)); err != nil || len(m.Output) != 300<<10 {
		t.Fatalf("a reply with a 300 KiB output: %d bytes of output, %v", len(m.Output), err)
	}
	atCap := reply(1 << 10)
	atCap = reply(1<<10 + MaxBodyBytes - len(atCap))
	if len(atCap) != MaxBodyBytes {
		t.Fatalf("built a body of %d bytes, want %d", len(atCap), MaxBodyBytes)
	}
	if _, err := DecodeAgentReply(atCap); err != nil {
		t.Fatalf("a reply of exactly %d bytes: %v", MaxBodyBytes, err)
	}
	over := strings.Replace(atCap, `"output":"`, `"output":"x`, 1)
	if _, err := DecodeAgentReply(over); !errors.Is(err, ErrPoison) || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("a reply of %d bytes: error %v, want ErrPoison for its size", len(over), err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := NewSchedule("o-9", "order-v1", 1, "retry")
	got, err := DecodeSchedule(Encode(s))
	if err != nil || got != s {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, s)
	}
}

// TestEncodeWritesOutputsAsTheyCame: an output (or any text from outside)
// is written without HTML escaping, so a message carries the bytes its size
// was checked at, and decodes back to them.
func TestEncodeWritesOutputsAsTheyCame(t *testing.T) {
	t.Parallel()
	for _, out := range []string{
		`{"html":"<b class='x'>&amp;</b>","cmp":"a<b>c"}`,
		"{\"text\":\"é€😀\u2028\u2029\"}",
	} {
		r := AgentReply{V: Version, Kind: KindAgentReply, OrderID: "o-1", Step: "charge-payment", StepIndex: 1, Attempt: 2,
			Outcome: Succeeded, Output: json.RawMessage(out)}
		body := Encode(r)
		if !strings.Contains(body, `"output":`+out+`}`) {
			t.Errorf("Encode wrote %s, want the output %s as it is", body, out)
		}
		got, err := DecodeAgentReply(body)
		if err != nil || string(got.Output) != out {
			t.Errorf("decoded output %s, %v; want %s", got.Output, err, out)
		}
	}
	// A fault's message is outside text too.
	f := AgentReply{V: Version, Kind: KindAgentReply, OrderID: "o-1", Step: "charge-payment", StepIndex: 1, Attempt: 2,
		Outcome: Failed, Fault: &Fault{Code: "rejected", Message: "<b>sold out</b> & gone"}}
	if body := Encode(f); !strings.Contains(body, `"message":"<b>sold out</b> & gone"`) {
		t.Errorf("Encode wrote %s", body)
	}
}

// The testdata files are the seed corpus of the fuzzers and must decode as
// their names say.
func TestTestdata(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeAny(string(b))
		if wantOK := strings.HasPrefix(filepath.Base(f), "valid-"); wantOK != (err == nil) {
			t.Errorf("%s: err = %v", f, err)
		}
	}
}

func decodeAny(body string) (any, error) {
	kind, err := Peek(body)
	if err != nil {
		return nil, err
	}
	switch kind {
	case KindSchedule:
		return DecodeSchedule(body)
	case KindAgentRequest:
		return DecodeAgentRequest(body)
	case KindDeadline:
		return DecodeDeadline(body)
	default:
		return DecodeAgentReply(body)
	}
}

// FuzzDecode checks that no body panics a decoder, that every error is
// ErrPoison, and that whatever decodes re-encodes to something that decodes
// to the same message.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(string(b))
	}
	f.Add(validRequest)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := decodeAny(body)
		if err != nil {
			if !errors.Is(err, ErrPoison) {
				t.Fatalf("error %v is not ErrPoison", err)
			}
			return
		}
		encoded := Encode(m)
		again, err := decodeAny(encoded)
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v", m, err)
		}
		// Compared as encoded: Encode writes U+FFFE and U+FFFF as escapes,
		// which mean the same.
		if twice := Encode(again); twice != encoded {
			t.Fatalf("round trip changed %s into %s", encoded, twice)
		}
	})
}

// peekThenDecode is how a message was decoded before the header came from
// the message itself: Peek, the kind compared, then the strict decode.
func peekThenDecode[M message](body string, want Kind) (M, error) {
	var m, zero M
	kind, err := Peek(body)
	if err != nil {
		return zero, err
	}
	if kind != want {
		return zero, poison("kind %q where %q was expected", kind, want)
	}
	if err := jsonstrict.Decode([]byte(body), &m); err != nil {
		return zero, poison("%s: %v", want, err)
	}
	if err := m.validate(); err != nil {
		return zero, err
	}
	return m, nil
}

// FuzzOneParseDecodesAsPeekingFirst: decoding a body once, its header read
// from the message, answers every body as Peek first and the strict decode
// after did: the same message, or the same error.
func FuzzOneParseDecodesAsPeekingFirst(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(string(b))
	}
	for _, s := range []string{validRequest, `null`, `{"v":1,"kind":"deadline","orderId":"o"}`, `{"v":1,"kind":"schedule","orderId":"o","stepIndex":0} x`,
		`{"V":1,"KIND":"schedule","orderId":"o","stepIndex":0}`, `{"v":1,"kind":"schedule","kind":"deadline","orderId":"o"}`, `{"v":1.5,"kind":"schedule"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		same(t, body, KindSchedule, DecodeSchedule, peekThenDecode[Schedule])
		same(t, body, KindAgentRequest, DecodeAgentRequest, peekThenDecode[AgentRequest])
		same(t, body, KindAgentReply, DecodeAgentReply, peekThenDecode[AgentReply])
		same(t, body, KindDeadline, DecodeDeadline, peekThenDecode[Deadline])
	})
}

func same[M message](t *testing.T, body string, kind Kind, decode func(string) (M, error), before func(string, Kind) (M, error)) {
	t.Helper()
	got, gerr := decode(body)
	want, werr := before(body, kind)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s of %q: %+v, %v; peeking first: %+v, %v", kind, body, got, gerr, want, werr)
	}
}
