package localstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/trace"
)

// TestOneTracePerOrder runs two orders at once through every real handler
// on the local engines, with every log line captured at debug level:
//
//   - "recovered": its payment call hangs through the step's whole budget,
//     so no reply comes; the Timer's Deadline (or the Supervisor's sweep)
//     retries the step through the Scheduler, and the second call succeeds.
//   - "undone": its payment is rejected, so the Scheduler compensates the
//     reservation through the inventory Agent.
//
// Every line that names an order carries a traceId, one per order, the two
// differ, every actor logged some of them, and the remote service saw the
// same trace on every call of the order.
func TestOneTracePerOrder(t *testing.T) {
	t.Parallel()
	const client = "trace-client"
	// The orders are submitted in turn, so their IDs are known before the
	// remote is scripted for them.
	recovered, undone := "7a2f6b0e-1c4d-4e8a-9b3f-000000000001", "7a2f6b0e-1c4d-4e8a-9b3f-000000000002"
	ids := []string{recovered, undone}

	o := localstack.DemoOptions()
	o.Seed = 7
	o.Faults, o.Crash = remotesim.Faults{}, 0
	// A hung call holds the step's whole budget: nothing else ends the try.
	o.Agent.RemoteTimeout = time.Minute
	o.DynamoDBEndpoint, o.AWSEndpoint = enginetest.Endpoints(t)
	o.Prefix = enginetest.UniqueName(t, "trace")
	o.OrderIDs = func(string, string) string { id := ids[0]; ids = ids[1:]; return id }
	var logs logtest.Buffer
	o.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := localstack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	st.Sim.Script(recovered+"/charge-payment", remotesim.Hang)
	st.Sim.Script(undone+"/charge-payment", remotesim.Permanent)

	body := strings.Replace(order, `{`, `{"clientId":"trace-app",`, 1)
	for _, key := range []string{"recovered", "undone"} {
		r := call(t, "POST", st.APIURL+"/orders", body, client, map[string]string{"Idempotency-Key": key})
		if r.status != 202 {
			t.Fatalf("POST %s = %d %s", key, r.status, r.body)
		}
	}

	// Done when the Notifier has published each order's last event: every
	// actor has logged by then.
	final := map[string]string{recovered: "Processed", undone: "Compensated"}
	var recs []map[string]any
	await.Until(t, time.Minute, fmt.Sprintf("orders notified in their final state %v", final), func() (bool, error) {
		recs = logs.Records(t)
		return notified(recs, final), fmt.Errorf("logs:\n%s", logs.String())
	})

	traces := map[string]map[string]bool{} // orderId: traceIds
	actors := map[string]map[string]bool{} // orderId: functions
	for _, r := range recs {
		id, _ := r["orderId"].(string)
		if final[id] == "" {
			continue
		}
		tid, _ := r[trace.LogKey].(string)
		if tid == "" {
			line, _ := json.Marshal(r)
			t.Errorf("a line of order %s has no traceId: %s", id, line)
			continue
		}
		if traces[id] == nil {
			traces[id], actors[id] = map[string]bool{}, map[string]bool{}
		}
		traces[id][tid] = true
		fn, _ := r["function"].(string)
		actors[id][fn] = true
	}
	root := map[string]string{}
	for id := range final {
		if len(traces[id]) != 1 {
			t.Fatalf("order %s has %d traceIds, want 1: %v", id, len(traces[id]), traces[id])
		}
		for tid := range traces[id] {
			root[id] = tid
		}
		if !trace.ValidRoot(root[id]) {
			t.Errorf("order %s: traceId %q is not an X-Ray trace ID", id, root[id])
		}
	}
	if root[recovered] == root[undone] {
		t.Errorf("both orders share trace %s", root[recovered])
	}
	for id, want := range map[string][]string{
		recovered: {"submission", "agent", "scheduler", "notifier"},
		undone:    {"submission", "agent", "scheduler", "notifier"},
	} {
		for _, fn := range want {
			if !actors[id][fn] {
				t.Errorf("order %s: no line from %s; lines came from %v", id, fn, keys(actors[id]))
			}
		}
	}
	// The hung step was recovered by the fast path or the sweep, in the
	// order's trace.
	if !actors[recovered]["deadline"] && !actors[recovered]["supervisor"] {
		t.Errorf("order %s: no line from the Deadline or the Supervisor; lines came from %v", recovered, keys(actors[recovered]))
	}

	// The remote saw the order's trace on every call, forward and undo.
	for _, c := range []struct{ id, key string }{
		{recovered, recovered + "/reserve-inventory"},
		{recovered, recovered + "/charge-payment"},
		{undone, undone + "/reserve-inventory"},
		{undone, undone + "/charge-payment"},
		{undone, undone + "/reserve-inventory/undo"},
	} {
		headers := st.Sim.TraceHeaders(c.key)
		if len(headers) == 0 {
			t.Errorf("%s: no call reached the remote", c.key)
		}
		for _, hv := range headers {
			h, err := trace.Parse(hv)
			if err != nil || h.Root != root[c.id] {
				t.Errorf("%s: X-Amzn-Trace-Id %q, want Root %s (%v)", c.key, hv, root[c.id], err)
			}
		}
	}
	if n := len(st.Sim.TraceHeaders(recovered + "/charge-payment")); n < 2 {
		t.Errorf("the hung step was called %d times, want a retry after its deadline", n)
	}
}

// notified reports whether the Notifier logged each order's event in its
// final state.
func notified(recs []map[string]any, final map[string]string) bool {
	seen := 0
	for id, state := range final {
		if slices.ContainsFunc(recs, func(r map[string]any) bool {
			return r["function"] == "notifier" && r["orderId"] == id && r["state"] == state && r["msg"] == "notified"
		}) {
			seen++
		}
	}
	return seen == len(final)
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return fmt.Sprint(ks)
}
