package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/step"
)

// FuzzDecodeResponse feeds arbitrary remote answers to the decoder: it must
// never panic, return only compact JSON in UTF-8 that SQS carries as output,
// classify by status and code, and produce a fault that fits a reply.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(200, "", []byte(`{"confirmation":"x"}`), false)
	f.Add(204, "", []byte(``), false)
	f.Add(200, "", []byte(`<html>`), false)
	f.Add(200, "", []byte(`{"a":`), true)
	f.Add(422, "", []byte(`{"code":"rejected","message":"no"}`), false)
	f.Add(400, "", []byte(`{"type":"about:blank","title":"Bad","detail":"d"}`), false)
	f.Add(409, "", []byte(`{"code":409,"message":["x"]}`), false)
	f.Add(409, "2", []byte(`{"code":"in_progress","message":"busy"}`), false)
	f.Add(409, "", []byte(`{"type":"in_progress","title":"Conflict"}`), false)
	f.Add(409, "", []byte(`{"code":"compensated","message":"undone"}`), false)
	f.Add(200, "", []byte("{\"a\":\"\xff\"}"), false)
	f.Add(200, "", []byte("{\"a\":\"\uffff<&>\u2028\"}"), false)
	f.Add(503, "120", []byte(`{"code":"unavailable"}`), false)
	f.Add(429, "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`slow down`), false)
	f.Add(500, "-5", []byte("\xff\xfe"), false)
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte, truncated bool) {
		out, err := decodeResponse(status, retryAfter, body, truncated)
		ok2xx := status >= 200 && status < 300
		if err == nil {
			if !ok2xx {
				t.Fatalf("status %d succeeded", status)
			}
			if len(out) > 0 && (!json.Valid(out) || !utf8.Valid(out)) {
				t.Fatalf("output %q is not JSON in UTF-8", out)
			}
			if again, err := jsonwire.Compact(out); len(out) > 0 && (err != nil || !bytes.Equal(again, out)) {
				t.Fatalf("output %q is not as it travels: %q, %v", out, again, err)
			}
			return
		}
		if out != nil {
			t.Errorf("output %q alongside error %v", out, err)
		}
		if !ok2xx {
			var re *RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("status %d: %v is not a RemoteError", status, err)
			}
			if step.IsPermanent(err) == Transient(status, re.Code) {
				t.Errorf("status %d code %q: permanent=%v", status, re.Code, step.IsPermanent(err))
			}
		}
		if d, _ := RetryAfter(err); d < 0 || d > maxWait {
			t.Errorf("RetryAfter %v out of range", d)
		}
		fault := FaultOf(err)
		if fault.Code == "" || len(fault.Code) > maxCodeBytes || len(fault.Message) > maxMessageBytes ||
			!utf8.ValidString(fault.Code) || !utf8.ValidString(fault.Message) {
			t.Errorf("fault %+v does not fit a reply", fault)
		}
	})
}
