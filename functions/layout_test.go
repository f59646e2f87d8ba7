// Package functions_test checks the layout of what the functions ship:
// shared/ holds exactly the packages some function imports, and no function
// imports the local stack or a test kit (internal/).
package functions_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sasflow/sas"

// goList runs `go list` from the repository root with args.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

func TestSharedHoldsWhatTheFunctionsShip(t *testing.T) {
	t.Parallel()
	shipped := goList(t, "-deps", "./functions/...")
	for _, p := range shipped {
		if strings.HasPrefix(p, module+"/internal/") {
			t.Errorf("a function ships %s: the local stack and the test kits must stay out of the functions", p)
		}
	}
	for _, p := range goList(t, "./shared/...") {
		if !slices.Contains(shipped, p) {
			t.Errorf("%s is in shared/ but no function imports it: move it under internal/", p)
		}
	}
}
