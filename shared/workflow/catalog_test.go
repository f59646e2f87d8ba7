package workflow

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// twoVersions is order-v1 (Reference) and an order-v2 that inserts a
// compensable ship-order step, makes reserve-inventory non-compensable and
// gives charge-payment a longer budget and output limit; v2 is current.
func twoVersions() Catalog {
	v2 := Reference()
	v2.Version = 2
	v2.Steps = slices.Clone(v2.Steps)
	v2.Steps[0].Compensable = false
	v2.Steps[1].Budget, v2.Steps[1].MaxOutputBytes = 45*time.Second, 64<<10
	v2.Steps = append(v2.Steps, Step{Name: "ship-order", Budget: 20 * time.Second, Compensable: true})
	return Catalog{Definitions: []Definition{Reference(), v2}, Current: map[string]int{"order": 2}, Default: "order"}
}

func TestCatalogResolvesPinnedAndNewOrders(t *testing.T) {
	t.Parallel()
	c := twoVersions()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"": "order-v2", "order": "order-v2", "order-v1": "order-v1", "order-v2": "order-v2"} {
		if d, err := c.ForNew(ref); err != nil || d.ID() != want {
			t.Errorf("ForNew(%q) = %s, %v; want %s", ref, d.ID(), err, want)
		}
	}
	for _, ref := range []string{"order-v3", "shipping", "Order", "order-v0"} {
		if _, err := c.ForNew(ref); !errors.Is(err, ErrUnknownWorkflow) {
			t.Errorf("ForNew(%q) = %v, want ErrUnknownWorkflow", ref, err)
		}
	}
	if d, err := c.Resolve("order-v1"); err != nil || len(d.Steps) != 2 || !d.Steps[0].Compensable {
		t.Errorf("Resolve(order-v1) = %+v, %v", d, err)
	}
	if _, err := c.Resolve("order-v3"); !errors.Is(err, ErrUnknownWorkflow) || !strings.Contains(err.Error(), "order-v1, order-v2") {
		t.Errorf("Resolve(order-v3) = %v, want ErrUnknownWorkflow naming the deployed versions", err)
	}
	if m, err := c.Machine(LegacyID, testPol); err != nil || m.Def.ID() != "order-v1" {
		t.Errorf("the legacy ID resolves to %s, %v", m.Def.ID(), err)
	}
}

// TestCatalogAgentsServeEveryVersion: one Agent per step name, sized for
// the largest of its versions and able to undo if any version undoes.
func TestCatalogAgentsServeEveryVersion(t *testing.T) {
	t.Parallel()
	c := twoVersions()
	agents := c.Agents()
	if names := c.AgentNames(); !slices.Equal(names, []string{"reserve-inventory", "charge-payment", "ship-order"}) {
		t.Fatalf("agents %v", names)
	}
	if a := agents[0]; !a.Compensable {
		t.Errorf("reserve-inventory is undone by v1 orders, but its agent would not undo")
	}
	if a := agents[1]; a.Budget != 45*time.Second || a.OutputLimit() != 64<<10 || a.Lease() != 45*time.Second+DefaultWait {
		t.Errorf("charge-payment's agent %+v: want v2's budget, output limit and v1's wait", a)
	}
	if got := c.FirstSteps(); !slices.Equal(got, []string{"reserve-inventory"}) {
		t.Errorf("first steps %v", got)
	}
	if _, ok := c.Agent("refund"); ok {
		t.Error("an agent for a step no version has")
	}
}

func TestCatalogValidate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		change func(c *Catalog)
		want   string
	}{
		"no definitions":      {func(c *Catalog) { c.Definitions = nil }, "no definitions"},
		"a version twice":     {func(c *Catalog) { c.Definitions[1].Version = 1 }, "declared twice"},
		"current not there":   {func(c *Catalog) { c.Current["order"] = 3 }, "the current version of \"order\", 3"},
		"no current":          {func(c *Catalog) { delete(c.Current, "order") }, "has no current version"},
		"current of nothing":  {func(c *Catalog) { c.Current["ship"] = 1 }, "\"ship\", which has no versions"},
		"default of nothing":  {func(c *Catalog) { c.Default = "ship" }, "default workflow \"ship\""},
		"version zero":        {func(c *Catalog) { c.Definitions[0].Version = 0 }, "version 0"},
		"name with a version": {func(c *Catalog) { c.Definitions[0].Name = "order-v1" }, "not end in -v<number>"},
		"agent lease": {func(c *Catalog) {
			c.Definitions[0].Steps[1].Wait = MaxWait
			c.Definitions[1].Steps[1].Budget = 10 * time.Minute
		}, "longest wait plus budget"},
	} {
		c := twoVersions()
		c.Definitions = slices.Clone(c.Definitions)
		for i := range c.Definitions {
			c.Definitions[i].Steps = slices.Clone(c.Definitions[i].Steps)
		}
		tc.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

func TestSplitID(t *testing.T) {
	t.Parallel()
	if name, v, ok := SplitID("ship-order-v12"); !ok || name != "ship-order" || v != 12 {
		t.Errorf("SplitID = %q %d %v", name, v, ok)
	}
	for _, bad := range []string{"order", "order-v0", "order-v01", "Order-v1", "-v1", "order-v12345"} {
		if _, _, ok := SplitID(bad); ok {
			t.Errorf("SplitID(%q) accepted", bad)
		}
	}
}

// TestChangesArePinnedToTheirVersion: every change the Machine decides is
// fenced on its version, so a record of another version refuses it.
func TestChangesArePinnedToTheirVersion(t *testing.T) {
	t.Parallel()
	c := twoVersions()
	v1 := Machine{Def: c.Definitions[0], Policy: testPol}
	v2 := Machine{Def: c.Definitions[1], Policy: testPol}
	st := v1.Accept("o-1", []byte(`{}`), "submission/1", mt0)
	if st.Workflow != "order-v1" {
		t.Fatalf("the record pins %q", st.Workflow)
	}
	now := mt0.Add(time.Second)
	for name, ch := range map[string]Change{
		"completed": v2.StepCompleted("o-1", 0, st.Attempt, nil, "s", now),
		"rejected":  v2.StepRejected("o-1", 0, st.Attempt, "no", false, "s", now),
	} {
		if ch.Fence.Workflow != "order-v2" || ch.Fence.Admits(st) {
			t.Errorf("%s by v2: fence %+v admits the v1 record", name, ch.Fence)
		}
	}
	if ch := v1.StepCompleted("o-1", 0, st.Attempt, nil, "s", now); !ch.Fence.Admits(st) {
		t.Errorf("v1's own change refused: %+v", ch.Fence)
	}
}

// TestStranded: an order whose version is gone stops where it is with an
// alert, forward into Error, undoing into CompensationFailed, and owes the
// alert again until it is confirmed; nothing before its CompleteBy.
func TestStranded(t *testing.T) {
	t.Parallel()
	m := Machine{Def: twoVersions().Definitions[0], Policy: testPol}
	// lost decides for a record whose version is not deployed: no Def.
	lost := Machine{Policy: testPol}
	running := m.Accept("o-1", []byte(`{}`), "submission/1", mt0)
	if _, ok := lost.Stranded(running, running.CompleteBy.Add(-time.Second)); ok {
		t.Fatal("stranded before its CompleteBy")
	}
	now := running.CompleteBy
	c, ok := lost.Stranded(running, now)
	if !ok || c.Alert != AlertWorkflowMissing || c.Transition != TransitionStranded || c.Fence.Workflow != "order-v1" {
		t.Fatalf("change %+v", c)
	}
	stopped := apply(t, running, c)
	if stopped.ProcessState != Error || !stopped.AlertPending || !stopped.InFlight || stopped.LockedBy != "" ||
		!strings.HasPrefix(stopped.LastError, StrandedPrefix+"order-v1") || stopped.Steps[0].State != StepFailed || !stopped.ExpiresAt.IsZero() {
		t.Fatalf("stranded record %+v", stopped)
	}
	// Its alert, unconfirmed, is owed again after the alert timeout, as
	// the same kind.
	again, ok := lost.Stranded(stopped, stopped.CompleteBy)
	if !ok || again.Alert != AlertWorkflowMissing || !again.Fence.AlertPending || again.Patch.State != "" {
		t.Fatalf("resend %+v", again)
	}
	if _, ok := lost.Stranded(apply(t, stopped, Machine{}.AlertSent("o-1", stopped.Attempt, stopped.ProcessState, now)), now.Add(time.Hour)); ok {
		t.Fatal("a confirmed alert owed again")
	}

	undoing := running
	undoing.ProcessState = Compensating
	c, _ = lost.Stranded(undoing, now)
	if got := apply(t, undoing, c); got.ProcessState != CompensationFailed || got.Steps[0].Compensation != StepFailed {
		t.Fatalf("stranded undo: %s, step %+v", got.ProcessState, got.Steps[0])
	}
	// Resubmitted once the version is back, it carries on from its step.
	back, err := m.Resubmit(stopped, now.Add(time.Minute))
	if err != nil || back.Handback == nil || back.Handback.StepIndex != 0 || back.Fence.Workflow != "order-v1" {
		t.Fatalf("resubmit: %+v, %v", back, err)
	}
}
