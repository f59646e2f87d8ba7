package topology_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/topology"
)

// No environment variable is spelled outside its actor's config (shared/)
// and the descriptor: the stack, the local stack, the functions and the
// commands name each by its topology constant, so renaming one is one edit
// and a typo does not compile.
func TestVariablesAreSpelledOnlyInTheirConfigs(t *testing.T) {
	t.Parallel()
	names := topology.Variables()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var found int
	for _, dir := range []string{"infra", "internal", "functions", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			found++
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) {
					rel, _ := filepath.Rel(root, fset.Position(lit.Pos()).Filename)
					t.Errorf("%s:%d spells %q: use topology.Env... (shared/topology/actors.go)", rel, fset.Position(lit.Pos()).Line, s)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The walk itself could miss everything (a wrong root).
	if found < 50 {
		t.Fatalf("scanned %d Go files under %s; the repository has more", found, root)
	}
}
