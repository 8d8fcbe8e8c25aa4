package imports

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// applyFiles are the files that write (each holds an apply step); the
// plan files (plan*.go) are pure, and read top-down: no planner or helper
// of theirs calls into an apply file (issue 58: the planners' helpers
// lived in the apply files, which called the planners back).
var applyFiles = []string{"reconcile.go", "slices.go", "serviceimport.go", "derivedservice.go", "status.go"}

// TestPlanFilesDoNotCallApplyFiles: every function a plan file calls is
// declared outside the apply files (matched by name: a method is named by
// its selector).
func TestPlanFilesDoNotCallApplyFiles(t *testing.T) {
	fset := token.NewFileSet()
	declaredIn := map[string]string{} // function or method name → apply file
	for _, name := range applyFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				declaredIn[fd.Name.Name] = name
			}
		}
	}
	plans, err := filepath.Glob("plan*.go")
	if err != nil || len(plans) == 0 {
		t.Fatalf("no plan files (%v)", err)
	}
	for _, name := range plans {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var callee string
				switch fn := ast.Unparen(call.Fun).(type) {
				case *ast.Ident:
					callee = fn.Name
				case *ast.SelectorExpr:
					callee = fn.Sel.Name
				}
				if file, ok := declaredIn[callee]; ok {
					t.Errorf("%s: %s calls %s of %s, an apply file: move it to a plan file, or the planner's caller should call it", fset.Position(call.Pos()), fd.Name.Name, callee, file)
				}
				return true
			})
		}
	}
}
