package stepgen

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

// Module is the application's module path.
const Module = "github.com/sasflow/sas"

// The folders, relative to the repository root: the code steps, and the
// generated functions.
const (
	StepsDir     = "steps"
	FunctionsDir = "functions/steps"
	// Registry is the generated registry of the code steps.
	Registry = StepsDir + "/registry.go"
)

// Command is what writes the generated files.
const Command = "make steps"

// CodeStep is one folder of steps/.
type CodeStep struct {
	// Name is the step's name, its folder's.
	Name     string
	Manifest Manifest
}

// Package is the step's Go package name.
func (c CodeStep) Package() string { return Package(c.Name) }

// Function is the folder of its Lambda's main, relative to functions/.
func (c CodeStep) Function() string { return "steps/" + c.Name }

// Discover reads every code step under root/steps, in name order: each
// folder must hold step.json, which must parse, and Go files of the
// package named for the step.
func Discover(root string) ([]CodeStep, error) {
	entries, err := os.ReadDir(filepath.Join(root, StepsDir))
	if err != nil {
		return nil, fmt.Errorf("code steps: %w", err)
	}
	var out []CodeStep
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		dir := filepath.Join(root, StepsDir, name)
		b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		if err != nil {
			errs = append(errs, fmt.Errorf("code step %s: every folder of %s/ is a code step and needs its %s: %w", name, StepsDir, ManifestFile, err))
			continue
		}
		m, err := Parse(name, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := packageOf(dir, Package(name)); err != nil {
			errs = append(errs, fmt.Errorf("code step %s: %w", name, err))
			continue
		}
		out = append(out, CodeStep{Name: name, Manifest: m})
	}
	return out, errors.Join(errs...)
}

// packageOf checks that dir's Go files (tests aside) are package want.
func packageOf(dir, want string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if pf.Name.Name != want {
			return fmt.Errorf("%s is package %s, want %s (the step's name without dashes)", f, pf.Name.Name, want)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s has no Go file of package %s", dir, want)
	}
	return nil
}

// Live checks that every code step is a step of some live version (live
// names every step of the deployed catalog): a folder no version uses
// would be deployed for nothing.
func Live(steps []CodeStep, live []string) error {
	var errs []error
	for _, s := range steps {
		if !slices.Contains(live, s.Name) {
			errs = append(errs, fmt.Errorf("%s/%s is a step of no live workflow version (shared/catalog/workflows.json): add it to a version, or remove the folder", StepsDir, s.Name))
		}
	}
	return errors.Join(errs...)
}

// Generate is every generated file for steps, by its path from the
// repository root (slash-separated): each step's main, and the registry.
func Generate(steps []CodeStep) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range steps {
		b, err := render(mainTemplate, s)
		if err != nil {
			return nil, err
		}
		out[path.Join(FunctionsDir, s.Name, "main.go")] = b
	}
	b, err := render(registryTemplate, steps)
	if err != nil {
		return nil, err
	}
	out[Registry] = b
	return out, nil
}

func render(t *template.Template, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("stepgen: %s: %w", t.Name(), err)
	}
	b, err := format.Source(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("stepgen: %s: %w\n%s", t.Name(), err, buf.Bytes())
	}
	return b, nil
}

// Stale lists what differs between the generated files and those under
// root: a file missing or different, and a folder of functions/steps that
// no code step has.
func Stale(root string, files map[string][]byte) ([]string, error) {
	var out []string
	for _, p := range sortedFiles(files) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		switch {
		case errors.Is(err, os.ErrNotExist):
			out = append(out, p+" is missing")
		case err != nil:
			return nil, err
		case !bytes.Equal(b, files[p]):
			out = append(out, p+" is stale")
		}
	}
	extra, err := extraFunctions(root, files)
	if err != nil {
		return nil, err
	}
	for _, dir := range extra {
		out = append(out, dir+" has no code step")
	}
	return out, nil
}

// extraFunctions are the folders of functions/steps no generated main is
// in.
func extraFunctions(root string, files map[string][]byte) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(FunctionsDir)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		dir := path.Join(FunctionsDir, e.Name())
		if _, ok := files[path.Join(dir, "main.go")]; !ok || !e.IsDir() {
			out = append(out, dir)
		}
	}
	return out, nil
}

// Write writes files under root and removes the folders of
// functions/steps that no code step has any more.
func Write(root string, files map[string][]byte) error {
	extra, err := extraFunctions(root, files)
	if err != nil {
		return err
	}
	for _, dir := range extra {
		if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(dir))); err != nil {
			return err
		}
	}
	for _, p := range sortedFiles(files) {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, files[p]) {
			continue // unchanged: keep its time, so make sees nothing new
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sortedFiles(files map[string][]byte) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

const header = "// Code generated by stepgen (" + Command + "); DO NOT EDIT.\n\n"

var funcs = template.FuncMap{"module": func() string { return Module }, "header": func() string { return header }}

var mainTemplate = template.Must(template.New("main.go").Funcs(funcs).Parse(`{{header}}
// Command {{.Name}} is the Lambda of the code step {{.Name}}
// (steps/{{.Name}}): the step, with its ledger, behind the Agent's handler.
package main

import (
	"github.com/sasflow/sas/shared/codestep"
	{{.Package}} "{{module}}/steps/{{.Name}}"
)

func main() { codestep.Main("{{.Name}}", {{.Package}}.New) }
`))

var registryTemplate = template.Must(template.New("registry.go").Funcs(funcs).Parse(`{{header}}
package steps

import (
{{- if .}}
	_ "embed"
{{end}}
	"github.com/sasflow/sas/shared/step"
{{- range .}}
	{{.Package}} "{{module}}/steps/{{.Name}}"
{{- end}}
)

// All is every code step's constructor, by step name.
var All = map[string]step.New{
{{- range .}}
	"{{.Name}}": {{.Package}}.New,
{{- end}}
}

// Manifests is every code step's step.json, by step name.
var Manifests = map[string][]byte{
{{- range .}}
	"{{.Name}}": {{.Package}}Manifest,
{{- end}}
}
{{range .}}
//go:embed {{.Name}}/step.json
var {{.Package}}Manifest []byte
{{end}}`))
