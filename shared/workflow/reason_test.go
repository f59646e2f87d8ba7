package workflow

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// leak is the kind of text a failure's cause may quote: what SQS answers a
// role that lost its permission, with the queue's URL around it. No part of
// it may reach a client.
const leak = "send to https://sqs.eu-west-1.amazonaws.com/444455556666/agent-a: operation error SQS: SendMessage, " +
	"api error AccessDenied: User: arn:aws:sts::444455556666:assumed-role/sched/s is not authorized to perform: sqs:sendmessage"

// checkReason fails unless r is made only of our words: a row's text with
// its subject (step, as "step <step>" when it has the shape of a name, and
// "the undo of" before it for an undo) and, for a refusal, a safe fault
// code taken from msg.
func checkReason(t *testing.T, r Reason, msg, step string, undo bool) {
	t.Helper()
	if len(r.Text) > 256 || !utf8.ValidString(r.Text) {
		t.Fatalf("reason text of %d bytes (valid UTF-8: %v)", len(r.Text), utf8.ValidString(r.Text))
	}
	subject := "a step"
	if stepName.MatchString(step) {
		subject = "step " + step
	}
	if undo {
		subject = "the undo of " + subject
	}
	for _, row := range reasons {
		if row.code != r.Code {
			continue
		}
		text := strings.Replace(row.text, "%s", subject, 1)
		if r.Text == text {
			return
		}
		fault, ok := strings.CutPrefix(r.Text, text+" (")
		fault, closed := strings.CutSuffix(fault, ")")
		if ok && closed && row.kind == kindRejected && safeFault.MatchString(fault) && strings.Contains(msg, fault) {
			return
		}
	}
	t.Fatalf("reason %+v of %q (step %q, undo %v) is not one of the table's texts", r, msg, step, undo)
}

// The producers of the texts a record keeps, as the actors raise them.
func rejectedWith(msg string) func(State) Change {
	return func(s State) Change {
		return machineOf().StepRejected(s.OrderID, s.StepIndex, s.Attempt, msg, false, "sched", s.UpdatedAt.Add(time.Second))
	}
}
func undoRejectedWith(msg string) func(State) Change {
	return func(s State) Change {
		return machineOf().UndoRejected(s.OrderID, s.StepIndex, s.Attempt, UndoRejectedPrefix+msg, false, State{}, s.UpdatedAt.Add(time.Second))
	}
}
func dispatchRefused(s State) Change {
	return machineOf().DispatchFailed(s, s.UpdatedAt.Add(time.Second), leak)
}
func stranded(s State) Change {
	c, ok := Machine{Policy: testPol}.Stranded(s, s.CompleteBy)
	if !ok {
		panic("not stranded")
	}
	return c
}

// TestReasonOfEveryProducer feeds the text of every producer, in the record
// it writes, to ReasonOf: each gets its code and a text of our own words,
// whatever the cause quoted. A new producer is added here with the code it
// must get, and fails until reasons has its row.
func TestReasonOfEveryProducer(t *testing.T) {
	t.Parallel()
	refused := RejectionMessage("card-declined", leak, false)
	tests := []struct {
		name   string
		events []func(State) Change
		code   ReasonCode
		text   string
	}{
		{"a step its service refused", []func(State) Change{claim, rejectedWith(refused)},
			ReasonRejected, "step a was refused by its service (card-declined)"},
		{"a refusal after an ambiguous try, under a code that is a URI", []func(State) Change{claim, rejectedWith(RejectionMessage("https://example.com/probs/out-of-credit", leak, true))},
			ReasonRejected, "step a was refused by its service"},
		{"a refusal under a number, which could be an account ID", []func(State) Change{claim, rejectedWith(RejectionMessage("444455556666", leak, false))},
			ReasonRejected, "step a was refused by its service"},
		{"an undo its service refused", []func(State) Change{claim, rejectedWith(refused), undoRejectedWith(RejectionMessage("refund-closed", leak, false))},
			ReasonUndoRejected, "the undo of step a was refused by its service (refund-closed)"},
		{"a result over its limit", []func(State) Change{claim, rejectedWith(RejectionMessage("output_too_large", OutputTooLarge("a", 10, 5), true))},
			ReasonOutputInvalid, "the result of step a could not be used"},
		{"a result that is not JSON", []func(State) Change{claim, rejectedWith(RejectionMessage("invalid_output", "the step's output is not JSON", true))},
			ReasonOutputInvalid, "the result of step a could not be used"},
		{"a timeout, retried", []func(State) Change{claim, expired},
			ReasonTimedOut, "step a did not complete in time"},
		{"the last timeout", []func(State) Change{claim, expired, claim, expired, claim, expired},
			ReasonTimedOut, "step a did not complete in time"},
		{"an undo's timeout, retried", []func(State) Change{claim, rejectedWith(refused), expired},
			ReasonUndoTimedOut, "the undo of step a did not complete in time"},
		{"an undo's last timeout", []func(State) Change{claim, rejectedWith(refused), expired, claim, expired, claim, expired},
			ReasonUndoTimedOut, "the undo of step a did not complete in time"},
		{"a failed dispatch, retried", []func(State) Change{claim, dispatchRefused},
			ReasonDispatchFailed, "step a could not be sent for processing"},
		{"the last failed dispatch", []func(State) Change{claim, dispatchRefused, claim, dispatchRefused, claim, dispatchRefused},
			ReasonDispatchFailed, "step a could not be sent for processing"},
		{"a failed dispatch of an earlier step the order got past", []func(State) Change{claim, dispatchRefused, claim, done},
			ReasonDispatchFailed, "step a could not be sent for processing"},
		{"an undo's failed dispatch", []func(State) Change{claim, rejectedWith(refused), dispatchRefused},
			ReasonUndoDispatchFailed, "the undo of step a could not be sent for processing"},
		{"a workflow version no longer deployed", []func(State) Change{claim, stranded},
			ReasonWorkflowMissing, "the order's workflow version is not deployed; it stopped at step a"},
		{"an undo stranded", []func(State) Change{claim, rejectedWith(refused), stranded},
			ReasonWorkflowMissing, "the order's workflow version is not deployed; it stopped at the undo of step a"},
		{"a cancel", []func(State) Change{claim, cancelled},
			ReasonCancelled, "the order was cancelled at step a"},
		{"a step without an undo that may have been applied", []func(State) Change{claim, done, uncertainlyRejected},
			ReasonNotUndoable, "step b may have been applied and has no undo, so the order cannot be undone whole"},
		{"a cancel while a step without an undo runs", []func(State) Change{claim, done, cancelled},
			ReasonNotUndoable, "step b may have been applied and has no undo, so the order cannot be undone whole"},
	}
	seen := map[ReasonCode]bool{}
	for _, tc := range tests {
		seen[tc.code] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := record(t, tc.events...)
			got := ReasonOf(s)
			if got.Code != tc.code || got.Text != tc.text {
				t.Fatalf("ReasonOf(%s, %q) = %+v, want %s %q", s.ProcessState, s.LastError, got, tc.code, tc.text)
			}
			if strings.Contains(got.Text, "444455556666") || strings.Contains(got.Text, "arn:") {
				t.Fatalf("reason %q quotes the cause", got.Text)
			}
			// A step that stopped on it gives it in its history too.
			for _, r := range s.Steps {
				step, undo := StepReasons(r)
				if r.Error == s.LastError && step != got || r.CompensationError == s.LastError && undo != got {
					t.Errorf("step %s: reasons %+v, %+v; the order's is %+v", r.Name, step, undo, got)
				}
			}
		})
	}
	for _, c := range ReasonCodes() {
		if !seen[c] && c != ReasonFailed {
			t.Errorf("no producer gives reason %s", c)
		}
	}
}

// TestReasonOfAListedRecord: a listing reads records without their step
// history. The step is named only where the text names it, or where the
// record still stands on the step it stopped on.
func TestReasonOfAListedRecord(t *testing.T) {
	t.Parallel()
	refused := RejectionMessage("card-declined", leak, false)
	for _, tc := range []struct {
		state     ProcessState
		step, msg string
		code      ReasonCode
		text      string
	}{
		{Error, "b", refused, ReasonRejected, "step b was refused by its service (card-declined)"},
		{Cancelled, "b", refused, ReasonRejected, "step b was refused by its service (card-declined)"},
		{Compensating, "a", refused, ReasonRejected, "a step was refused by its service (card-declined)"},
		{Compensated, "a", refused, ReasonRejected, "a step was refused by its service (card-declined)"},
		{CompensationFailed, "a", UndoRejectedPrefix + refused, ReasonUndoRejected, "the undo of step a was refused by its service (card-declined)"},
		{Compensated, "a", "dispatch of step b attempt 3 failed: " + leak, ReasonDispatchFailed, "step b could not be sent for processing"},
		{Compensated, "a", "step a attempt 5 did not complete by 2026-11-22T12:00:00Z", ReasonUndoTimedOut, "the undo of step a did not complete in time"},
		{Processed, "c", "step a attempt 1 did not complete by 2026-11-22T12:00:00Z", ReasonTimedOut, "step a did not complete in time"},
		{Cancelled, "a", "cancelled at step b", ReasonCancelled, "the order was cancelled at step b"},
	} {
		got := ReasonOf(State{ProcessState: tc.state, Step: tc.step, LastError: tc.msg})
		if got.Code != tc.code || got.Text != tc.text {
			t.Errorf("ReasonOf(%s at %s, %q) = %+v, want %s %q", tc.state, tc.step, tc.msg, got, tc.code, tc.text)
		}
	}
}

func TestReasonOfNoFailure(t *testing.T) {
	t.Parallel()
	if r := ReasonOf(record(t, claim, done)); r != (Reason{}) {
		t.Fatalf("ReasonOf of an order without a failure = %+v", r)
	}
	if s, u := StepReasons(StepRecord{Name: "a"}); s != (Reason{}) || u != (Reason{}) {
		t.Fatalf("StepReasons of a step without a failure = %+v, %+v", s, u)
	}
}

// TestReasonOfStoredTexts: records keep their texts for the retention, so
// what older builds wrote, and what no producer writes, is classified too.
func TestReasonOfStoredTexts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg  string
		undo bool
		code ReasonCode
		text string
	}{
		{"card-declined: the issuer declined the card", false, ReasonRejected, "step charge-payment was refused by its service (card-declined)"},
		{"http_422: Unprocessable Entity (outcome uncertain: the remote may have applied it)", false, ReasonRejected, "step charge-payment was refused by its service (http_422)"},
		{"permanent: Post \"https://10.0.3.7/charge\": x509: certificate signed by unknown authority", false, ReasonRejected, "step charge-payment was refused by its service (permanent)"},
		{"compensation not_compensable: the service cannot undo", true, ReasonUndoRejected, "the undo of step charge-payment was refused by its service (not_compensable)"},
		{"compensation http_409: Conflict", true, ReasonUndoRejected, "the undo of step charge-payment was refused by its service (http_409)"},
		{"output_too_large: the reply of 1100000 bytes exceeds 1048576 (outcome uncertain: the remote may have applied it)", false, ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{"response_too_large: response exceeds 1048576 bytes", false, ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{"bad_response: response is not JSON", false, ReasonOutputInvalid, "the result of step charge-payment could not be used"},
		{"step charge-payment attempt 3 did not complete by 2025-02-04T10:15:30Z", false, ReasonTimedOut, "step charge-payment did not complete in time"},
		{"step charge-payment attempt 5 did not complete by 2025-02-04T10:15:30Z", true, ReasonUndoTimedOut, "the undo of step charge-payment did not complete in time"},
		{"dispatch of step charge-payment attempt 2 failed: " + leak, false, ReasonDispatchFailed, "step charge-payment could not be sent for processing"},
		{"dispatch of compensation of step charge-payment attempt 5 failed: " + leak, true, ReasonUndoDispatchFailed, "the undo of step charge-payment could not be sent for processing"},
		{"cancelled at step charge-payment", false, ReasonCancelled, "the order was cancelled at step charge-payment"},
		{StrandedPrefix + "order-v1: the order stopped at step charge-payment; deploy order-v1 again (shared/catalog/workflows.json), then resubmit it", false,
			ReasonWorkflowMissing, "the order's workflow version is not deployed; it stopped at step charge-payment"},
		{"https://example.com/probs/out-of-credit: You do not have enough credit.", false, ReasonRejected, "step charge-payment was refused by its service"},
		{"Card Declined: the issuer said no", false, ReasonRejected, "step charge-payment was refused by its service"},
		{"the payment gateway is down", false, ReasonFailed, "step charge-payment failed"},
		{"undo of charge-payment went wrong", true, ReasonFailed, "the undo of step charge-payment failed"},
		{leak, false, ReasonRejected, "step charge-payment was refused by its service"},
	} {
		got := ReasonFor(tc.msg, "charge-payment", tc.undo)
		if got.Code != tc.code || got.Text != tc.text {
			t.Errorf("ReasonFor(%q, undo %v) = %+v, want %s %q", tc.msg, tc.undo, got, tc.code, tc.text)
			continue
		}
		checkReason(t, got, tc.msg, "charge-payment", tc.undo)
	}
}

// TestReasonCodes: the table documents each code once, in a shape fit for
// a JSON enum and a client's switch.
func TestReasonCodes(t *testing.T) {
	t.Parallel()
	codes := ReasonCodes()
	for i, c := range codes {
		if slices.Contains(codes[:i], c) {
			t.Errorf("code %s twice", c)
		}
		if !stepName.MatchString(string(c)) || c.About() == "" {
			t.Errorf("code %q: not a plain lower-case word, or undocumented (%q)", c, c.About())
		}
	}
	if ReasonCode("nope").About() != "" {
		t.Error("an unknown code is documented")
	}
}

// FuzzReasonFor: whatever a cause quotes, a client reads only the table's
// words, a step's name and a safe fault code; ReasonOf agrees for a record
// whose LastError is the text.
func FuzzReasonFor(f *testing.F) {
	for _, s := range []string{
		"", leak, "card-declined: x", "compensation x: y", "compensation : y", ": : :", "dispatch of ", "dispatch of step",
		"dispatch of compensation of step a attempt 1 failed: x", "step  attempt did not complete by ", "cancelled at step ",
		"cancelled at step " + leak, StrandedPrefix + "the order stopped at step ;", "invalid_output: x", "a\xffb: c",
		strings.Repeat("é", 300) + ": x", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmn: too long",
	} {
		f.Add(s, "charge-payment", false)
		f.Add(s, "Bad Step", true)
	}
	f.Fuzz(func(t *testing.T, msg, step string, undo bool) {
		checkReason(t, ReasonFor(msg, step, undo), msg, step, undo)
		s := State{LastError: msg, Step: step, ProcessState: Processing, Steps: []StepRecord{{Name: step}}}
		if undo {
			s.ProcessState = Compensating
		}
		r := ReasonOf(s)
		if msg == "" {
			if r != (Reason{}) {
				t.Fatalf("ReasonOf without LastError = %+v", r)
			}
			return
		}
		// The text's own mark of an undo wins over the record's phase.
		k, _, _ := classify(msg)
		switch k {
		case kindDispatch:
			undo = strings.HasPrefix(msg, DispatchFailurePrefix+undoDispatch)
		case kindRejected, kindOutput:
			undo = strings.HasPrefix(msg, UndoRejectedPrefix)
		case kindCancelled:
			undo = false
		}
		checkReason(t, r, msg, step, undo)
	})
}
