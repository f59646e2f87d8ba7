package workflow

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
// message (1 MiB) or a state record larger than a DynamoDB item (400 KiB) is
// refused, naming the limit, before any order runs into it; one whose worst
// case fits both is accepted, however far past 256 KiB its messages go. With
// these limits the item binds first: the record keeps every output a
// request carries, and more.
func TestDefinitionRejectsPayloadsThatCannotFit(t *testing.T) {
	t.Parallel()
	step := func(name string, out int, undo bool) Step {
		return Step{Name: name, Budget: time.Second, MaxOutputBytes: out, Compensable: undo}
	}
	// itemRoom is what the record leaves for one step's outputs: the item
	// less its fixed part, the input and one step's history.
	const itemRoom = MaxItemBytes - itemFixedBytes - MaxInputBytes - itemStepBytes
	for _, tc := range []struct {
		name  string
		steps []Step
		want  []string // nil for a definition that fits
	}{
		{"the default fits", Reference().Steps, nil},
		{"two large outputs still fit a request", []Step{step("a", 100<<10, false), step("b", 100<<10, false), step("c", 0, false)}, nil},
		// Each of these fits a 1 MiB message and the item, and not a 256 KiB
		// message.
		{"a reply over 256 KiB", []Step{step("a", 300<<10, false)}, nil},
		{"a request over 256 KiB", []Step{step("a", 130<<10, false), step("b", 130<<10, false), step("c", 0, false)}, nil},
		{"an undo request over 256 KiB", []Step{step("a", 200<<10, false), step("b", 40<<10, true)}, nil},
		{"one output as large as the item allows", []Step{step("a", itemRoom, false)}, nil},

		{"one byte more than the item allows", []Step{step("a", itemRoom+1, false)}, []string{"DynamoDB item limit of 409600"}},
		{"an undo output counts in the record too", []Step{step("a", itemRoom/2+1, true)}, []string{"DynamoDB item limit"}},
		{"outputs and undo outputs over the item limit", []Step{
			// Every request fits (220 KiB of outputs at most), but the record
			// keeps each output twice: the step's and its undo's.
			step("a", 55<<10, true), step("b", 55<<10, true), step("c", 55<<10, true), step("d", 55<<10, true),
		}, []string{"DynamoDB item limit"}},
		{"an output that fits a reply but not the item", []Step{step("a", MaxMessageBytes-messageEnvelopeBytes, false)}, []string{"DynamoDB item limit"}},
		{"a request over the SQS limit, and so the item", []Step{step("a", 600<<10, false), step("b", 600<<10, false), step("c", 0, false)},
			[]string{`the request of step "c" can reach 1249280 bytes`, "SQS limit of 1048576", "DynamoDB item limit"}},
		{"an undo request over the SQS limit", []Step{step("a", 600<<10, false), step("b", 500<<10, true)},
			[]string{`the undo request of step "b" can reach`, "SQS limit of 1048576", "DynamoDB item limit"}},
		{"an output that cannot fit a reply", []Step{step("a", 1<<20, false)}, []string{"output limit 1048576 must be within 0..1044480"}},
		{"a negative limit", []Step{step("a", -1, false)}, []string{"output limit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Definition{Name: "w", Version: 1, Steps: tc.steps}.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one saying %q", err, want)
				}
			}
		})
	}
}

// TestEachSizeCheckHoldsItsOwnLimit: each of Validate's size checks
// refuses on its own, held to a limit of the test's, so that the SQS checks,
// which the item check overtakes at the real limits, still work.
func TestEachSizeCheckHoldsItsOwnLimit(t *testing.T) {
	t.Parallel()
	step := func(name string, out int, undo bool) Step {
		return Step{Name: name, Budget: time.Second, MaxOutputBytes: out, Compensable: undo}
	}
	const noLimit = 1 << 40
	for _, tc := range []struct {
		name          string
		message, item int
		steps         []Step
		want          string // "" for a definition that fits
	}{
		{"a 256 KiB message: two large outputs fit a request", 256 << 10, noLimit,
			[]Step{step("a", 100<<10, false), step("b", 100<<10, false), step("c", 0, false)}, ""},
		{"a 256 KiB message: the third request would carry 260 KiB of outputs", 256 << 10, noLimit,
			[]Step{step("a", 130<<10, false), step("b", 130<<10, false), step("c", 0, false)}, `the request of step "c" can reach`},
		{"a 256 KiB message: an undo carries its own output too", 256 << 10, noLimit,
			[]Step{step("a", 120<<10, true), step("b", 120<<10, true)}, `the undo request of step "b" can reach`},
		{"a 256 KiB message: an output that cannot fit a reply", 256 << 10, noLimit,
			[]Step{step("a", 256<<10, false)}, "output limit"},
		{"the item alone", noLimit, 100 << 10,
			[]Step{step("a", 40<<10, true)}, "DynamoDB item limit of 102400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := errors.Join(Definition{Name: "w", Version: 1, Steps: tc.steps}.checkSizes(tc.message, tc.item)...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestValidateRefusesEveryWorstCaseOverALimit: over many definitions, some
// near each limit, Validate refuses exactly those whose worst request or
// undo request exceeds an SQS message, or whose worst record exceeds a
// DynamoDB item, or whose output limit could not fit a reply.
func TestValidateRefusesEveryWorstCaseOverALimit(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	// Output limits around the bounds that matter: the item's room for one
	// output, half of it (an undo doubles it), a reply's, and the old
	// 256 KiB message's.
	near := []int{0, 1, DefaultMaxOutputBytes, 100 << 10, 186 << 10, 187 << 10, 252 << 10, 256 << 10,
		373 << 10, 374 << 10, 512 << 10, MaxMessageBytes - messageEnvelopeBytes, MaxMessageBytes}
	accepted, refused := 0, 0
	for i := range 5000 {
		d := Definition{Name: "w", Version: 1, Steps: make([]Step, 1+rng.IntN(6))}
		for k := range d.Steps {
			out := near[rng.IntN(len(near))]
			if rng.IntN(2) == 0 {
				out = rng.IntN(400 << 10 / len(d.Steps))
			}
			d.Steps[k] = Step{Name: fmt.Sprintf("s%d", k), Budget: time.Second, MaxOutputBytes: out, Compensable: rng.IntN(2) == 0}
		}
		over := d.WorstItemBytes() > MaxItemBytes
		for k, s := range d.Steps {
			over = over || s.MaxOutputBytes > MaxMessageBytes-messageEnvelopeBytes ||
				d.WorstRequestBytes(k, false) > MaxMessageBytes || s.Compensable && d.WorstRequestBytes(k, true) > MaxMessageBytes
		}
		err := d.Validate()
		if over != (err != nil) {
			t.Fatalf("definition %d %+v: worst item %d, over a limit %v; Validate: %v", i, d.Steps, d.WorstItemBytes(), over, err)
		}
		if over {
			refused++
		} else {
			accepted++
		}
	}
	// Both verdicts are common, so neither side of the equivalence is
	// vacuous.
	if accepted < 500 || refused < 500 {
		t.Errorf("%d accepted, %d refused: the definitions miss one side of the limits", accepted, refused)
	}
}

// TestTheItemBindsBeforeTheMessage: every request a definition can send is
// smaller than its record, so a definition whose record fits a DynamoDB item
// has every message within SQS's; which is why the largest output limits
// Validate admits are the item's.
func TestTheItemBindsBeforeTheMessage(t *testing.T) {
	t.Parallel()
	if MaxItemBytes >= MaxMessageBytes {
		t.Fatalf("the item limit %d is not under the message limit %d", MaxItemBytes, MaxMessageBytes)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		d := Definition{Name: "w", Version: 1, Steps: make([]Step, 1+rng.IntN(6))}
		for k := range d.Steps {
			d.Steps[k] = Step{Name: fmt.Sprintf("s%d", k), Budget: time.Second, MaxOutputBytes: rng.IntN(300 << 10), Compensable: rng.IntN(2) == 0}
		}
		for k := range d.Steps {
			for _, undo := range []bool{false, true} {
				if n := d.WorstRequestBytes(k, undo); n >= d.WorstItemBytes() {
					t.Fatalf("%+v: request %d (undo %v) of %d bytes, the record's worst %d", d.Steps, k, undo, n, d.WorstItemBytes())
				}
			}
		}
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
