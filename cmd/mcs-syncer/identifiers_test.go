package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ambiguousPackages are package names of ours that the docs also use for
// other projects' packages (mcs-api's v1alpha1, Go's own version), or that
// name no importable package: a name cited under them is not checked.
var ambiguousPackages = map[string]bool{"main": true, "v1alpha1": true, "v1beta1": true, "version": true}

// TestDocsCiteExistingIdentifiers: every Go name a doc cites in backticks
// exists in the code: a test or benchmark (`TestX`, `BenchmarkX`), or a
// name of one of our packages (`pkg.Name`, `pkg.Type.Method`), so that a
// rename or a removal cannot leave a doc pointing at nothing.
func TestDocsCiteExistingIdentifiers(t *testing.T) {
	root := filepath.Join("..", "..")
	goFiles, docs := sourcesAndDocs(t, root)
	// declared[package name] holds its top-level names and its types'
	// methods as Type.Method; tests holds every Test and Benchmark func.
	declared := map[string]map[string]bool{}
	tests := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range goFiles {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimSuffix(file.Name.Name, "_test")
		if declared[pkg] == nil {
			declared[pkg] = map[string]bool{}
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					name = receiverType(d.Recv.List[0].Type) + "." + name
				} else if strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Benchmark") || strings.HasPrefix(name, "Fuzz") {
					tests[name] = true
				}
				declared[pkg][name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[pkg][s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[pkg][n.Name] = true
						}
					}
				}
			}
		}
	}
	cited := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*){0,2})(?:\\(\\))?`")
	testName := regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z0-9_]`)
	checked := 0
	for _, path := range docs {
		doc, _ := filepath.Rel(root, path)
		for _, m := range cited.FindAllStringSubmatch(docText(t, path), -1) {
			name := m[1]
			pkg, rest, qualified := strings.Cut(name, ".")
			switch {
			case !qualified && testName.MatchString(name):
				checked++
				if !tests[name] {
					t.Errorf("%s cites `%s`: no such test, benchmark or fuzz target", doc, name)
				}
			case qualified && declared[pkg] != nil && !ambiguousPackages[pkg] && isExported(rest):
				checked++
				if !declared[pkg][rest] {
					t.Errorf("%s cites `%s`: package %s declares no %s", doc, name, pkg, rest)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d citations: the docs' or the pattern's format changed", checked)
	}
}

// sourcesAndDocs walks the work tree for Go files and Markdown docs,
// leaving out hidden folders (.cache: the built tools' sources) and bin.
func sourcesAndDocs(t *testing.T, root string) (goFiles, docs []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".go":
			goFiles = append(goFiles, p)
		case ".md":
			docs = append(docs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return goFiles, docs
}

// receiverType is the name of a method's receiver type (T of T, *T, T[P]).
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func isExported(name string) bool { return name != "" && name[0] >= 'A' && name[0] <= 'Z' }

// docText is a Markdown file's text outside its fenced blocks.
func docText(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return withoutCodeBlocks(string(raw))
}

// withoutCodeBlocks drops fenced blocks: shell sessions and YAML are not
// citations.
func withoutCodeBlocks(md string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// TestDocLinksResolve: every relative link between the docs names a file
// that exists and, with #anchor, a heading of it (GitHub's anchors: lower
// case, punctuation dropped, spaces as hyphens, repeats numbered), so that
// a renamed heading or a moved page cannot leave a link pointing nowhere.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	_, docs := sourcesAndDocs(t, root)
	anchors := map[string]map[string]bool{}
	for _, path := range docs {
		anchors[filepath.Clean(path)] = headingAnchors(t, path)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, path := range docs {
		doc, _ := filepath.Rel(root, path)
		for _, m := range link.FindAllStringSubmatch(docText(t, path), -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file := filepath.Clean(path)
			if target != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(path), target))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links to %s: %v", doc, m[1], err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			checked++
			if !anchors[file][anchor] {
				t.Errorf("%s links to %s: no heading of %s has the anchor #%s", doc, m[1], filepath.Base(file), anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d anchored links: the docs' or the pattern's format changed", checked)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	out, seen := map[string]bool{}, map[string]int{}
	for _, line := range strings.Split(docText(t, path), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
