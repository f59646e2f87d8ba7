package topology_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// The policy and the admission check spell their variables in their own
// packages, which topology imports; the descriptor's must be the same.
func TestDescriptorSpellsThePolicyAndAdmissionVariables(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		code  map[string]string
		descr []string
	}{
		{"workflow.PolicyVariables", workflow.PolicyVariables, topology.PolicyEnv},
		{"admission.Variables", admission.Variables, topology.AdmissionEnv},
	} {
		got := slices.Sorted(maps.Values(tt.code))
		want := slices.Sorted(slices.Values(tt.descr))
		if !slices.Equal(got, want) {
			t.Errorf("%s names %v, the descriptor %v", tt.name, got, want)
		}
	}
}

func TestActorsAreTheFunctions(t *testing.T) {
	t.Parallel()
	var names []string
	for _, a := range topology.Actors() {
		names = append(names, a.Name)
		if len(a.Consumes) == 0 || len(a.Access) == 0 || len(a.Env) == 0 {
			t.Errorf("%s: consumes %v, access %v, env %v: each needs one at least", a.Name, a.Consumes, a.Access, a.Env)
		}
		if c := slices.Compact(slices.Sorted(slices.Values(a.Env))); len(c) != len(a.Env) {
			t.Errorf("%s lists a variable twice: %v", a.Name, a.Env)
		}
		if got := topology.Describe(a.Name).Name; got != a.Name {
			t.Errorf("Describe(%q) is %q", a.Name, got)
		}
	}
	want := []string{topology.Submission, topology.Scheduler, topology.Agent, topology.CodeStep, topology.Supervisor,
		topology.Deadline, topology.Timer, topology.Notifier}
	if !slices.Equal(names, want) {
		t.Errorf("actors %v, want %v", names, want)
	}
}

func TestDescriptorDerivations(t *testing.T) {
	t.Parallel()
	sched := topology.Describe(topology.Scheduler)
	if got, want := sched.SendsTo(), []topology.Resource{topology.AgentQueues, topology.SchedulerQueue, topology.AlertTopic}; !slices.Equal(got, want) {
		t.Errorf("scheduler sends to %v, want %v", got, want)
	}
	if got, want := sched.Tables(), []topology.Resource{topology.StateTable, topology.OrdersTable}; !slices.Equal(got, want) {
		t.Errorf("scheduler tables %v, want %v", got, want)
	}
	// Deployed variables only: the Agent's tuning keeps its defaults.
	if got, want := topology.Describe(topology.Agent).DeployedEnv(), []string{
		topology.EnvAgentStep, topology.EnvResponseQueueURL, topology.EnvRemoteBaseURLs, topology.EnvAlertTopicARN,
		topology.EnvMaxReceiveCount, topology.EnvRequestQueueURL,
	}; !slices.Equal(got, want) {
		t.Errorf("agent's deployed env %v, want %v", got, want)
	}
	// A code step reads no remote's URL, and its ledger table; its only
	// table is the ledger, on its own keys.
	code := topology.Describe(topology.CodeStep)
	if got, want := code.DeployedEnv(), []string{
		topology.EnvAgentStep, topology.EnvResponseQueueURL, topology.EnvLedgerTable, topology.EnvAlertTopicARN,
		topology.EnvMaxReceiveCount, topology.EnvRequestQueueURL,
	}; !slices.Equal(got, want) {
		t.Errorf("codestep's deployed env %v, want %v", got, want)
	}
	if got, want := code.Tables(), []topology.Resource{topology.LedgerTable}; !slices.Equal(got, want) || !code.Access[2].OwnKeys {
		t.Errorf("codestep tables %v (own keys %v), want %v on its own keys", got, code.Access[2].OwnKeys, want)
	}
	if got, want := topology.Readers(topology.EnvDeadlineQueueURL), []string{topology.Deadline, topology.Timer}; !slices.Equal(got, want) {
		t.Errorf("DEADLINE_QUEUE_URL readers %v, want %v", got, want)
	}
	vars := topology.Variables()
	if len(slices.Compact(slices.Sorted(slices.Values(vars)))) != len(vars) {
		t.Errorf("Variables lists one twice: %v", vars)
	}
}
