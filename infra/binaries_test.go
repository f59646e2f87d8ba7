package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckBinaries(t *testing.T) {
	root := t.TempDir()
	at := func(path string, age time.Duration) string {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); err != nil {
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hour := time.Hour
	at("functions/agent/main.go", 3*hour)
	at("functions/timer/main.go", 3*hour)
	at("shared/queue/queue.go", 3*hour)
	at("go.mod", 3*hour)
	at("go.sum", 3*hour)
	at("build/agent/bootstrap", 2*hour)
	at("build/timer/bootstrap", 2*hour)
	code := filepath.Join(root, "build")
	fns := []string{"agent", "timer"}
	sources := []string{filepath.Join(root, "functions"), filepath.Join(root, "shared"), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	check := func(name string, wantErr ...string) {
		t.Helper()
		err := checkBinaries(code, fns, sources)
		if len(wantErr) == 0 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return
		}
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		for _, w := range append(wantErr, "run `make build`") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", name, err, w)
			}
		}
	}
	check("binaries newer than every source")

	// Tests and testdata are not in the binaries.
	at("shared/queue/queue_test.go", 0)
	at("shared/queue/testdata/gen.go", 0)
	at("functions/agent/README.md", 0)
	check("a newer test, testdata file or non-Go file")

	at("shared/queue/queue.go", hour)
	check("a shared package changed", "build/agent/bootstrap", "build/timer/bootstrap", "shared/queue/queue.go")
	at("build/agent/bootstrap", 0)
	at("build/timer/bootstrap", 0)
	check("rebuilt")

	at("go.sum", -time.Minute)
	check("go.sum changed", "go.sum")
	at("build/agent/bootstrap", -2*time.Minute)
	at("build/timer/bootstrap", -2*time.Minute)
	check("rebuilt again")

	at("functions/timer/main.go", -3*time.Minute)
	check("one function changed", "functions/timer/main.go")

	if err := os.Remove(filepath.Join(root, "build/agent/bootstrap")); err != nil {
		t.Fatal(err)
	}
	check("a binary missing", "build/agent/bootstrap is missing")

	if err := checkBinaries(code, fns, []string{filepath.Join(root, "nowhere")}); err == nil {
		t.Error("a missing source passed")
	}
}

// TestSourcesNameTheEmbeddedCatalog: the functions embed the workflow
// catalog, which is no .go file, so a changed catalog must make the
// binaries stale on its own: else the stack would deploy the Agents of a
// version the binaries do not run.
func TestSourcesNameTheEmbeddedCatalog(t *testing.T) {
	const file = "shared/catalog/workflows.json"
	found := false
	for _, s := range Sources {
		found = found || s == file
	}
	if !found {
		t.Fatalf("Sources %v do not name %s", Sources, file)
	}
	if _, err := os.Stat(filepath.Join("..", file)); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write := func(path string, age time.Duration) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	write("shared/catalog/catalog.go", 2*time.Hour)
	write("build/agent/bootstrap", time.Hour)
	write(file, 0)
	err := checkBinaries(filepath.Join(root, "build"), []string{"agent"}, []string{filepath.Join(root, "shared"), filepath.Join(root, file)})
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("a changed catalog: err = %v, want it named", err)
	}
}
