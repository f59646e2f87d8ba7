package configtest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/internal/testkit/tbrecord"
)

func TestEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{"A": "1", "B": "2"}
	get := configtest.Env(base, "B", "", "C", "3")
	for name, want := range map[string]string{"A": "1", "B": "", "C": "3", "D": ""} {
		if got := get(name); got != want {
			t.Errorf("Env(%s) = %q, want %q", name, got, want)
		}
	}
	if base["B"] != "2" || len(base) != 2 {
		t.Errorf("Env changed its base: %v", base)
	}
}

func TestProblems(t *testing.T) {
	t.Parallel()
	two := errors.Join(errors.New("A is required"), errors.New(`B="x" is not an integer`))
	for _, tc := range []struct {
		name string
		err  error
		want []string
		fail string // a substring of the failure; "" when the check passes
	}{
		{"exactly these", two, []string{"A is required", "B="}, ""},
		{"no error", nil, []string{"A is required"}, "succeeded"},
		{"one problem missing", two, []string{"A is required", "B=", "C"}, `mentions "C" 0 times`},
		{"one problem more", two, []string{"A is required"}, "reports 2 problems, want 1"},
		{"a problem twice", errors.Join(two, errors.New("A is required")), []string{"A is required", "B=", "A"}, `mentions "A is required" 2 times`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msgs := tbrecord.Run(func(tb testing.TB) { configtest.Problems(tb, "LoadConfig", tc.err, tc.want...) })
			if tc.fail == "" {
				if len(msgs) > 0 {
					t.Fatalf("Problems failed: %q", msgs)
				}
				return
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.fail) {
				t.Errorf("Problems failed with %q, want a failure saying %q", msgs, tc.fail)
			}
		})
	}
}

func TestReadsExactly(t *testing.T) {
	t.Parallel()
	// Two fields may read one variable; the descriptor lists it once.
	vars := map[string]string{"Orders": "A_TABLE", "State": "B_TABLE", "Tables": "A_TABLE"}
	for _, tc := range []struct {
		name string
		want []string
		fail bool
	}{
		{"the same, in another order", []string{"B_TABLE", "A_TABLE"}, false},
		{"one the descriptor lacks", []string{"A_TABLE"}, true},
		{"one the config does not read", []string{"A_TABLE", "B_TABLE", "C_SETTING"}, true},
	} {
		got := tbrecord.Run(func(tb testing.TB) { configtest.ReadsExactly(tb, "actor", vars, tc.want) })
		if (len(got) > 0) != tc.fail {
			t.Errorf("%s: failures %q, want failing %v", tc.name, got, tc.fail)
		}
	}
}
