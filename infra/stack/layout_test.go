package stack_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// maxNewLines bounds New: it only composes the actors (each in its own
// file) and what they share, so a newcomer reads the whole stack's shape
// on one screen and finds an actor's resources in its file.
const maxNewLines = 80

func TestNewOnlyComposes(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "stack.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range file.Decls {
		if f, ok := d.(*ast.FuncDecl); ok && f.Recv == nil && f.Name.Name == "New" {
			lines := fset.Position(f.End()).Line - fset.Position(f.Pos()).Line + 1
			if lines > maxNewLines {
				t.Errorf("New is %d lines, more than %d: give what it grew by a function of the actor's file (submission.go, scheduler.go, ...)", lines, maxNewLines)
			}
			return
		}
	}
	t.Fatal("stack.go declares no func New")
}
