package submission

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/shared/workflow"
)

// The sample events under events/ are what developers invoke the function
// with locally; running them here keeps them from drifting from the handler.

// sampleCaller is the owner of the samples' caller, a session of the role
// shop-checkout, and sampleCallerID the role's unique ID, the part of the
// samples' userId before its session.
const (
	sampleCaller   = "arn:aws:sts::123456789012:assumed-role/shop-checkout"
	sampleCallerID = "AROAZ3EXAMPLEROLE0001"
)

func TestSamplePostOrderEvent(t *testing.T) {
	t.Parallel()
	req := eventsample.Load[events.APIGatewayV2HTTPRequest](t, "submission-post-order.json")
	f := newFixture(t, nil)
	a := readAccepted(t, f.do(t, req))
	if k, err := f.store.GetKey(t.Context(), sampleCallerID, req.Headers["idempotency-key"]); err != nil || k.OrderID != a.OrderID {
		t.Fatalf("the sample's key names %+v, %v; want order %s", k, err, a.OrderID)
	}
	if len(f.out.sent()) != 1 {
		t.Fatalf("sent %d messages, want 1", len(f.out.sent()))
	}
	if o, st := f.order(t, a.OrderID), f.state(t, a.OrderID); o.Owner != sampleCaller || st.Owner != "" || o.OwnerID != sampleCallerID || st.OwnerID != sampleCallerID {
		t.Fatalf("owner %q %q, want the role of the sample's session %q %q", o.Owner, o.OwnerID, sampleCaller, sampleCallerID)
	}
}

func TestSampleGetOrderEvent(t *testing.T) {
	t.Parallel()
	req := eventsample.Load[events.APIGatewayV2HTTPRequest](t, "submission-get-order.json")
	id := req.PathParameters["id"]

	tests := []struct {
		name  string
		owner Owner // of the record; zero: no record
		want  int
	}{
		{"unknown order", Owner{}, 404},
		{"known order", Owner{sampleCaller, sampleCallerID}, 200},
		{"another caller's order", ownerA, 404},
		{"an order of the role before it was created anew", Owner{sampleCaller, "AROAZ3EXAMPLEROLE0000"}, 404},
		{"an order of the role not yet stamped with its ID", Owner{Name: sampleCaller}, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			if tt.owner != (Owner{}) {
				st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), testNow, testNow.Add(testConfig().ClaimTimeout))
				st.Owner, st.OwnerID = tt.owner.Name, tt.owner.ID
				f.put(st)
			}
			resp := f.do(t, req)
			if tt.want != 200 {
				readProblem(t, resp, tt.want)
				return
			}
			var got struct {
				OrderID string `json:"orderId"`
				State   string `json:"state"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &got); resp.StatusCode != 200 || err != nil || got.OrderID != id || got.State != "Pending" {
				t.Fatalf("status %d body %s", resp.StatusCode, resp.Body)
			}
		})
	}
}
