// Package eventsample loads the sample Lambda events in the repository's
// events/ folder for tests, strictly: an unknown or misspelt field, or data
// after the event, fails the test, so a sample cannot drift from the
// aws-lambda-go type it claims to be.
package eventsample

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sasflow/sas/shared/jsonstrict"
)

// Load decodes events/<name> into a T.
func Load[T any](tb testing.TB, name string) T {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(tb), name))
	if err != nil {
		tb.Fatal(err)
	}
	var ev T
	if err := jsonstrict.Decode(b, &ev); err != nil {
		tb.Fatalf("events/%s: %v", name, err)
	}
	return ev
}

// Dir returns the events/ folder, found by walking up to go.mod.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "events")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("eventsample: no go.mod above the working directory")
		}
		dir = parent
	}
}
