package catalog_test

import (
	"os"
	"reflect"
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
func TestReleasedVersionsDoNotChange(t *testing.T) {
	t.Parallel()
	c := catalog.MustDeployed()
	ref := workflow.Reference()
	for _, d := range c.Definitions {
		if d.ID() == ref.ID() && !reflect.DeepEqual(d, ref) {
			t.Fatalf("%s was edited in place:\n got %+v\nwant %+v\norders in flight run it: declare the change as a new version instead", d.ID(), d, ref)
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
	})
}
