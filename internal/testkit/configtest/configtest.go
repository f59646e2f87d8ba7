// Package configtest runs the tables every actor's configuration tests
// share: environments that must load into a given Config, and environments
// that must be refused with exactly the problems an operator would read.
package configtest

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/config"
)

// Env is a getenv over base with the pairs of kv set on top; a value of ""
// unsets a variable, as the loaders treat an empty variable as unset.
func Env(base map[string]string, kv ...string) func(string) string {
	m := maps.Clone(base)
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(name string) string { return m[name] }
}

// Problems fails unless err reports exactly the problems in want: one a
// line, as many lines as want has entries, each entry found once. Once
// matters: a value that does not parse must not be reported again by a
// rule.
func Problems(t testing.TB, call string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want errors %q", call, want)
	}
	for _, w := range want {
		if n := strings.Count(err.Error(), w); n != 1 {
			t.Errorf("%s = %q mentions %q %d times, want once", call, err, w, n)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("%s = %q reports %d problems, want %d", call, err, n, len(want))
	}
}

// Loader is an actor's LoadConfig.
type Loader[C any] func(getenv func(string) string) (C, error)

// Loaded is an environment that must load: the variables set on top of the
// base environment, and the Config they make.
type Loaded[C any] struct {
	Name string
	Set  []string
	Want C
}

// Loads runs each case, in parallel: load must return exactly Want, and
// what it returns must pass the Config's own rules.
func Loads[C config.Checker](t *testing.T, load Loader[C], base map[string]string, cases []Loaded[C]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			got, err := load(Env(base, tc.Set...))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if !reflect.DeepEqual(got, tc.Want) {
				t.Errorf("LoadConfig =\n%+v\nwant\n%+v", got, tc.Want)
			}
			if err := config.Validate("loaded config", got); err != nil {
				t.Errorf("a loaded config breaks its rules: %v", err)
			}
		})
	}
}

// Refused is an environment that must be refused: the variables set on top
// of the base environment, and every problem reported (see Problems).
type Refused struct {
	Name string
	Set  []string
	Want []string
}

// Refuses runs each case, in parallel: load must fail with exactly the
// problems in Want.
func Refuses[C any](t *testing.T, load Loader[C], base map[string]string, cases []Refused) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			_, err := load(Env(base, tc.Set...))
			Problems(t, "LoadConfig", err, tc.Want...)
		})
	}
}

// ReadsExactly fails unless the variables a config reads (its map of field
// to variable, as config.Load takes it) are exactly want: the list
// shared/topology's descriptor gives for the actor, so the stack, the docs
// and the code cannot drift.
func ReadsExactly(t testing.TB, who string, variables map[string]string, want []string) {
	t.Helper()
	got := slices.Compact(slices.Sorted(maps.Values(variables)))
	if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
		t.Errorf("%s reads %v, its descriptor lists %v", who, got, w)
	}
}
