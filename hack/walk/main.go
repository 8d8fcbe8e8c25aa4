// Command walk measures how far a reader travels to follow one call path:
// from an entry function, it visits every function of the packages in
// scope that the entry calls, depth first and in source order, each once,
// and prints each stop (function and file) and three figures: stops, files,
// and returns (a stop in a file the walk had already left, not the file of
// the stop before). Calls through interfaces and function values are not
// followed (their callee is not known without running the code).
//
//	cd hack/walk && go run . -dir ../.. -entry '(*internal/imports.Controller).reconcile' -scope internal/imports
//
// Its figures are in docs/architecture.md ("One way through each side").
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	dir := flag.String("dir", ".", "the module's root")
	entry := flag.String("entry", "", "the entry function as go/types names it, its package relative to the module: pkg.Func or (*pkg.Type).Method")
	scope := flag.String("scope", "", "comma-separated packages, relative to the module, whose functions are stops")
	quiet := flag.Bool("q", false, "print the figures only")
	maxDepth := flag.Int("depth", -1, "the deepest call followed (the entry is 0); -1: every one")
	flag.Parse()
	if err := run(*dir, *entry, strings.Split(*scope, ","), *maxDepth, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
}

// walker holds the loaded packages and the walk so far.
type walker struct {
	maxDepth int
	decls    map[*types.Func]*ast.FuncDecl
	files    map[*ast.FuncDecl]string
	infos    map[*ast.FuncDecl]*types.Info
	visited  map[*types.Func]bool
	stops    []stop
}

type stop struct {
	name, file string
	depth      int
}

func run(dir, entry string, scope []string, maxDepth int, quiet bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	module, err := modulePath(abs)
	if err != nil {
		return err
	}
	var patterns []string
	for _, p := range scope {
		patterns = append(patterns, module+"/"+strings.TrimSpace(p))
	}
	cfg := &packages.Config{Dir: abs, Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return err
	}
	w := &walker{maxDepth: maxDepth, decls: map[*types.Func]*ast.FuncDecl{}, files: map[*ast.FuncDecl]string{}, infos: map[*ast.FuncDecl]*types.Info{}, visited: map[*types.Func]bool{}}
	var start *types.Func
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		for i, f := range p.Syntax {
			file, _ := filepath.Rel(abs, p.CompiledGoFiles[i])
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				fn := p.TypesInfo.Defs[fd.Name].(*types.Func)
				w.decls[fn], w.files[fd], w.infos[fd] = fd, file, p.TypesInfo
				if name(fn, module) == entry {
					start = fn
				}
			}
		}
	}
	if start == nil {
		return fmt.Errorf("entry %s not found in %v", entry, scope)
	}
	w.visit(start, 0, module)
	files, returns := map[string]bool{}, 0
	for i, s := range w.stops {
		if files[s.file] && s.file != w.stops[i-1].file {
			returns++
		}
		files[s.file] = true
		if !quiet {
			fmt.Printf("%s%s  (%s)\n", strings.Repeat("  ", s.depth), s.name, s.file)
		}
	}
	depth := "every depth"
	if maxDepth >= 0 {
		depth = fmt.Sprintf("depth ≤ %d", maxDepth)
	}
	fmt.Printf("%s (%s): %d stops in %d files, %d returns to a file already left\n", entry, depth, len(w.stops), len(files), returns)
	return nil
}

// visit records fn as a stop and walks the functions in scope that it
// calls, in source order.
func (w *walker) visit(fn *types.Func, depth int, module string) {
	w.visited[fn] = true
	fd := w.decls[fn]
	w.stops = append(w.stops, stop{name: name(fn, module), file: w.files[fd], depth: depth})
	info := w.infos[fd]
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		var id *ast.Ident
		switch f := ast.Unparen(call.Fun).(type) {
		case *ast.Ident:
			id = f
		case *ast.SelectorExpr:
			id = f.Sel
		case *ast.IndexExpr: // a generic function instantiated
			if sel, ok := f.X.(*ast.SelectorExpr); ok {
				id = sel.Sel
			} else if i, ok := f.X.(*ast.Ident); ok {
				id = i
			}
		}
		if id == nil {
			return true
		}
		callee, ok := info.Uses[id].(*types.Func)
		if !ok {
			return true
		}
		callee = callee.Origin()
		if _, known := w.decls[callee]; known && !w.visited[callee] && (w.maxDepth < 0 || depth < w.maxDepth) {
			w.visit(callee, depth+1, module)
		}
		return true
	})
}

// name is fn as -entry spells it: its package relative to the module.
func name(fn *types.Func, module string) string {
	full := fn.FullName() // (*path.Type).Method or path.Func
	return strings.ReplaceAll(full, module+"/", "")
}

// modulePath reads the module path from dir's go.mod.
func modulePath(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", dir)
}
