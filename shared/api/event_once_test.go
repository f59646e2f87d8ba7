package api

import (
	"fmt"
	"reflect"
	"testing"
)

// FuzzOneParseDecodesEventsAsBefore: a body read in one parse
// (decodeCurrent) is the event that reading it member by member gives.
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
		got, ok := decodeCurrent(body)
		if !ok {
			return
		}
		want, err := decodeMemberByMember(body)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v in one parse; member by member: %+v, %v", body, got, want, err)
		}
	})
}

// An event the one parse leaves is the member-by-member read's, error
// and all.
func TestEventsTheOneParseLeavesAreReadMemberByMember(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"Type":"Other"}`, `[]`, `{"v":3,"x":1}`, `{"v":1,"x":1}`} {
		_, gerr := DecodeEvent(body)
		_, werr := decodeMemberByMember(body)
		if werr == nil || fmt.Sprint(gerr) != "decode order event: "+werr.Error() {
			t.Errorf("%s: %v; member by member: %v", body, gerr, werr)
		}
	}
}
