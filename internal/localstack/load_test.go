package localstack_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
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

// TestAMixedBurstShedsTheLowerClassesFirst: the same burst, two orders in
// ten high, five normal and three low. Each class keeps its own part of
// the backlog, so the share of a class that is shed grows as the class
// falls, high orders are shed least, and every admitted order of every
// class is processed without a retry.
func TestAMixedBurstShedsTheLowerClassesFirst(t *testing.T) {
	t.Parallel()
	c := topology.Capacity{RemoteLatency: time.Second, RemoteConcurrency: 20, AdmitWait: 2 * time.Second}
	watch := &localstack.LoadWatch{Next: io.Discard}
	st := startWatched(t, localstack.LoadOptions(c), "mixed", watch)
	r, err := localstack.Load{Stack: st, Watch: watch, Drain: time.Minute, Mix: localstack.MixedLoad()}.Run(context.Background(), 150, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	share := map[workflow.Priority]float64{}
	for _, p := range workflow.Priorities {
		cl := r.Classes[p]
		if cl == nil || cl.Offered != 150*localstack.MixedLoad()[p]/10 || cl.Admitted+cl.Shed != cl.Offered || cl.Unfinished != 0 || len(cl.Latencies) != cl.Admitted {
			t.Fatalf("class %s: %+v: want its share of the offer, every answer a 202 or a 429, every admitted order processed", p, cl)
		}
		share[p] = float64(cl.Shed) / float64(cl.Offered)
	}
	high, normal, low := share[workflow.PriorityHigh], share[workflow.PriorityNormal], share[workflow.PriorityLow]
	if low == 0 || low < normal || normal < high || high >= low {
		t.Fatalf("shed shares high %.2f, normal %.2f, low %.2f: want low > high, and none above a lower class", high, normal, low)
	}
	if r.Retries != 0 || r.StaleReplies != 0 || r.GiveUps != 0 {
		t.Fatalf("%d retries, %d stale replies, %d give-ups: want none", r.Retries, r.StaleReplies, r.GiveUps)
	}
}
