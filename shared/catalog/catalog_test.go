package catalog_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/workflow"
)

// TestDeployedCatalogIsValid: the file every function embeds parses and
// validates, so no function fails its cold start on it.
func TestDeployedCatalogIsValid(t *testing.T) {
	t.Parallel()
	c, err := catalog.Deployed()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForNew(""); err != nil {
		t.Fatalf("no version for a submission that names no workflow: %v", err)
	}
}

// TestReleasedVersionsDoNotChange: orders in flight are pinned to order-v1,
// so while the catalog declares it, it must be the definition they started
// on. A change goes into a new version.
//
// Each step's retry policy is part of its version: a change of it (a
// threshold, a backoff, a wait) is a new version too, since the orders
// pinned to a version are retried as it says.
func TestReleasedVersionsDoNotChange(t *testing.T) {
	t.Parallel()
	c := catalog.MustDeployed()
	three, wait := 3, workflow.ExhaustedWait
	v2 := workflow.Reference()
	v2.Version = 2
	v2.Steps = slices.Clone(v2.Steps)
	v2.Steps[1].Retry = &workflow.Retry{MaxFailures: &three, OnExhausted: wait, Wait: 30 * time.Minute, WaitRounds: 3}
	v3 := v2
	v3.Version = 3
	v3.Steps = append(slices.Clone(v2.Steps), workflow.Step{Name: "ship-order", Budget: 20 * time.Second, Wait: 5 * time.Second, Compensable: true})
	for _, ref := range []workflow.Definition{workflow.Reference(), v2, v3} {
		for _, d := range c.Definitions {
			if d.ID() == ref.ID() && !reflect.DeepEqual(d, ref) {
				t.Fatalf("%s was edited in place:\n got %s\nwant %s\norders in flight run it: declare the change as a new version instead", d.ID(), show(d), show(ref))
			}
		}
	}
}

// TestEveryCodeStepIsALiveStep: every folder of steps/ is a code step
// (internal/stepgen), which the stack deploys as a step's function; one
// that no live version has would be deployed for nothing, or name a step
// that was removed or misspelt.
func TestEveryCodeStepIsALiveStep(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("../../steps")
	if err != nil {
		t.Fatal(err)
	}
	live := catalog.MustDeployed().AgentNames()
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if !slices.Contains(live, e.Name()) {
			t.Errorf("steps/%s is a code step, but no live version of shared/catalog/workflows.json has a step %s (its steps: %v)", e.Name(), e.Name(), live)
		}
	}
}

// show spells a definition out, its retry policies included (%+v would
// print their pointers).
func show(d workflow.Definition) string {
	s := d.ID() + ":"
	for _, st := range d.Steps {
		s += fmt.Sprintf(" {%s %v %v %v %d", st.Name, st.Budget, st.Wait, st.Compensable, st.MaxOutputBytes)
		if r := st.Retry; r != nil {
			s += fmt.Sprintf(" retry{%v %v %v %s %v %d}", deref(r.MaxFailures), deref(r.BackoffBase), deref(r.BackoffMax), r.OnExhausted, r.Wait, r.WaitRounds)
		}
		s += "}"
	}
	return s
}

func deref[T any](p *T) any {
	if p == nil {
		return "-"
	}
	return *p
}

// TestParseRetry: a step's retry policy is read as written, what it
// leaves out stays unset (the deployment's), and every problem is refused
// when the file is read.
func TestParseRetry(t *testing.T) {
	t.Parallel()
	const file = `{"default": "order", "workflows": [{"name": "order", "current": 1, "versions": [
		{"version": 1, "steps": [{"name": "a", "budget": "30s", "compensable": true,
			"retry": {"maxFailures": 5, "backoffBase": "2s", "backoffMax": "1m", "onExhausted": "wait", "wait": "30m", "waitRounds": 3}},
			{"name": "b", "budget": "10s", "retry": {"backoffMax": "0s"}}]}]}]}`
	c, err := catalog.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.ForNew("")
	a, b := d.Steps[0].Retry, d.Steps[1].Retry
	if a == nil || *a.MaxFailures != 5 || *a.BackoffBase != 2*time.Second || *a.BackoffMax != time.Minute || a.OnExhausted != workflow.ExhaustedWait ||
		a.Wait != 30*time.Minute || a.WaitRounds != 3 {
		t.Fatalf("step a's retry = %s", show(d))
	}
	if b == nil || b.MaxFailures != nil || b.BackoffBase != nil || b.BackoffMax == nil || *b.BackoffMax != 0 || b.OnExhausted != "" {
		t.Fatalf("step b's retry = %s; want only a zero backoffMax", show(d))
	}
	for name, tc := range map[string]struct{ body, want string }{
		"unknown member":       {strings.Replace(file, `"waitRounds": 3`, `"waitRounds": 3, "jitter": true`, 1), "unknown field"},
		"zero failures":        {strings.Replace(file, `"maxFailures": 5`, `"maxFailures": 0`, 1), "maxFailures 0"},
		"backoff over sqs":     {strings.Replace(file, `"1m"`, `"16m"`, 1), "backoffMax 16m0s"},
		"unknown on exhausted": {strings.Replace(file, `"onExhausted": "wait"`, `"onExhausted": "retry"`, 1), `onExhausted "retry"`},
		"zero wait on compensate": {strings.Replace(file, `"onExhausted": "wait", "wait": "30m", "waitRounds": 3`, `"onExhausted": "compensate", "wait": "0s"`, 1),
			"only with onExhausted"},
		"rounds without wait": {strings.Replace(file, `"onExhausted": "wait", "wait": "30m", "waitRounds": 3`, `"waitRounds": 0`, 1), "only with onExhausted"},
		"wait too long":       {strings.Replace(file, `"30m"`, `"168h"`, 1), "retry.wait 168h0m0s"},
		"no rounds":           {strings.Replace(file, `, "waitRounds": 3`, ``, 1), "waitRounds 0"},
		"duration as number":  {strings.Replace(file, `"2s"`, `2`, 1), "duration must be a string"},
	} {
		if _, err := catalog.Parse([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", name, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	const two = `{"default": "order", "workflows": [{"name": "order", "current": 2, "versions": [
		{"version": 1, "steps": [{"name": "a", "budget": "30s", "wait": "5s", "compensable": true}]},
		{"version": 2, "steps": [{"name": "a", "budget": "40s", "compensable": true}, {"name": "b", "budget": "10s", "maxOutputBytes": 1024}]}]}]}`
	c, err := catalog.Parse([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.ForNew("")
	if err != nil || d.ID() != "order-v2" || len(d.Steps) != 2 || d.Steps[1].MaxOutputBytes != 1024 || d.Steps[0].Wait != 0 {
		t.Fatalf("ForNew(\"\") = %+v, %v; want order-v2 as written", d, err)
	}
	if v1, err := c.Resolve("order-v1"); err != nil || v1.Steps[0].Budget != 30*time.Second || v1.Steps[0].Wait != 5*time.Second {
		t.Fatalf("order-v1 = %+v, %v", v1, err)
	}

	// An output limit past 256 KiB fits SQS's 1 MiB, and this record.
	if c, err := catalog.Parse([]byte(strings.Replace(two, `1024`, `300000`, 1))); err != nil {
		t.Fatalf("an output limit of 300000 bytes: %v", err)
	} else if d, _ := c.ForNew(""); d.Steps[1].MaxOutputBytes != 300000 {
		t.Fatalf("ForNew(\"\") = %+v; want the output limit as written", d)
	}

	for name, tc := range map[string]struct{ body, want string }{
		"unknown member":     {`{"default": "order", "workflows": [], "extra": 1}`, "unknown field"},
		"trailing data":      {`{"default": "order", "workflows": []} {}`, "after the JSON value"},
		"bad duration":       {strings.Replace(two, `"40s"`, `"forty"`, 1), "duration"},
		"duration as number": {strings.Replace(two, `"40s"`, `40`, 1), "duration must be a string"},
		"no current":         {strings.Replace(two, `"current": 2`, `"current": 3`, 1), "current version"},
		"duplicate version":  {strings.Replace(two, `"version": 2`, `"version": 1`, 1), "declared twice"},
		"no default":         {strings.Replace(two, `"default": "order"`, `"default": "ship"`, 1), "default workflow"},
		"listed twice":       {`{"default": "order", "workflows": [{"name": "order", "current": 1, "versions": [{"version": 1, "steps": [{"name": "a", "budget": "1s"}]}]}, {"name": "order", "current": 1, "versions": []}]}`, "listed twice"},
		"version in name":    {strings.Replace(strings.Replace(two, `"name": "order"`, `"name": "order-v3"`, 1), `"default": "order"`, `"default": "order-v3"`, 1), "-v<number>"},
		"budget over lambda": {strings.Replace(two, `"40s"`, `"16m"`, 1), "budget"},
		"agent lease": {strings.Replace(strings.Replace(two, `"wait": "5s"`, `"wait": "5m"`, 1), `"40s"`, `"10m"`, 1),
			"longest wait plus budget"},
		"output over sqs":      {strings.Replace(two, `1024`, `1048576`, 1), "output limit"},
		"output over the item": {strings.Replace(two, `1024`, `400000`, 1), "DynamoDB item limit"},
	} {
		if _, err := catalog.Parse([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", name, err, tc.want)
		}
	}
}

// TestTheFileIsWhatDeployedReads guards the embed: the file in the
// repository is the one the build carries.
func TestTheFileIsWhatDeployedReads(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("workflows.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := catalog.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := catalog.MustDeployed(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Deployed() = %+v, the file holds %+v", got, want)
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("workflows.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"default":"a","workflows":[{"name":"a","current":1,"versions":[{"version":1,"steps":[{"name":"s","budget":"1s"}]}]}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"default":"a","workflows":[{"name":"a","current":1,"versions":[{"version":1,"steps":[{"name":"s","budget":"1s","retry":{"maxFailures":2,"backoffBase":"1s","backoffMax":"2s","onExhausted":"wait","wait":"10s","waitRounds":2}}]}]}]}`))
	f.Add([]byte(`{"default":"a","workflows":[{"name":"a","current":1,"versions":[{"version":1,"steps":[{"name":"s","budget":"1s","retry":{"onExhausted":"compensate","wait":"0s"}}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := catalog.Parse(b)
		if err != nil {
			return
		}
		// What parses is a catalog every actor can run: each version
		// resolves by its ID, and a default exists.
		for _, d := range c.Definitions {
			if got, err := c.Resolve(d.ID()); err != nil || got.ID() != d.ID() {
				t.Fatalf("Resolve(%s) = %v, %v", d.ID(), got.ID(), err)
			}
		}
		if _, err := c.ForNew(""); err != nil {
			t.Fatalf("valid catalog without a default: %v", err)
		}
		// A retry policy that parses is one the Supervisor can carry out:
		// every hand-back fits an SQS delay, every wait ends.
		for _, d := range c.Definitions {
			for _, s := range d.Steps {
				r := s.Retry
				if r == nil {
					continue
				}
				for _, b := range []*time.Duration{r.BackoffBase, r.BackoffMax} {
					if b != nil && (*b < 0 || *b > 15*time.Minute) {
						t.Fatalf("%s step %s: a backoff of %v parsed", d.ID(), s.Name, *b)
					}
				}
				if r.MaxFailures != nil && *r.MaxFailures < 1 {
					t.Fatalf("%s step %s: maxFailures %d parsed", d.ID(), s.Name, *r.MaxFailures)
				}
				if waits := r.OnExhausted == workflow.ExhaustedWait; waits != (r.Wait > 0 && r.WaitRounds > 0) || r.Wait > workflow.MaxRetryWait {
					t.Fatalf("%s step %s: onExhausted %q with wait %v, %d rounds parsed", d.ID(), s.Name, r.OnExhausted, r.Wait, r.WaitRounds)
				}
			}
		}
	})
}
