package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sources are what the bootstrap binaries are built from, relative to the
// repository root (where the CDK CLI runs the app): the functions, the
// packages they share, the code steps' packages, the module's
// requirements, and the workflow catalog they embed (not a .go file, so
// named on its own): the stack deploys the Agents of the catalog it reads,
// which must be the one the binaries run.
var Sources = []string{"functions", "shared", "steps", "shared/catalog/workflows.json", "go.mod", "go.sum"}

// checkBinaries refuses binaries older than their sources: every
// <codeDir>/<function>/bootstrap must exist and be at least as new as the
// newest .go file under a directory of sources (tests and testdata aside,
// which the binaries do not contain) and as each file of sources. Deploying
// older binaries would ship code other than the checked-out one.
func checkBinaries(codeDir string, functions, sources []string) error {
	var newest time.Time
	var newestPath string
	see := func(path string, info fs.FileInfo) {
		if info.ModTime().After(newest) {
			newest, newestPath = info.ModTime(), path
		}
	}
	for _, src := range sources {
		info, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("binaries: source %w", err)
		}
		if !info.IsDir() {
			see(src, info)
			continue
		}
		err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			see(path, info)
			return nil
		})
		if err != nil {
			return fmt.Errorf("binaries: %w", err)
		}
	}
	var errs []error
	for _, f := range functions {
		bin := filepath.Join(codeDir, f, "bootstrap")
		info, err := os.Stat(bin)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s is missing", bin))
		case info.ModTime().Before(newest):
			errs = append(errs, fmt.Errorf("%s (built %s) is older than %s (changed %s)",
				bin, info.ModTime().UTC().Format(time.RFC3339), newestPath, newest.UTC().Format(time.RFC3339)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w\nrun `make build` (make synth and make deploy build first), then synthesize again", errors.Join(errs...))
	}
	return nil
}
