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
	decl := readDeclarations(t, goFiles)
	declared, tests := decl.names, decl.tests
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

// declarations are what the Go files of the tree declare.
type declarations struct {
	// names[package name] holds its top-level names, its types' methods
	// as Type.Method and their fields as Type.Field.
	names map[string]map[string]bool
	// types[package name] holds its types; open those with an embedded
	// field, whose promoted names are not listed.
	types, open map[string]map[string]bool
	// tests holds every Test, Benchmark and Fuzz func.
	tests map[string]bool
	// files are the parsed files, comments included, in goFiles' order.
	files []*ast.File
}

// readDeclarations parses goFiles.
func readDeclarations(t *testing.T, goFiles []string) declarations {
	t.Helper()
	d := declarations{names: map[string]map[string]bool{}, types: map[string]map[string]bool{},
		open: map[string]map[string]bool{}, tests: map[string]bool{}}
	fset := token.NewFileSet()
	for _, f := range goFiles {
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		d.files = append(d.files, file)
		pkg := strings.TrimSuffix(file.Name.Name, "_test")
		if d.names[pkg] == nil {
			d.names[pkg], d.types[pkg], d.open[pkg] = map[string]bool{}, map[string]bool{}, map[string]bool{}
		}
		for _, decl := range file.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				name := decl.Name.Name
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					name = receiverType(decl.Recv.List[0].Type) + "." + name
				} else if strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Benchmark") || strings.HasPrefix(name, "Fuzz") {
					d.tests[name] = true
				}
				d.names[pkg][name] = true
			case *ast.GenDecl:
				for _, s := range decl.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						d.names[pkg][s.Name.Name] = true
						d.types[pkg][s.Name.Name] = true
						d.addMembers(pkg, s)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							d.names[pkg][n.Name] = true
						}
					}
				}
			}
		}
	}
	return d
}

// addMembers lists the fields of a struct type and the methods of an
// interface as Type.Name; a type that embeds another is open.
func (d declarations) addMembers(pkg string, s *ast.TypeSpec) {
	var fields *ast.FieldList
	switch ty := s.Type.(type) {
	case *ast.StructType:
		fields = ty.Fields
	case *ast.InterfaceType:
		fields = ty.Methods
	default:
		d.open[pkg][s.Name.Name] = true // a defined type of another: its methods are not listed
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			d.open[pkg][s.Name.Name] = true
		}
		for _, n := range f.Names {
			d.names[pkg][s.Name.Name+"."+n.Name] = true
		}
	}
}

// TestCommentsCiteExistingIdentifiers: a Go comment that cites a name as
// Type.Name (a type of its own package) or pkg.Name (another package of
// ours) cites one that exists, as a method, a field or a top-level name,
// so that a rename or a removal cannot leave a comment pointing at
// nothing (Options.Connected and Tracker.Forget did).
func TestCommentsCiteExistingIdentifiers(t *testing.T) {
	root := filepath.Join("..", "..")
	goFiles, _ := sourcesAndDocs(t, root)
	d := readDeclarations(t, goFiles)
	cited := regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)\b`)
	checked := 0
	for i, file := range d.files {
		pkg := strings.TrimSuffix(file.Name.Name, "_test")
		path, _ := filepath.Rel(root, goFiles[i])
		for _, group := range file.Comments {
			for _, m := range cited.FindAllStringSubmatch(group.Text(), -1) {
				first, name := m[1], m[2]
				switch {
				case d.types[pkg][first] && !d.open[pkg][first]:
					checked++
					if !d.names[pkg][first+"."+name] {
						t.Errorf("%s: a comment cites %s.%s: %s has no method or field %s", path, first, name, first, name)
					}
				case first != pkg && d.names[first] != nil && !ambiguousPackages[first] && !d.types[pkg][first]:
					checked++
					if !d.names[first][name] {
						t.Errorf("%s: a comment cites %s.%s: package %s declares no %s", path, first, name, first, name)
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d citations: the comments' or the pattern's format changed", checked)
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

// apiWords are the camel-case words that package docs use for what the
// Kubernetes and MCS APIs name (kinds, fields, condition reasons, policy
// values), not Go names of ours.
var apiWords = map[string]bool{
	// kinds and types
	"ClusterProfiles": true, "ClusterProperty": true, "CustomResourceDefinition": true, "EndpointSlice": true,
	"ExecCredential": true, "GroupVersionKind": true, "ServiceExport": true, "ServiceImport": true, "EndpointGroups": true,
	"EndpointSelectors": true, "CoreDNS": true,
	// fields and values
	"ClusterIP": true, "ClusterIPs": true, "ClusterSetIP": true, "IfNotPresent": true, "imagePullPolicy": true,
	"nodeName": true, "targetRef": true, "provideClusterInfo": true, "publishNotReadyAddresses": true, "groupName": true,
	"exportedAnnotations": true, "exportedLabels": true, "endpointSliceObjects": true,
	// mcs-api's condition reasons
	"InvalidServiceType": true, "NoConflicts": true, "NoService": true,
}

// TestPackageDocsNameExistingIdentifiers: a package doc (the comment
// above its package clause) that names a Go identifier bare, as
// doc comments do (inventory's doc named ToMember after it was gone),
// names one declared in the tree: a camel-case word there is a name of
// ours (any package's top-level name, method or field) or one of
// apiWords.
func TestPackageDocsNameExistingIdentifiers(t *testing.T) {
	root := filepath.Join("..", "..")
	goFiles, _ := sourcesAndDocs(t, root)
	d := readDeclarations(t, goFiles)
	known := map[string]bool{}
	for _, names := range d.names {
		for name := range names {
			for _, part := range strings.Split(name, ".") {
				known[part] = true
			}
		}
	}
	camel := regexp.MustCompile(`\b(?:[A-Z][a-z0-9]+|[a-z]+)(?:[A-Z][a-z0-9]*)+\b`)
	checked := 0
	for i, file := range d.files {
		if file.Doc == nil {
			continue
		}
		path, _ := filepath.Rel(root, goFiles[i])
		for _, word := range camel.FindAllString(file.Doc.Text(), -1) {
			checked++
			if !known[word] && !apiWords[word] {
				t.Errorf("%s: the package doc names %s, which nothing in the tree declares (renamed or removed? a word of a Kubernetes API goes in apiWords)", path, word)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d words: the package docs' or the pattern's format changed", checked)
	}
}

// retiredStatements are sentences that docs and comments once made and
// the code made false; prose drifts past every name check, so each one
// found is kept here. docs/benchmarks-history.md, a record of the past,
// may still say them.
var retiredStatements = []struct{ phrase, now string }{
	{"served in both versions", "diagnose passes a member that serves either version of the MCS API (one suffices)"},
	{"one object per export", "an export is published as a head and parts (internal/publish)"},
}

// TestRetiredStatementsStayRetired: no doc (but the benchmarks' history),
// no Go comment and no string of a program (a usage text) makes a retired
// statement again.
func TestRetiredStatementsStayRetired(t *testing.T) {
	root := filepath.Join("..", "..")
	goFiles, docs := sourcesAndDocs(t, root)
	d := readDeclarations(t, goFiles)
	texts := map[string]string{}
	for _, path := range docs {
		if filepath.Base(path) != "benchmarks-history.md" {
			texts[path] = docText(t, path)
		}
	}
	for i, file := range d.files {
		var b strings.Builder
		for _, g := range file.Comments {
			b.WriteString(g.Text())
		}
		if !strings.HasSuffix(goFiles[i], "_test.go") { // and what the programs say (usage texts)
			ast.Inspect(file, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					b.WriteString(lit.Value + "\n")
				}
				return true
			})
		}
		texts[goFiles[i]] = b.String()
	}
	for path, text := range texts {
		rel, _ := filepath.Rel(root, path)
		flat := strings.Join(strings.Fields(strings.ToLower(text)), " ") // a phrase may wrap
		for _, r := range retiredStatements {
			if strings.Contains(flat, r.phrase) {
				t.Errorf("%s says %q again: %s", rel, r.phrase, r.now)
			}
		}
	}
}

// TestCommentsNameExistingFiles: a Go comment that names a file of its
// package by its name names one in its folder, and one that names a path
// of the tree (internal/imports/compact.go) names one that is there:
// files are split and renamed (membership's and publish's largest were),
// and a comment must not send the reader to nothing. A path whose first
// folders (two at most) the tree has not is another project's.
func TestCommentsNameExistingFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	goFiles, _ := sourcesAndDocs(t, root)
	d := readDeclarations(t, goFiles)
	fileName := regexp.MustCompile(`(?:^|[\s(\x60"'])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_]+\.go)\b`)
	checked := 0
	for i, file := range d.files {
		dir := filepath.Dir(goFiles[i])
		rel, _ := filepath.Rel(root, goFiles[i])
		for _, g := range file.Comments {
			for _, m := range fileName.FindAllStringSubmatch(g.Text(), -1) {
				name := m[1]
				where := filepath.Join(dir, name)
				if parts := strings.Split(name, "/"); len(parts) > 1 {
					folders := parts[:min(2, len(parts)-1)]
					if _, err := os.Stat(filepath.Join(append([]string{root}, folders...)...)); err != nil {
						continue // another project's path (controller-runtime's pkg/metrics/...)
					}
					where = filepath.Join(root, name)
				}
				checked++
				if _, err := os.Stat(where); err != nil {
					t.Errorf("%s: a comment names %s, which is not there", rel, name)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d file names: the comments' or the pattern's format changed", checked)
	}
}
