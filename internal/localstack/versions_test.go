package localstack_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

func orderV(version int, steps ...string) workflow.Definition {
	d := workflow.Definition{Name: "order", Version: version}
	for _, s := range steps {
		d.Steps = append(d.Steps, workflow.Step{Name: s, Budget: 7 * time.Second, Wait: time.Second, Compensable: true})
	}
	return d
}

func TestDemoVersionsDerivesAV2FromASingleVersion(t *testing.T) {
	t.Parallel()
	cat := workflow.Single(orderV(1, "reserve-inventory", "charge-payment"))
	v, err := localstack.DemoVersions(cat, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.IDs, []string{"order-v1", "order-v2"}) || !slices.Equal(v.Refs, []string{"order-v1", ""}) || v.Derived != "order-v2" {
		t.Fatalf("DemoVersions = %+v", v)
	}
	cur, err := v.Catalog.ForNew("")
	if err != nil || cur.ID() != "order-v2" {
		t.Fatalf("current = %v, %v; want the derived order-v2", cur.ID(), err)
	}
	last := cur.Steps[len(cur.Steps)-1]
	if len(cur.Steps) != 3 || last.Name != localstack.DemoStep || last.Compensable || last.Budget != 7*time.Second || last.Wait != time.Second {
		t.Fatalf("order-v2 steps %+v", cur.Steps)
	}
	if old, err := v.Catalog.Resolve("order-v1"); err != nil || len(old.Steps) != 2 {
		t.Fatalf("order-v1 = %+v, %v", old, err)
	}
	// The deployed catalog is left as it was.
	if len(cat.Definitions) != 1 || cat.Current["order"] != 1 {
		t.Fatalf("the input changed: %+v", cat)
	}
	if s := v.String(); !strings.Contains(s, "order-v1") || !strings.Contains(s, "order-v2") || !strings.Contains(s, "ship-order") {
		t.Errorf("header %q", s)
	}
}

func TestDemoVersionsTakesTheCurrentAndTheOneBefore(t *testing.T) {
	t.Parallel()
	cat := workflow.Catalog{
		Definitions: []workflow.Definition{orderV(3, "a", "b"), orderV(1, "a"), orderV(2, "a", "c")},
		Current:     map[string]int{"order": 3}, Default: "order",
	}
	v, err := localstack.DemoVersions(cat, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.IDs, []string{"order-v2", "order-v3"}) || !slices.Equal(v.Refs, []string{"order-v2", ""}) || v.Derived != "" || len(v.Catalog.Definitions) != 3 {
		t.Fatalf("DemoVersions = %+v", v)
	}
	one, err := localstack.DemoVersions(cat, 1)
	if err != nil || !slices.Equal(one.IDs, []string{"order-v3"}) || !slices.Equal(one.Refs, []string{""}) {
		t.Fatalf("DemoVersions(1) = %+v, %v", one, err)
	}
}

func TestDemoVersionsRefusesWhatItCannotRun(t *testing.T) {
	t.Parallel()
	single := workflow.Single(orderV(1, "a"))
	trial := workflow.Catalog{Definitions: []workflow.Definition{orderV(1, "a"), orderV(2, "a", "b")}, Current: map[string]int{"order": 1}, Default: "order"}
	shipping := workflow.Single(orderV(1, "a", localstack.DemoStep))
	for _, c := range []struct {
		name string
		cat  workflow.Catalog
		n    int
		want string
	}{
		{"three", single, 3, "1 or 2"},
		{"zero", single, 0, "1 or 2"},
		{"nothing before the current", trial, 2, "no version before"},
		{"already ships", shipping, 2, "already has a step ship-order"},
	} {
		if _, err := localstack.DemoVersions(c.cat, c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: DemoVersions = %v, want %q", c.name, err, c.want)
		}
	}
	// Whatever the deployed file holds, -versions 2 runs on it.
	if _, err := localstack.DemoVersions(catalog.MustDeployed(), 2); err != nil {
		t.Errorf("the deployed catalog: %v", err)
	}
}

func TestSummaryPrintsTheVersionTableAndItsBreaches(t *testing.T) {
	t.Parallel()
	sum := localstack.Summary{
		Submitted: 5, Processed: 3, Compensated: 1, Errored: 1, Alerts: 1,
		Versions: []localstack.VersionCount{
			{ID: "order-v1", Steps: 2, Submitted: 2, Processed: 1, Compensated: 1, Effects: 3},
			{ID: "order-v2", Steps: 3, Submitted: 3, Processed: 2, Other: 1, Effects: 7},
		},
	}
	var out bytes.Buffer
	sum.Print(&out)
	for _, want := range []string{
		"  orders      submitted 5 · Processed 3 · Error 1 · in flight 0 · rejected 0 · shed (429, then resubmitted) 0\n",
		"  versions    version   steps  submitted  Processed  Compensated  error/other  in flight  effects\n",
		"              order-v1      2          2          1            1            0          0        3\n",
		"              order-v2      3          3          2            0            1          0        7\n",
		"effects of another version's steps: 0\n",
		"verdict     OK",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	sum.VersionErrors = []string{"o-1: effect of ship-order, not a step of order-v1"}
	if err := sum.Err(); err == nil || !strings.Contains(err.Error(), "ship-order, not a step of order-v1") {
		t.Errorf("Err = %v", err)
	}
}

func TestDemoRunsTwoVersionsAtOnce(t *testing.T) {
	t.Parallel()
	// From order-v1 alone, whatever the deployed catalog holds: the demo
	// derives the v2 with ship-order, a step without an undo.
	vers, err := localstack.DemoVersions(localstack.DemoOptionsOf(workflow.Single(workflow.Reference())).Workflows, 2)
	if err != nil {
		t.Fatal(err)
	}
	st, tap := start(t, func(o *localstack.Options) { o.Workflows = vers.Catalog })
	var progress bytes.Buffer
	const orders = 40
	sum := runDemo(t, localstack.Demo{Stack: st, Tap: tap, Orders: orders, Clients: 4, Timeout: 2 * time.Minute,
		Progress: &progress, RunID: "versions", Workflows: vers.Refs})

	if len(sum.Versions) != 2 || sum.Versions[0].ID != vers.IDs[0] || sum.Versions[1].ID != vers.IDs[1] {
		t.Fatalf("versions %+v, want %v", sum.Versions, vers.IDs)
	}
	var total localstack.VersionCount
	for _, v := range sum.Versions {
		// Every other order names the older version.
		if v.Submitted != orders/2 || v.Effects == 0 {
			t.Errorf("%s: %+v, want %d orders with effects", v.ID, v, orders/2)
		}
		total.Submitted += v.Submitted
		total.Processed += v.Processed
		total.Compensated += v.Compensated
		total.Other += v.Other
		total.InFlight += v.InFlight
	}
	if total.Submitted != sum.Submitted || total.Processed != sum.Processed || total.Compensated != sum.Compensated ||
		total.Other != sum.Errored+sum.CompensationFailed+sum.Cancelled || total.InFlight != sum.InFlight {
		t.Errorf("per version %+v do not add up to %+v", total, sum)
	}

	// The records: v1 orders have two steps and never ship, v2 orders three
	// and a processed one shipped exactly once.
	ids := stateIDs(t, st)
	if len(ids) != orders {
		t.Fatalf("%d state records, want %d", len(ids), orders)
	}
	steps := map[string]int{}
	shipped := map[string]int{}
	// ship-order is a code step of the repository (steps/ship-order), so
	// the stack runs its code, not the remote simulator: its effects are
	// counted there, and a key the simulator applied would be a bug too.
	codeRuns, _, _, _ := st.CodeEffects.Snapshot()
	for _, id := range ids {
		rec, err := st.Direct.GetState(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := steps[rec.Workflow]; ok && n != len(rec.Steps) {
			t.Errorf("%s: %d steps, other %s orders %d", id, len(rec.Steps), rec.Workflow, n)
		}
		steps[rec.Workflow] = len(rec.Steps)
		key := workflow.IdempotencyKey(id, localstack.DemoStep)
		n := st.Sim.EffectCount(key) + codeRuns[key]
		shipped[rec.Workflow] += n
		if rec.Workflow == "order-v2" && rec.ProcessState == workflow.Processed && n != 1 {
			t.Errorf("%s: processed order-v2 order shipped %d times", id, n)
		}
	}
	if steps["order-v1"] != 2 || steps["order-v2"] != 3 {
		t.Errorf("steps per version %v, want order-v1 2 and order-v2 3", steps)
	}
	if shipped["order-v1"] != 0 || shipped["order-v2"] == 0 {
		t.Errorf("ship-order effects per version %v, want none for order-v1", shipped)
	}

	var out bytes.Buffer
	sum.Print(&out)
	for _, want := range []string{"  versions    version ", "\n              order-v1 ", "\n              order-v2 ", "verdict     OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// stateIDs lists the order IDs of st's state table.
func stateIDs(t *testing.T, st *localstack.Stack) []string {
	t.Helper()
	var ids []string
	p := dynamodb.NewScanPaginator(st.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(st.Sys.Tables.State)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			if v, ok := item[statestore.KeyOrderID].(*ddbtypes.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
	}
	return ids
}
