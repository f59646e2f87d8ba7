package stepgen_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/topology"
)

const root = "../.."

// TestGeneratedFilesAreCurrent: functions/steps/<step>/main.go and
// steps/registry.go are what stepgen writes for the code steps of steps/,
// and every code step is a step of a live version. A new, changed or
// removed code step fails here until `make steps` runs.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	t.Parallel()
	steps, err := stepgen.Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := stepgen.Live(steps, catalog.MustDeployed().AgentNames()); err != nil {
		t.Fatal(err)
	}
	files, err := stepgen.Generate(steps)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := stepgen.Stale(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Fatalf("the generated files of the code steps are out of date:\n  %s\nrun `%s` and commit what it writes",
			strings.Join(stale, "\n  "), stepgen.Command)
	}
}

// shipOrder is a valid manifest, the cases' starting point.
const shipOrder = `{
  "description": "Ships the order.",
  "parameters": {"ShipOrderBucket": "The bucket."},
  "environment": {"SHIPMENTS_BUCKET": "${ShipOrderBucket}", "SHIPMENTS_REGION": "${AWS::Region}"},
  "statements": [
    {"actions": ["s3:PutObject", "s3:DeleteObject"],
     "resources": ["arn:${AWS::Partition}:s3:::${ShipOrderBucket}/shipments/*"]},
    {"actions": ["dynamodb:GetItem"],
     "resources": ["arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/fixed-table"]}
  ]
}`

func TestParseManifest(t *testing.T) {
	t.Parallel()
	m, err := stepgen.Parse("ship-order", []byte(shipOrder))
	if err != nil {
		t.Fatal(err)
	}
	if m.Parameters["ShipOrderBucket"] != "The bucket." || m.Environment["SHIPMENTS_BUCKET"] != "${ShipOrderBucket}" ||
		len(m.Statements) != 2 || !slices.Equal(m.Statements[0].Actions, []string{"s3:PutObject", "s3:DeleteObject"}) {
		t.Fatalf("parsed %+v", m)
	}
	for name, tc := range map[string]struct {
		step, body, want string
	}{
		"unknown member":     {"", strings.Replace(shipOrder, `"description"`, `"timeout": "5s", "description"`, 1), "unknown field"},
		"trailing data":      {"", shipOrder + "{}", ""},
		"no description":     {"", strings.Replace(shipOrder, "Ships the order.", " ", 1), "description"},
		"wildcard action":    {"", strings.Replace(shipOrder, `"s3:DeleteObject"`, `"s3:*"`, 1), `action "s3:*"`},
		"any action":         {"", strings.Replace(shipOrder, `"s3:DeleteObject"`, `"*"`, 1), `action "*"`},
		"prefix action":      {"", strings.Replace(shipOrder, `"s3:DeleteObject"`, `"s3:Delete*"`, 1), `action "s3:Delete*"`},
		"bucket wildcard":    {"", strings.Replace(shipOrder, "/shipments/*", "/*", 1), "not under a path of its own"},
		"any resource":       {"", strings.Replace(shipOrder, `"arn:${AWS::Partition}:s3:::${ShipOrderBucket}/shipments/*"`, `"*"`, 1), "is not an ARN"},
		"any bucket":         {"", strings.Replace(shipOrder, "${ShipOrderBucket}/shipments/*", "*/shipments/*", 1), "wildcard or an empty segment"},
		"wildcard account":   {"", strings.Replace(shipOrder, "${AWS::AccountId}", "*", 1), "where the service, region or account go"},
		"fixed partition":    {"", strings.Replace(shipOrder, "arn:${AWS::Partition}:s3", "arn:aws:s3", 1), "partition"},
		"parameter path":     {"", strings.Replace(shipOrder, "/shipments/*", "/${ShipOrderBucket}/*", 1), "not literal"},
		"unknown reference":  {"", strings.Replace(shipOrder, `"${AWS::Region}"`, `"${OtherBucket}"`, 1), "${OtherBucket}"},
		"unknown pseudo":     {"", strings.Replace(shipOrder, `"${AWS::Region}"`, `"${AWS::StackName}"`, 1), "${AWS::StackName}"},
		"unclosed reference": {"", strings.Replace(shipOrder, `"${AWS::Region}"`, `"${AWS::Region"`, 1), "unclosed"},
		"unused parameter":   {"", strings.Replace(shipOrder, `"The bucket."}`, `"The bucket.", "ShipOrderSpare": "Spare."}`, 1), `"ShipOrderSpare" is never referenced`},
		"foreign parameter":  {"", strings.ReplaceAll(shipOrder, "ShipOrderBucket", "ShipmentsBucket"), `start with "ShipOrder"`},
		"reserved variable":  {"", strings.Replace(shipOrder, "SHIPMENTS_REGION", "AWS_REGION", 1), "reserved"},
		"runtime variable":   {"", strings.Replace(shipOrder, "SHIPMENTS_REGION", topology.EnvResponseQueueURL, 1), "runtime's own"},
		"bad variable":       {"", strings.Replace(shipOrder, "SHIPMENTS_REGION", "shipments-region", 1), "starts with a letter"},
		"no actions":         {"", strings.Replace(shipOrder, `["dynamodb:GetItem"]`, `[]`, 1), "needs actions and resources"},
		"bad step name":      {"Ship_Order", shipOrder, "no step name"},
		"taken package":      {"step", strings.ReplaceAll(shipOrder, "ShipOrder", "Step"), "rename the step"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			step := tc.step
			if step == "" {
				step = "ship-order"
			}
			_, err := stepgen.Parse(step, []byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// Every problem is reported at once.
func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	body := strings.Replace(strings.Replace(shipOrder, `"s3:DeleteObject"`, `"s3:*"`, 1), "SHIPMENTS_REGION", "AWS_REGION", 1)
	_, err := stepgen.Parse("ship-order", []byte(body))
	if err == nil || !strings.Contains(err.Error(), "s3:*") || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Fatalf("err = %v, want both problems", err)
	}
}

func TestParts(t *testing.T) {
	t.Parallel()
	got := stepgen.Parts("arn:${AWS::Partition}:s3:::${ShipOrderBucket}/shipments/*")
	want := []stepgen.Part{{Literal: "arn:"}, {Ref: "AWS::Partition"}, {Literal: ":s3:::"}, {Ref: "ShipOrderBucket"}, {Literal: "/shipments/*"}}
	if !slices.Equal(got, want) {
		t.Fatalf("Parts = %+v, want %+v", got, want)
	}
	if got := stepgen.Parts("${A}"); !slices.Equal(got, []stepgen.Part{{Ref: "A"}}) {
		t.Errorf("Parts(${A}) = %+v", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("ship-order", []byte(shipOrder))
	f.Add("ship-order", []byte(`{"description":"x"}`))
	f.Add("a", []byte(`{"description":"x","statements":[{"actions":["s3:GetObject"],"resources":["arn:${AWS::Partition}:s3:::${A}/p/*"]}]}`))
	f.Add("a", []byte(`{"description":"x","environment":{"X1":"${"}}`))
	f.Add("a", []byte(`null`))
	// Grants the rules refuse: a ? wildcard, the stack's own table, a
	// wildcard that reaches the stack's access log, a parameter inside a
	// name, an action that escalates.
	f.Add("a", []byte(`{"description":"x","parameters":{"AB":"b"},"statements":[{"actions":["s3:GetObject"],"resources":["arn:${AWS::Partition}:s3:::${AB}/p/?"]}]}`))
	f.Add("a", []byte(`{"description":"x","statements":[{"actions":["dynamodb:GetItem"],"resources":["arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/SchedulerAgentSupervisor-dev-StateTable"]}]}`))
	f.Add("a", []byte(`{"description":"x","statements":[{"actions":["logs:PutLogEvents"],"resources":["arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/vendedlogs/apigateway/*"]}]}`))
	f.Add("a", []byte(`{"description":"x","parameters":{"AB":"b"},"statements":[{"actions":["dynamodb:GetItem"],"resources":["arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/t-${AB}"]}]}`))
	f.Add("a", []byte(`{"description":"x","statements":[{"actions":["iam:PassRole"],"resources":["arn:${AWS::Partition}:iam::${AWS::AccountId}:role/r"]}]}`))
	f.Fuzz(func(t *testing.T, step string, b []byte) {
		m, err := stepgen.Parse(step, b)
		if err != nil {
			return
		}
		// What parses validates, and its references are all known.
		if err := m.Validate(step); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		for _, s := range m.Statements {
			for _, r := range s.Resources {
				for _, p := range stepgen.Parts(r) {
					if _, ok := m.Parameters[p.Ref]; p.Ref != "" && !ok && !strings.HasPrefix(p.Ref, "AWS::") {
						t.Fatalf("resource %q references unknown %s", r, p.Ref)
					}
				}
				if r == "*" || strings.Contains(r, "?") || strings.Contains(strings.ToLower(r), strings.ToLower(topology.StackNamePrefix)) {
					t.Fatalf("resource %q accepted", r)
				}
			}
			for _, a := range s.Actions {
				service, _, _ := strings.Cut(strings.ToLower(a), ":")
				if strings.ContainsAny(a, "*?") || service == "iam" || service == "sts" || service == "kms" {
					t.Fatalf("action %q accepted", a)
				}
			}
		}
	})
}

// writeStep makes a code step folder under root.
func writeStep(t *testing.T, root, name, pkg, manifest string) {
	t.Helper()
	dir := filepath.Join(root, "steps", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if manifest != "" {
		if err := os.WriteFile(filepath.Join(dir, "step.json"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "step.go"), []byte("package "+pkg+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Generate, Write and Stale on a tree of their own: written files are
// current; an edit, a missing main and a main without its step are stale;
// Write removes the last.
func TestWriteAndStale(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeStep(t, dir, "ship-order", "shiporder", shipOrder)
	steps, err := stepgen.Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := stepgen.Generate(steps)
	if err != nil {
		t.Fatal(err)
	}
	main := string(files["functions/steps/ship-order/main.go"])
	if !strings.Contains(main, `codestep.Main("ship-order", shiporder.New)`) || !strings.HasPrefix(main, "// Code generated") {
		t.Errorf("main.go:\n%s", main)
	}
	reg := string(files["steps/registry.go"])
	for _, want := range []string{`"ship-order": shiporder.New`, `//go:embed ship-order/step.json`, `shiporder "github.com/sasflow/sas/steps/ship-order"`} {
		if !strings.Contains(reg, want) {
			t.Errorf("registry.go has no %q:\n%s", want, reg)
		}
	}
	if stale, err := stepgen.Stale(dir, files); err != nil || len(stale) != 2 {
		t.Fatalf("before Write: stale %v (%v), want both files missing", stale, err)
	}
	if err := stepgen.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	if stale, err := stepgen.Stale(dir, files); err != nil || len(stale) != 0 {
		t.Fatalf("after Write: stale %v (%v)", stale, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "steps", "registry.go"), []byte("package steps\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "functions", "steps", "gone"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := stepgen.Stale(dir, files)
	if err != nil || !slices.Equal(stale, []string{"steps/registry.go is stale", "functions/steps/gone has no code step"}) {
		t.Fatalf("stale %q (%v)", stale, err)
	}
	if err := stepgen.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "functions", "steps", "gone")); !os.IsNotExist(err) {
		t.Errorf("functions/steps/gone survived Write: %v", err)
	}
}

// No code step: a registry without embed, which still compiles (checked
// by gofmt-ing it in Generate and by its content here).
func TestGenerateNone(t *testing.T) {
	t.Parallel()
	files, err := stepgen.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || strings.Contains(string(files["steps/registry.go"]), "embed") {
		t.Fatalf("files %q", files)
	}
}

func TestDiscoverRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		pkg, manifest, want string
	}{
		"no manifest":   {"shiporder", "", "needs its step.json"},
		"wrong package": {"ship_order", shipOrder, "want shiporder"},
		"bad manifest":  {"shiporder", `{"description":""}`, "description"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeStep(t, dir, "ship-order", tc.pkg, tc.manifest)
			if _, err := stepgen.Discover(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestLive(t *testing.T) {
	t.Parallel()
	steps := []stepgen.CodeStep{{Name: "ship-order"}, {Name: "gift-wrap"}}
	err := stepgen.Live(steps, []string{"reserve-inventory", "ship-order"})
	if err == nil || !strings.Contains(err.Error(), "steps/gift-wrap") || strings.Contains(err.Error(), "steps/ship-order") {
		t.Fatalf("err = %v, want gift-wrap alone", err)
	}
}
