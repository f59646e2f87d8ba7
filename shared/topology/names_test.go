package topology_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/topology"
)

func TestQueueID(t *testing.T) {
	t.Parallel()
	dev := topology.StackName("dev")
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{topology.QueueName(dev, "SchedulerQueue"), "SchedulerQueue", true},
		{topology.QueueName(dev, "ReserveInventoryQueue"), "ReserveInventoryQueue", true},
		// Another stage whose name starts with "dev".
		{topology.QueueName(topology.StackName("dev-2"), "SchedulerQueue"), "", false},
		// A dead-letter queue: CloudFormation names it stack-LogicalId-random.
		{dev + "-SchedulerQueueDLQ1A2B3C4D-Xy12Ab34Cd56", "", false},
		{dev + "-", "", false},
		{"SchedulerAgentSupervisor-prod-SchedulerQueue", "", false},
	} {
		if id, ok := topology.QueueID(dev, tc.name); id != tc.id || ok != tc.ok {
			t.Errorf("QueueID(%q, %q) = %q, %v; want %q, %v", dev, tc.name, id, ok, tc.id, tc.ok)
		}
	}
	if got := topology.StackName(topology.DefaultStage); got != "SchedulerAgentSupervisor-dev" {
		t.Errorf("StackName(DefaultStage) = %q", got)
	}
}

func TestParseAgentQueues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "a=https://q/a", want: map[string]string{"a": "https://q/a"}},
		{in: "a=https://q/a,b=https://q/b", want: map[string]string{"a": "https://q/a", "b": "https://q/b"}},
		{in: " a=https://q/a ,\tb=https://q/b\n", want: map[string]string{"a": "https://q/a", "b": "https://q/b"}},
		// Only the first = separates; a URL may carry more.
		{in: "a=https://q/a?x=1", want: map[string]string{"a": "https://q/a?x=1"}},
		{in: "a", wantErr: `"a" is not step=url`},
		{in: "a=", wantErr: `"a=" is not step=url`},
		{in: "=https://q/a", wantErr: `"=https://q/a" is not step=url`},
		{in: "a=https://q/a,,b=https://q/b", wantErr: `"" is not step=url`},
		{in: "a=https://q/a,a=https://q/b", wantErr: `step "a" named twice`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := topology.ParseAgentQueues(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("topology.ParseAgentQueues(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				if got != nil {
					t.Errorf("topology.ParseAgentQueues(%q) returned %v with its error", tt.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("topology.ParseAgentQueues(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}
