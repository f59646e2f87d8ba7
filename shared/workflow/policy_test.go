package workflow

import (
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/config"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := Policy{BackoffBase: time.Second, BackoffMax: 10 * time.Second}
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 0}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{4, 8 * time.Second}, {5, 10 * time.Second}, {60, 10 * time.Second},
	} {
		if got := p.Backoff(tc.failures); got != tc.want {
			t.Errorf("Backoff(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatalf("default policy invalid: %v", err)
	}
	bad := []func(*Policy){
		func(p *Policy) { p.MaxFailures = 0 },
		func(p *Policy) { p.ClaimTimeout = 0 },
		func(p *Policy) { p.BackoffMax = p.BackoffBase - 1 },
		func(p *Policy) { p.BackoffMax = 16 * time.Minute },
		func(p *Policy) { p.AlertTimeout = 0 },
	}
	for i, mutate := range bad {
		p := DefaultPolicy()
		mutate(&p)
		if p.Validate() == nil {
			t.Errorf("case %d: invalid policy %+v accepted", i, p)
		}
	}
}

func TestDefinitionValidate(t *testing.T) {
	t.Parallel()
	if err := Reference().Validate(); err != nil {
		t.Fatalf("default workflow invalid: %v", err)
	}
	for name, d := range map[string]Definition{
		"no name":      {Steps: []Step{{Name: "a", Budget: time.Second}}},
		"no steps":     {Name: "w", Version: 1},
		"bad name":     {Name: "w", Version: 1, Steps: []Step{{Name: "Bad_Name", Budget: time.Second}}},
		"duplicate":    {Name: "w", Version: 1, Steps: []Step{{Name: "a", Budget: time.Second}, {Name: "a", Budget: time.Second}}},
		"short budget": {Name: "w", Version: 1, Steps: []Step{{Name: "a", Budget: time.Millisecond}}},
	} {
		if d.Validate() == nil {
			t.Errorf("%s: accepted %+v", name, d)
		}
	}
}

// TestDefinitionRejectsPayloadsThatCannotFit: a definition whose worst case
// (every output at its limit) could make a request larger than an SQS
// message or a state record larger than a DynamoDB item is refused, naming
// the limit, before any order runs into it.
func TestDefinitionRejectsPayloadsThatCannotFit(t *testing.T) {
	t.Parallel()
	step := func(name string, out int, undo bool) Step {
		return Step{Name: name, Budget: time.Second, MaxOutputBytes: out, Compensable: undo}
	}
	for _, tc := range []struct {
		name  string
		steps []Step
		want  string // "" for a definition that fits
	}{
		{"the default fits", Reference().Steps, ""},
		{"two large outputs still fit a request", []Step{step("a", 100<<10, false), step("b", 100<<10, false), step("c", 0, false)}, ""},
		{"the third request would carry 260 KiB of outputs", []Step{step("a", 130<<10, false), step("b", 130<<10, false), step("c", 0, false)},
			`the request of step "c" can reach`},
		{"an undo carries its own output too", []Step{step("a", 120<<10, true), step("b", 120<<10, true)},
			`the undo request of step "b" can reach`},
		{"an output that cannot fit a reply", []Step{step("a", 256<<10, false)}, "output limit"},
		{"a negative limit", []Step{step("a", -1, false)}, "output limit"},
		{"outputs and undo outputs over the item limit", []Step{
			// Every request fits (220 KiB of outputs at most), but the record
			// keeps each output twice: the step's and its undo's.
			step("a", 55<<10, true), step("b", 55<<10, true), step("c", 55<<10, true), step("d", 55<<10, true),
		}, "DynamoDB item limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Definition{Name: "w", Version: 1, Steps: tc.steps}.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a bit longer than ten", 10, "a bit l…"},
		{"ééééé", 6, "é…"},
		{"bad \xff byte", 100, "bad \uFFFD byte"},
	} {
		if got := Clip(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	if got := Clip("a\xffb", 10); got != "a\uFFFDb" {
		t.Errorf("Clip kept invalid UTF-8: %q", got)
	}
}

func TestNewState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := NewState("o-1", Reference(), []byte(`{}`), now, now.Add(time.Minute))
	if s.ProcessState != Pending || s.StepIndex != 0 || s.Step != "reserve-inventory" || s.Attempt != 0 || s.LockedBy != "" {
		t.Fatalf("unexpected initial state %+v", s)
	}
	if len(s.Steps) != 2 || s.Steps[1].Name != "charge-payment" || s.Steps[1].State != StepPending {
		t.Fatalf("unexpected step history %+v", s.Steps)
	}
	if !s.CompleteBy.Equal(now.Add(time.Minute)) {
		t.Fatalf("CompleteBy = %v", s.CompleteBy)
	}
}

func TestLoadPolicy(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MAX_FAILURES": "5", "CLAIM_TIMEOUT": "30s", "BACKOFF_BASE": "1s", "BACKOFF_MAX": "1m", "ALERT_TIMEOUT": "10s", "RETENTION": "720h"}
	r := config.NewReader(func(k string) string { return env[k] })
	got := LoadPolicy(r)
	want := Policy{MaxFailures: 5, ClaimTimeout: 30 * time.Second, BackoffBase: time.Second, BackoffMax: time.Minute, AlertTimeout: 10 * time.Second, Retention: 720 * time.Hour}
	if got != want || r.Err() != nil {
		t.Fatalf("LoadPolicy = %+v, %v; want %+v", got, r.Err(), want)
	}
	r = config.NewReader(func(string) string { return "" })
	if got := LoadPolicy(r); got != DefaultPolicy() || r.Err() != nil {
		t.Fatalf("LoadPolicy of an empty environment = %+v, %v", got, r.Err())
	}
	r = config.NewReader(func(k string) string {
		return map[string]string{"BACKOFF_MAX": "16m", "MAX_FAILURES": "0", "ALERT_TIMEOUT": "soon", "RETENTION": "23h"}[k]
	})
	p := LoadPolicy(r)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), `ALERT_TIMEOUT="soon"`) {
		t.Fatalf("a value that does not parse reported %v", err)
	}
	if p.AlertTimeout != DefaultPolicy().AlertTimeout {
		t.Errorf("AlertTimeout = %v; a value that does not parse keeps its default", p.AlertTimeout)
	}
	rules := &config.Rules{Names: PolicyVariables}
	p.Check(rules)
	err := rules.Err("policy")
	for _, want := range []string{"BACKOFF_MAX=16m0s must be within 0s..15m0s", "MAX_FAILURES=0 must be within 1..100",
		"RETENTION=23h0m0s must be within 24h0m0s..87600h0m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("out-of-range values reported %v, want %q", err, want)
		}
	}
}
