package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// decodeEventMemberByMember is DecodeEvent without its one-parse path:
// the envelope looked for, the version read, then the strict decode.
func decodeEventMemberByMember(body string) (Event, error) {
	if len(body) > MaxDocumentBytes {
		return Event{}, fmt.Errorf("decode order event: body of %d bytes exceeds %d", len(body), MaxDocumentBytes)
	}
	raw, err := unwrap([]byte(body))
	if err != nil {
		return Event{}, fmt.Errorf("decode order event: %w", err)
	}
	var version struct {
		V int `json:"v"`
	}
	var ev Event
	_ = json.Unmarshal(raw, &version)
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
	if err != nil {
		return Event{}, fmt.Errorf("decode order event: %w", err)
	}
	if err := ev.Validate(); err != nil {
		return Event{}, fmt.Errorf("decode order event: %w", err)
	}
	return ev, nil
}

// FuzzOneParseDecodesEventsAsBefore: an event read in one parse is the
// event, or the error, that reading it member by member gives.
func FuzzOneParseDecodesEventsAsBefore(f *testing.F) {
	for _, s := range []string{
		`{"v":3,"kind":"order.event","orderId":"o","clientId":"c","seq":1,"status":"accepted","priority":"normal","state":"Pending","step":"","stepIndex":0,"at":"2026-01-01T00:00:00Z"}`,
		`{"v":3,"kind":"order.event","orderId":"o","clientId":"c","seq":1,"status":"accepted","priority":"normal","state":"Pending","at":"2026-01-01T00:00:00Z"} {}`,
		`{"V":3,"KIND":"order.event","orderId":"o","clientId":"c","seq":1,"status":"accepted","priority":"normal","state":"Pending","at":"2026-01-01T00:00:00Z"}`,
		`{"v":3,"kind":"order.event","orderId":"o","seq":0}`,
		`{"v":1,"kind":"order.event","orderId":"o","clientId":"c","seq":1,"status":"accepted","state":"Pending","step":"","stepIndex":0,"at":"2026-01-01T00:00:00Z"}`,
		`{"Type":"Notification","Message":"{\"v\":3}"}`,
		`{"\u0054ype":"Notification","Message":"{}"}`,
		`{"v":3,"type":"x"}`,
		`null`, `"x"`, `{"v":1e400}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, gerr := DecodeEvent(body)
		want, werr := decodeEventMemberByMember(body)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, %v; member by member: %+v, %v", body, got, gerr, want, werr)
		}
	})
}
