package submission

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/eventsample"
	"github.com/sasflow/sas/shared/workflow"
)

// The sample events under events/ are what developers invoke the function
// with locally; running them here keeps them from drifting from the handler.

func TestSamplePostOrderEvent(t *testing.T) {
	t.Parallel()
	req := eventsample.Load[events.APIGatewayV2HTTPRequest](t, "submission-post-order.json")
	f := newFixture(t, nil)
	a := readAccepted(t, f.do(t, req))
	if want := OrderIDForKey(req.Headers["idempotency-key"]); a.OrderID != want {
		t.Fatalf("orderId %s, want %s derived from the sample's key", a.OrderID, want)
	}
	if len(f.out.sent()) != 1 {
		t.Fatalf("sent %d messages, want 1", len(f.out.sent()))
	}
}

func TestSampleGetOrderEvent(t *testing.T) {
	t.Parallel()
	req := eventsample.Load[events.APIGatewayV2HTTPRequest](t, "submission-get-order.json")
	id := req.PathParameters["id"]

	t.Run("unknown order", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		readProblem(t, f.do(t, req), 404)
	})
	t.Run("known order", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		f.store.states[id] = workflow.NewState(id, workflow.Default(), json.RawMessage(`{}`), testNow, testNow.Add(testConfig().ClaimTimeout))
		resp := f.do(t, req)
		var got struct {
			OrderID string `json:"orderId"`
			State   string `json:"state"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &got); resp.StatusCode != 200 || err != nil || got.OrderID != id || got.State != "Pending" {
			t.Fatalf("status %d body %s", resp.StatusCode, resp.Body)
		}
	})
}
