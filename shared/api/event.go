package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/workflow"
)

// EventVersion is the Event format this package writes. A change that a
// strict reader would reject (a new member, a new meaning) gets a new one.
// Version 2 replaced version 1's lastError, the whole text of a failure,
// with reason and reasonText; version 3 added priority. DecodeEvent still
// reads versions 1 and 2.
const EventVersion = 3

// eventV1 is the version 1 Event, which DecodeEvent still reads, so a
// client can take up this package before the Notifier writes version 2.
type eventV1 struct {
	V         int                   `json:"v"`
	Kind      string                `json:"kind"`
	OrderID   string                `json:"orderId"`
	ClientID  string                `json:"clientId"`
	Seq       int                   `json:"seq"`
	Status    workflow.Status       `json:"status"`
	State     workflow.ProcessState `json:"state"`
	Step      string                `json:"step"`
	StepIndex int                   `json:"stepIndex"`
	LastError string                `json:"lastError,omitempty"`
	Cancelled bool                  `json:"cancelled,omitempty"`
	At        time.Time             `json:"at"`
}

// current is e as a current Event: its lastError read as ReasonOf reads a
// record's, the step and phase taken from the event, and normal, the only
// class there was.
func (e eventV1) current() Event {
	r := workflow.ReasonOf(workflow.State{LastError: e.LastError, Step: e.Step, ProcessState: e.State})
	return Event{V: EventVersion, Kind: e.Kind, OrderID: e.OrderID, ClientID: e.ClientID, Seq: e.Seq, Status: e.Status,
		Priority: workflow.PriorityNormal, State: e.State, Step: e.Step, StepIndex: e.StepIndex, Reason: r.Code, ReasonText: r.Text,
		Cancelled: e.Cancelled, At: e.At}
}

// eventV2 is the version 2 Event, which DecodeEvent still reads: the
// current one without priority.
type eventV2 struct {
	V          int                   `json:"v"`
	Kind       string                `json:"kind"`
	OrderID    string                `json:"orderId"`
	ClientID   string                `json:"clientId"`
	Seq        int                   `json:"seq"`
	Status     workflow.Status       `json:"status"`
	State      workflow.ProcessState `json:"state"`
	Step       string                `json:"step"`
	StepIndex  int                   `json:"stepIndex"`
	Reason     workflow.ReasonCode   `json:"reason,omitempty"`
	ReasonText string                `json:"reasonText,omitempty"`
	Cancelled  bool                  `json:"cancelled,omitempty"`
	At         time.Time             `json:"at"`
}

// current is e as a current Event, of the normal class.
func (e eventV2) current() Event {
	return Event{V: EventVersion, Kind: e.Kind, OrderID: e.OrderID, ClientID: e.ClientID, Seq: e.Seq, Status: e.Status,
		Priority: workflow.PriorityNormal, State: e.State, Step: e.Step, StepIndex: e.StepIndex, Reason: e.Reason, ReasonText: e.ReasonText,
		Cancelled: e.Cancelled, At: e.At}
}

// KindOrderEvent is the Kind of every Event.
const KindOrderEvent = "order.event"

// Event tells a client that its order reached a new status: the body of one
// message on the order-events topic. Seq is the record's EventSeq: it grows
// by one per status change, so a client keeps the highest it has seen and
// drops any event at or below it (a duplicate or a stale one).
type Event struct {
	V        int             `json:"v"`
	Kind     string          `json:"kind"`
	OrderID  string          `json:"orderId"`
	ClientID string          `json:"clientId"`
	Seq      int             `json:"seq"`
	Status   workflow.Status `json:"status"`
	// Priority is the order's class: high, normal or low.
	Priority  workflow.Priority     `json:"priority"`
	State     workflow.ProcessState `json:"state"`
	Step      string                `json:"step"`
	StepIndex int                   `json:"stepIndex"`
	// Reason and ReasonText are the order's last failure as a client is
	// told it (workflow.ReasonOf); absent when it met none. A client
	// treats a code it does not know as "failed".
	Reason     workflow.ReasonCode `json:"reason,omitempty"`
	ReasonText string              `json:"reasonText,omitempty"`
	Cancelled  bool                `json:"cancelled,omitempty"`
	// At is when the record was written (its UpdatedAt).
	At time.Time `json:"at"`
}

// MaxReasonTextBytes bounds an Event's ReasonText: the texts
// workflow.ReasonOf makes are far shorter.
const MaxReasonTextBytes = 512

// reasonCode is the shape of a reason code: a lower-case word with
// hyphens, of the set workflow.ReasonCodes or one added later.
var reasonCode = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// statuses lists every Status a valid Event can carry.
var statuses = []workflow.Status{
	workflow.StatusAccepted, workflow.StatusProcessing, workflow.StatusProcessed, workflow.StatusError, workflow.StatusWaiting,
	workflow.StatusCompensating, workflow.StatusCompensated, workflow.StatusCompensationFailed, workflow.StatusCancelled,
}

// Validate reports why the event cannot be published or trusted. The
// publisher and DecodeEvent apply the same rules, so a client never receives
// what it would reject.
func (e Event) Validate() error {
	var errs []error
	if e.V != EventVersion {
		errs = append(errs, fmt.Errorf("version %d, want %d", e.V, EventVersion))
	}
	if e.Kind != KindOrderEvent {
		errs = append(errs, fmt.Errorf("kind %q, want %q", e.Kind, KindOrderEvent))
	}
	// Both become message attributes, which SNS rejects when empty and
	// which subscription filters match exactly.
	if err := attrText(e.OrderID); err != nil {
		errs = append(errs, fmt.Errorf("orderId: %w", err))
	}
	if err := attrText(e.ClientID); err != nil {
		errs = append(errs, fmt.Errorf("clientId: %w", err))
	}
	if e.Seq < 1 {
		errs = append(errs, fmt.Errorf("seq %d, want 1 or more", e.Seq))
	}
	if _, ok := workflow.ParseProcessState(string(e.State)); !ok {
		errs = append(errs, fmt.Errorf("unknown state %q", e.State))
	}
	known := false
	for _, s := range statuses {
		known = known || e.Status == s
	}
	switch {
	case !known:
		errs = append(errs, fmt.Errorf("unknown status %q", e.Status))
	case e.Seq >= 1:
		// The status follows from state and seq; an event where it does not
		// was built or edited wrongly.
		if want := workflow.StatusOf(workflow.State{ProcessState: e.State, EventSeq: e.Seq}); e.Status != want {
			errs = append(errs, fmt.Errorf("status %q does not match state %q at seq %d (want %q)", e.Status, e.State, e.Seq, want))
		}
	}
	if _, ok := workflow.ParsePriority(string(e.Priority)); !ok {
		errs = append(errs, fmt.Errorf("unknown priority %q", clip(string(e.Priority), 40)))
	}
	if e.StepIndex < 0 {
		errs = append(errs, fmt.Errorf("stepIndex %d is negative", e.StepIndex))
	}
	switch {
	case (e.Reason == "") != (e.ReasonText == ""):
		errs = append(errs, errors.New("reason and reasonText come together"))
	case e.Reason != "" && !reasonCode.MatchString(string(e.Reason)):
		errs = append(errs, fmt.Errorf("reason %q is not a reason code", clip(string(e.Reason), 40)))
	case len(e.ReasonText) > MaxReasonTextBytes:
		errs = append(errs, fmt.Errorf("reasonText of %d bytes exceeds %d", len(e.ReasonText), MaxReasonTextBytes))
	case e.ReasonText != "":
		if err := attrText(e.ReasonText); err != nil {
			errs = append(errs, fmt.Errorf("reasonText: %w", err))
		}
	}
	// JSON (RFC 3339) has no way to write other years.
	if y := e.At.Year(); y < 0 || y > 9999 {
		errs = append(errs, fmt.Errorf("at %v: year outside 0..9999", e.At))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid order event: %w", err)
	}
	return nil
}

// attrText checks a message attribute value: present, valid UTF-8, and free
// of control characters, which SNS rejects or a filter would never match.
func attrText(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	case strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("holds a control character")
	}
	return nil
}

// DecodeEvent reads an Event from the body of a message on a client's
// queue, with or without raw message delivery: a body that is an SNS
// envelope ({"Type":"Notification","Message":"..."}) is unwrapped first.
// It is strict: a body over MaxDocumentBytes, an unknown member of the
// event's version, data after the event, a version other than 1, 2 and 3
// or an event that fails Validate is an error. A version 1 or 2 event is
// returned as the current version (eventV1.current, eventV2.current).
func DecodeEvent(body string) (Event, error) {
	if len(body) > MaxDocumentBytes {
		return Event{}, fmt.Errorf("decode order event: body of %d bytes exceeds %d", len(body), MaxDocumentBytes)
	}
	ev, ok := decodeCurrent(body)
	if !ok {
		var err error
		if ev, err = decodeMemberByMember(body); err != nil {
			return Event{}, fmt.Errorf("decode order event: %w", err)
		}
	}
	if err := ev.Validate(); err != nil {
		return Event{}, fmt.Errorf("decode order event: %w", err)
	}
	return ev, nil
}

// decodeMemberByMember reads any body DecodeEvent takes: an SNS envelope
// unwrapped, its version read, then the strict decode of that version.
func decodeMemberByMember(body string) (Event, error) {
	raw, err := unwrap([]byte(body))
	if err != nil {
		return Event{}, err
	}
	var version struct {
		V int `json:"v"`
	}
	var ev Event
	_ = json.Unmarshal(raw, &version) // a body without a number is refused below
	switch version.V {
	case 1:
		var old eventV1
		err = decodeStrict(raw, &old)
		ev = old.current()
	case 2:
		var old eventV2
		err = decodeStrict(raw, &old)
		ev = old.current()
	default:
		err = decodeStrict(raw, &ev)
	}
	return ev, err
}

// decodeCurrent reads, in one parse, a body that is an event of the
// current version as it is (raw message delivery); false for any other
// body, which DecodeEvent then reads member by member to say what it is.
// A body naming "Type" may be an SNS envelope, and is left to unwrap.
func decodeCurrent(body string) (Event, bool) {
	if strings.Contains(body, `"Type"`) {
		return Event{}, false
	}
	var ev Event
	if jsonstrict.Decode([]byte(body), &ev) != nil || ev.V != EventVersion {
		return Event{}, false
	}
	return ev, true
}

// decodeStrict is jsonstrict.Decode, saying which data trails.
func decodeStrict(raw []byte, into any) error {
	err := jsonstrict.Decode(raw, into)
	if errors.Is(err, jsonstrict.ErrTrailing) {
		return errors.New("data after the event")
	}
	return err
}

// unwrap returns the Message of an SNS envelope, or the body itself when it
// is not one. An event never has a "Type" member, so its presence tells the
// two apart.
func unwrap(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("body is not a JSON object: %w", err)
	}
	rawType, ok := fields["Type"]
	if !ok {
		return body, nil // DecodeEvent checks the rest, trailing data too
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the SNS envelope")
	}
	var typ, msg string
	if err := json.Unmarshal(rawType, &typ); err != nil || typ != "Notification" {
		return nil, fmt.Errorf("SNS envelope of Type %s, want \"Notification\"", rawType)
	}
	rawMsg, ok := fields["Message"]
	if !ok {
		return nil, errors.New("SNS envelope without a Message")
	}
	if err := json.Unmarshal(rawMsg, &msg); err != nil {
		return nil, fmt.Errorf("SNS envelope Message is not a string: %w", err)
	}
	return []byte(msg), nil
}
