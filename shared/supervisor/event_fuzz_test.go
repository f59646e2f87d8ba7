package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/shared/workflow"
)

// FuzzHandleEvent feeds the Supervisor whatever EventBridge (or a person
// with lambda:InvokeFunction) could send it. The Lambda runtime decodes the
// JSON into an EventBridgeEvent; whatever decodes, the Supervisor must run
// exactly as on its schedule, never panic, and do only what the due
// records call for.
func FuzzHandleEvent(f *testing.F) {
	sample, err := os.ReadFile(eventsample.Dir(f) + "/supervisor-scheduled.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"detail":null,"time":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"detail":{"a":[1,2,{"b":"\u0000"}]},"resources":["x","y"],"detail-type":"Scheduled Event"}`))
	f.Add([]byte(`{"version":"0","id":"","source":"evil","account":"1","time":"9999-12-31T23:59:59Z","region":"\uffff"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev events.EventBridgeEvent
		if json.Unmarshal(data, &ev) != nil {
			return // the runtime rejects it before the handler runs
		}
		due := processing(orderA, 0, testNow.Add(-time.Second))
		fx := newFixture(t, testConfig(), testNow, []workflow.State{due})
		if err := fx.h.Handle(context.Background(), ev); err != nil {
			t.Fatalf("Handle(%q) = %v", data, err)
		}
		if c, sent := fx.Store.Changes("retried"), fx.Send.Sent(); len(c) != 1 || len(sent) != 1 {
			t.Fatalf("the event changed the run: %d retries, %d sends", len(c), len(sent))
		}
	})
}
