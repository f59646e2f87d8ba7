package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestGoModAllowsGoInstallAtVersion: `go install
// github.com/sasflow/sas/cmd/sasctl@version` refuses a main module whose
// go.mod has replace or exclude directives (the infra module's replace is
// in its own go.mod, outside the module zip). The tool and ignore
// directives are fine.
func TestGoModAllowsGoInstallAtVersion(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Module  struct{ Path string }
		Replace []json.RawMessage
		Exclude []json.RawMessage
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != "github.com/sasflow/sas" || len(mod.Replace) > 0 || len(mod.Exclude) > 0 {
		t.Fatalf("go.mod of %s has %d replace and %d exclude directives: go install ...@version would refuse it", mod.Module.Path, len(mod.Replace), len(mod.Exclude))
	}
}

// TestGoInstall installs sasctl as an operator would, into a GOBIN of its
// own, and runs the binary.
func TestGoInstall(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	cmd := exec.Command("go", "install", "./cmd/sasctl")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/sasctl: %v\n%s", err, out)
	}
	exe := filepath.Join(bin, "sasctl")
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	for args, want := range map[string]string{"version": "sasctl (devel)", "--help": "dlq redrive --queue NAME"} {
		out, err := exec.Command(exe, strings.Fields(args)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("sasctl %s: %v\n%s", args, err, out)
		}
	}
}
