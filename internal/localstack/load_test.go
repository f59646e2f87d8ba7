package localstack_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/shared/topology"
)

// TestAdmissionShedsABurstAndFinishesWhatItAdmits: a burst of 150 orders
// in one second against Agents that take 20 one-second calls at once, with
// the API shedding past two seconds of queued work (40 requests). The
// Submission reads the real queues' depths: some orders are shed with
// 429, and every admitted one is processed with no Supervisor retry,
// stale reply or give-up, because none waited past its allowance.
func TestAdmissionShedsABurstAndFinishesWhatItAdmits(t *testing.T) {
	t.Parallel()
	c := topology.Capacity{RemoteLatency: time.Second, RemoteConcurrency: 20, AdmitWait: 2 * time.Second}
	watch := &localstack.LoadWatch{Next: io.Discard}
	st := startWatched(t, localstack.LoadOptions(c), "load", watch)
	r, err := localstack.Load{Stack: st, Watch: watch, Drain: time.Minute}.Run(context.Background(), 150, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Offered != 150 || r.Shed == 0 || r.Admitted == 0 || r.Admitted+r.Shed != r.Offered {
		t.Fatalf("offered %d, admitted %d, shed %d, failed %d: want a burst partly shed, every answer a 202 or a 429",
			r.Offered, r.Admitted, r.Shed, r.Failed)
	}
	if r.Unfinished != 0 || len(r.Latencies) != r.Admitted || r.Retries != 0 || r.StaleReplies != 0 || r.GiveUps != 0 {
		t.Fatalf("%+v: want every admitted order processed without a retry", r)
	}
}
