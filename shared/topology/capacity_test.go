package topology_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

func TestCapacityDerivesEveryFigureFromTheModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		c              topology.Capacity
		wantMaxConc    int
		wantPerSecond  float64
		wantBacklog    int
		wantAPIRate    float64
		wantRefresh    time.Duration
		wantAdmitRate  int
		wantAPIBurst   int
		wantValidation string
	}{
		{name: "deployed default", c: topology.DefaultCapacity(),
			wantMaxConc: 5, wantPerSecond: 500, wantBacklog: 500, wantAPIRate: 625, wantRefresh: 250 * time.Millisecond, wantAdmitRate: 500, wantAPIBurst: 500},
		{name: "slow service, partial invocation rounds up", c: topology.Capacity{RemoteLatency: time.Second, RemoteConcurrency: 25, AdmitWait: 2 * time.Second},
			wantMaxConc: 3, wantPerSecond: 30, wantBacklog: 60, wantAPIRate: 38, wantRefresh: 500 * time.Millisecond, wantAdmitRate: 30, wantAPIBurst: 60},
		{name: "admit wait under two rounds of calls", c: topology.Capacity{RemoteLatency: time.Second, RemoteConcurrency: 20, AdmitWait: time.Second},
			wantValidation: "admit wait 1s must be at least twice the remote latency 1s"},
		{name: "short admit wait refreshes at the floor", c: topology.Capacity{RemoteLatency: 50 * time.Millisecond, RemoteConcurrency: 20, AdmitWait: 200 * time.Millisecond},
			wantMaxConc: 2, wantPerSecond: 400, wantBacklog: 80, wantAPIRate: 500, wantRefresh: 100 * time.Millisecond, wantAdmitRate: 400, wantAPIBurst: 80},
		{name: "too few calls for two invocations", c: topology.Capacity{RemoteLatency: time.Second, RemoteConcurrency: 5, AdmitWait: time.Second},
			wantValidation: "remote concurrency 5 must be within 20..10000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.c.Validate(); tt.wantValidation != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantValidation) {
					t.Fatalf("Validate = %v, want %q", err, tt.wantValidation)
				}
				return
			} else if err != nil {
				t.Fatal(err)
			}
			c := tt.c
			got := []any{c.AgentMaxConcurrency(), c.OrdersPerSecond(), c.Backlog(), c.APIRateLimit(), c.AdmitRefresh(), c.APIBurstLimit()}
			want := []any{tt.wantMaxConc, tt.wantPerSecond, tt.wantBacklog, tt.wantAPIRate, tt.wantRefresh, tt.wantAPIBurst}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("figure %d = %v, want %v (max concurrency, orders/s, backlog, API rate, refresh, burst)", i, got[i], want[i])
				}
			}
			a := c.Admission([]string{"https://q/a", "https://q/b"})
			if a.Backlog != tt.wantBacklog || a.Rate != tt.wantAdmitRate || a.Refresh != tt.wantRefresh || len(a.Queues) != 2 {
				t.Errorf("Admission = %+v", a)
			}
		})
	}
}

func TestWaitMustCoverTheAdmitWait(t *testing.T) {
	t.Parallel()
	c := topology.DefaultCapacity()
	if err := c.CheckWorkflow(workflow.Reference()); err != nil {
		t.Fatalf("the default workflow against the default model: %v", err)
	}
	d := workflow.Reference()
	d.Steps[1].Wait = time.Second
	if err := c.CheckWorkflow(d); err == nil || !strings.Contains(err.Error(), `step "charge-payment": wait 1s must be at least twice the admit wait 1s`) {
		t.Fatalf("err = %v", err)
	}
}

func TestQueueAgeAlarmsFollowTheSteps(t *testing.T) {
	t.Parallel()
	d := workflow.Reference()
	d.Steps[0].Wait, d.Steps[1].Wait = 0, 8*time.Second
	if got := topology.AgentQueueAgeAlarm(d.Steps[0]); got != d.Steps[0].Budget {
		t.Errorf("a step without a wait alarms at %v, want its budget", got)
	}
	if got := topology.AgentQueueAgeAlarm(d.Steps[1]); got != d.Steps[1].Budget+8*time.Second {
		t.Errorf("a step alarms at %v, want its lease", got)
	}
	if got := topology.ResponseQueueAgeAlarm(workflow.Single(d)); got != d.Steps[0].Budget {
		t.Errorf("response queue alarms at %v, want the shortest lease", got)
	}
	// Versions share the response queue: the shortest lease of any
	// version's step, not of the Agents' union (which takes the longest).
	v2 := workflow.Reference()
	v2.Version = 2
	v2.Steps[0].Wait, v2.Steps[0].Budget = 2*time.Second, 3*time.Second
	c := workflow.Catalog{Definitions: []workflow.Definition{d, v2}, Current: map[string]int{d.Name: 2}, Default: d.Name}
	if got := topology.ResponseQueueAgeAlarm(c); got != 5*time.Second {
		t.Errorf("response queue alarms at %v over two versions, want v2's first step's lease 5s", got)
	}
}
