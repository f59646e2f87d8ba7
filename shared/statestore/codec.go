package statestore

import (
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The state record's codec, written out. Every write's answer (ALL_NEW),
// every read and every stream image of a record goes through it: the
// Scheduler, the Timer and the Notifier decode one per record they touch,
// and the SDK's reflective codec (attributevalue) spent more time on it
// than the handlers themselves. stateItem's tags stay the schema: the
// encoder writes exactly what attributevalue.MarshalMap writes for it, and
// the decoder reads a well-formed item the way UnmarshalMap does and hands
// anything else (a NULL, a number where a string is kept, a type out of
// place) to UnmarshalMap, so an odd item gets the SDK's very answer.
// TestTheWrittenCodecIsTheSDKs holds the two together.

// marshal is attributevalue.MarshalMap(it), written out.
func (it stateItem) marshal() map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, 32)
	m["OrderID"] = avS(it.OrderID)
	m["Workflow"] = avS(it.Workflow)
	m["StepIndex"] = avN(int64(it.StepIndex))
	m["Step"] = avS(it.Step)
	m["ProcessState"] = avS(it.ProcessState)
	putS(m, "LockedBy", it.LockedBy)
	m["CompleteBy"] = avN(it.CompleteBy)
	putS(m, "InFlightShard", it.InFlightShard)
	putN(m, "FailureCount", int64(it.FailureCount))
	putN(m, "WaitRound", int64(it.WaitRound))
	m["Attempt"] = avN(int64(it.Attempt))
	putS(m, "LastError", it.LastError)
	putBool(m, "AlertPending", it.AlertPending)
	putN(m, "Requeues", int64(it.Requeues))
	putS(m, "ClientID", it.ClientID)
	putS(m, "Owner", it.Owner)
	putS(m, "OwnerID", it.OwnerID)
	putS(m, "Priority", it.Priority)
	putS(m, "Trace", it.Trace)
	m[eventSeqAttr] = avN(int64(it.EventSeq))
	putBool(m, "Cancelled", it.Cancelled)
	putN(m, "Resubmits", int64(it.Resubmits))
	putS(m, "Input", it.Input)
	if it.Steps == nil {
		m["Steps"] = &types.AttributeValueMemberNULL{Value: true}
	} else {
		steps := make([]types.AttributeValue, len(it.Steps))
		for i, s := range it.Steps {
			steps[i] = &types.AttributeValueMemberM{Value: s.marshal()}
		}
		m["Steps"] = &types.AttributeValueMemberL{Value: steps}
	}
	m["CreatedAt"] = avN(it.CreatedAt)
	m["UpdatedAt"] = avN(it.UpdatedAt)
	putN(m, "ExpiresAt", it.ExpiresAt)
	putN(m, "OpenUntil", it.OpenUntil)
	return m
}

func (s stepItem) marshal() map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, 8)
	m["Name"] = avS(s.Name)
	m["State"] = avS(s.State)
	putN(m, "Attempts", int64(s.Attempts))
	putN(m, "Failures", int64(s.Failures))
	putN(m, "StartedAt", s.StartedAt)
	putN(m, "FinishedAt", s.FinishedAt)
	putS(m, "Output", s.Output)
	putS(m, "Error", s.Error)
	putS(m, "Compensation", s.Compensation)
	putN(m, "CompensationAttempts", int64(s.CompensationAttempts))
	putN(m, "CompensationFailures", int64(s.CompensationFailures))
	putN(m, "CompensatedAt", s.CompensatedAt)
	putS(m, "CompensationOutput", s.CompensationOutput)
	putS(m, "CompensationError", s.CompensationError)
	putBool(m, "Refused", s.Refused)
	putBool(m, "UndoRefused", s.UndoRefused)
	putN(m, "KeyRound", int64(s.KeyRound))
	putN(m, "UndoKeyRound", int64(s.UndoKeyRound))
	return m
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// putS, putN and putBool write an omitempty attribute: left out at its
// zero value.
func putS(m map[string]types.AttributeValue, name, v string) {
	if v != "" {
		m[name] = avS(v)
	}
}

func putN(m map[string]types.AttributeValue, name string, v int64) {
	if v != 0 {
		m[name] = avN(v)
	}
}

func putBool(m map[string]types.AttributeValue, name string, v bool) {
	if v {
		m[name] = &types.AttributeValueMemberBOOL{Value: true}
	}
}

// unmarshal is attributevalue.UnmarshalMap(av, it).
func (it *stateItem) unmarshal(av map[string]types.AttributeValue) error {
	if readState[types.AttributeValue, sdkValues](av, it, true) {
		return nil
	}
	*it = stateItem{}
	return attributevalue.UnmarshalMap(av, it)
}

// values reads one kind of attribute value: the SDK's (sdkValues), or a
// stream image's as the Lambda event carries it (imageValues), so an image
// is decoded without being converted first. Each accessor reports false
// for a value of another type.
type values[V any] interface {
	str(V) (string, bool)
	num(V) (string, bool)
	boolean(V) (bool, bool)
	list(V) ([]V, bool)
	object(V) (map[string]V, bool)
}

// Both readers are values; the assertions also tell staticcheck, which
// does not follow methods called through a type parameter, that they are
// used.
var (
	_ values[types.AttributeValue]          = sdkValues{}
	_ values[events.DynamoDBAttributeValue] = imageValues{}
)

// readState reads a well-formed item into it, its steps too when steps
// is set, and reports false at the first attribute that is not (a type
// out of place, a name in another case): the caller then decodes it the
// SDK's way.
func readState[V any, A values[V]](av map[string]V, it *stateItem, steps bool) bool {
	r := avReader[V, A]{}
	it.OrderID = r.s(av, "OrderID")
	it.Workflow = r.s(av, "Workflow")
	it.StepIndex = int(r.n(av, "StepIndex"))
	it.Step = r.s(av, "Step")
	it.ProcessState = r.s(av, "ProcessState")
	it.LockedBy = r.s(av, "LockedBy")
	it.CompleteBy = r.n(av, "CompleteBy")
	it.InFlightShard = r.s(av, "InFlightShard")
	it.FailureCount = int(r.n(av, "FailureCount"))
	it.WaitRound = int(r.n(av, "WaitRound"))
	it.Attempt = int(r.n(av, "Attempt"))
	it.LastError = r.s(av, "LastError")
	it.AlertPending = r.bool(av, "AlertPending")
	it.Requeues = int(r.n(av, "Requeues"))
	it.ClientID = r.s(av, "ClientID")
	it.Owner = r.s(av, "Owner")
	it.OwnerID = r.s(av, "OwnerID")
	it.Priority = r.s(av, "Priority")
	it.Trace = r.s(av, "Trace")
	it.EventSeq = int(r.n(av, eventSeqAttr))
	it.Cancelled = r.bool(av, "Cancelled")
	it.Resubmits = int(r.n(av, "Resubmits"))
	it.Input = r.s(av, "Input")
	it.CreatedAt = r.n(av, "CreatedAt")
	it.UpdatedAt = r.n(av, "UpdatedAt")
	it.ExpiresAt = r.n(av, "ExpiresAt")
	it.OpenUntil = r.n(av, "OpenUntil")
	if _, ok := av["Steps"]; ok {
		r.seen++
	}
	r.names(av, stateNames)
	if v, ok := av["Steps"]; ok && steps {
		l, isList := r.a.list(v)
		if !isList {
			r.odd = true
		} else {
			it.Steps = make([]stepItem, len(l))
			for i, e := range l {
				m, isMap := r.a.object(e)
				if !isMap {
					r.odd = true
					break
				}
				r.seen = 0
				readStep(&r, m, &it.Steps[i])
				r.names(m, stepNames)
			}
		}
	}
	return !r.odd
}

func readStep[V any, A values[V]](r *avReader[V, A], av map[string]V, s *stepItem) {
	s.Name = r.s(av, "Name")
	s.State = r.s(av, "State")
	s.Attempts = int(r.n(av, "Attempts"))
	s.Failures = int(r.n(av, "Failures"))
	s.StartedAt = r.n(av, "StartedAt")
	s.FinishedAt = r.n(av, "FinishedAt")
	s.Output = r.s(av, "Output")
	s.Error = r.s(av, "Error")
	s.Compensation = r.s(av, "Compensation")
	s.CompensationAttempts = int(r.n(av, "CompensationAttempts"))
	s.CompensationFailures = int(r.n(av, "CompensationFailures"))
	s.CompensatedAt = r.n(av, "CompensatedAt")
	s.CompensationOutput = r.s(av, "CompensationOutput")
	s.CompensationError = r.s(av, "CompensationError")
	s.Refused = r.bool(av, "Refused")
	s.UndoRefused = r.bool(av, "UndoRefused")
	s.KeyRound = int(r.n(av, "KeyRound"))
	s.UndoKeyRound = int(r.n(av, "UndoKeyRound"))
}

// avReader reads the attributes of a well-formed item, noting the first
// one that is not (odd): the caller then reads the item reflectively.
type avReader[V any, A values[V]] struct {
	a   A
	odd bool
	// seen counts the attributes read by their exact names since the
	// map's reading began: when it is every attribute, none can match a
	// name in another case, and names need not look.
	seen int
}

// names notes as odd an item with an attribute whose name matches one of
// known only without regard to case, which UnmarshalMap reads into that
// field as encoding/json does; the item's other attributes (WriteToken, the
// listings' keys) it ignores, as UnmarshalMap does.
func (r *avReader[V, A]) names(av map[string]V, known map[string]bool) {
	if len(av) == r.seen {
		return
	}
	for name := range av {
		if known[name] {
			continue
		}
		if _, ok := known[strings.ToLower(name)]; ok {
			r.odd = true
		}
	}
}

func (r *avReader[V, A]) s(av map[string]V, name string) string {
	v, ok := av[name]
	if !ok {
		return ""
	}
	r.seen++
	if s, isS := r.a.str(v); isS {
		return s
	}
	r.odd = true
	return ""
}

func (r *avReader[V, A]) n(av map[string]V, name string) int64 {
	v, ok := av[name]
	if !ok {
		return 0
	}
	r.seen++
	if n, isN := r.a.num(v); isN {
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return i
		}
	}
	r.odd = true
	return 0
}

func (r *avReader[V, A]) bool(av map[string]V, name string) bool {
	v, ok := av[name]
	if !ok {
		return false
	}
	r.seen++
	if b, isB := r.a.boolean(v); isB {
		return b
	}
	r.odd = true
	return false
}

// sdkValues reads the SDK's attribute values.
type sdkValues struct{}

func (sdkValues) str(v types.AttributeValue) (string, bool) {
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return s.Value, true
}

func (sdkValues) num(v types.AttributeValue) (string, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return "", false
	}
	return n.Value, true
}

func (sdkValues) boolean(v types.AttributeValue) (bool, bool) {
	b, ok := v.(*types.AttributeValueMemberBOOL)
	if !ok {
		return false, false
	}
	return b.Value, true
}

func (sdkValues) list(v types.AttributeValue) ([]types.AttributeValue, bool) {
	l, ok := v.(*types.AttributeValueMemberL)
	if !ok {
		return nil, false
	}
	return l.Value, true
}

func (sdkValues) object(v types.AttributeValue) (map[string]types.AttributeValue, bool) {
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return nil, false
	}
	return m.Value, true
}

// imageValues reads a stream image's attribute values. Their accessors
// panic on a value of another type, and a zero value claims a type it
// does not hold (toAttributeValue), so the type is checked first and a
// value without one is odd.
type imageValues struct{}

func (imageValues) str(v events.DynamoDBAttributeValue) (string, bool) {
	if v.DataType() != events.DataTypeString || v.IsNull() {
		return "", false
	}
	return v.String(), true
}

func (imageValues) num(v events.DynamoDBAttributeValue) (string, bool) {
	if v.DataType() != events.DataTypeNumber || v.IsNull() {
		return "", false
	}
	return v.Number(), true
}

func (imageValues) boolean(v events.DynamoDBAttributeValue) (bool, bool) {
	if v.DataType() != events.DataTypeBoolean || v.IsNull() {
		return false, false
	}
	return v.Boolean(), true
}

func (imageValues) list(v events.DynamoDBAttributeValue) ([]events.DynamoDBAttributeValue, bool) {
	if v.DataType() != events.DataTypeList || v.IsNull() {
		return nil, false
	}
	return v.List(), true
}

func (imageValues) object(v events.DynamoDBAttributeValue) (map[string]events.DynamoDBAttributeValue, bool) {
	if v.DataType() != events.DataTypeMap || v.IsNull() {
		return nil, false
	}
	return v.Map(), true
}

// stateNames and stepNames are the attribute names of stateItem and
// stepItem: true for each name as written, false for its lower case.
var stateNames, stepNames = fieldNames(stateItem{}.marshalAll()), fieldNames(stepItem{}.marshalAll())

func fieldNames(m map[string]types.AttributeValue) map[string]bool {
	out := map[string]bool{}
	for name := range m {
		out[name] = true
	}
	for name := range m {
		if lower := strings.ToLower(name); !out[lower] {
			out[lower] = false
		}
	}
	return out
}

// marshalAll writes every attribute, as a full item has them.
func (it stateItem) marshalAll() map[string]types.AttributeValue {
	it.LockedBy, it.InFlightShard, it.FailureCount, it.WaitRound, it.LastError, it.AlertPending = "x", "x", 1, 1, "x", true
	it.Requeues, it.ClientID, it.Owner, it.OwnerID, it.Priority, it.Trace, it.Cancelled = 1, "x", "x", "x", "x", "x", true
	it.Resubmits, it.Input, it.ExpiresAt, it.OpenUntil = 1, "x", 1, 1
	return it.marshal()
}

func (s stepItem) marshalAll() map[string]types.AttributeValue {
	s.Attempts, s.Failures, s.StartedAt, s.FinishedAt, s.Output, s.Error, s.Compensation = 1, 1, 1, 1, "x", "x", "x"
	s.CompensationAttempts, s.CompensationFailures, s.CompensatedAt, s.CompensationOutput, s.CompensationError = 1, 1, 1, "x", "x"
	s.Refused, s.UndoRefused, s.KeyRound, s.UndoKeyRound = true, true, 1, 1
	return s.marshal()
}
