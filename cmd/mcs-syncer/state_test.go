package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packageStateAllowed are the package-level variables of internal/ that
// look like state and are not, each with why.
var packageStateAllowed = map[string]string{
	"internal/publish/compact.go trueValue":  "the shared targets of compacted conditions' pointers (memory, issue 56): nothing writes through them",
	"internal/publish/compact.go falseValue": "as trueValue",
	"internal/version/version.go Version":    "set by the linker (-X), read only",
	"internal/version/version.go Revision":   "set by the linker (-X), read only",
}

// TestNoPackageLevelState: no package of internal/ keeps state in a
// package-level variable (a metric, a lock, a map, a counter, a tunable
// a test could change), so that two mcs-syncers in one process (two
// tests' syncers, say) share nothing: each is built from what syncer.New
// is given. Tables, sentinel errors, metric descriptions and interface
// checks are not state; a value that could be a constant is declared one.
func TestNoPackageLevelState(t *testing.T) {
	root := filepath.Join("..", "..")
	goFiles, _ := sourcesAndDocs(t, root)
	fset := token.NewFileSet()
	checked := 0
	for _, path := range goFiles {
		rel, _ := filepath.Rel(root, path)
		if !strings.HasPrefix(rel, "internal"+string(filepath.Separator)) || strings.HasSuffix(rel, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		text := func(n ast.Node) string {
			if n == nil {
				return ""
			}
			return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
		}
		for _, decl := range file.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if name.Name == "_" {
						continue // an interface check
					}
					checked++
					var value ast.Expr
					if i < len(vs.Values) {
						value = vs.Values[i]
					}
					why := stateIn(text(vs.Type)+" "+text(value), value)
					key := filepath.ToSlash(rel) + " " + name.Name
					if why != "" && packageStateAllowed[key] == "" {
						t.Errorf("%s: package-level var %s is %s: keep it in the object that uses it (or make it a const)", rel, name.Name, why)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d package-level vars: the tree's layout changed", checked)
	}
}

// stateIn says what makes a package-level variable state ("" if
// nothing), from its type and value's source and its value.
func stateIn(source string, value ast.Expr) string {
	for _, s := range []struct{ marker, what string }{
		{"sync.", "a lock"}, {"atomic.", "a counter"}, {"make(", "a map or channel"}, {"map[", "a map"}, {"new(", "a pointer to a zero value"},
	} {
		if strings.Contains(source, s.marker) {
			return s.what
		}
	}
	if strings.Contains(source, "prometheus.New") && !strings.Contains(source, "prometheus.NewDesc(") {
		return "a metric"
	}
	switch v := value.(type) {
	case *ast.BasicLit, *ast.BinaryExpr:
		return "a value a test could change"
	case *ast.Ident:
		if v.Name == "true" || v.Name == "false" {
			return "a value a test could change"
		}
	case *ast.CallExpr:
		if fn, ok := v.Fun.(*ast.Ident); ok && strings.HasPrefix(fn.Name, "new") {
			return "an object of the package's own (" + fn.Name + ")"
		}
	}
	return ""
}
