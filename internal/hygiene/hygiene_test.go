// Package hygiene holds the repository's own rules, checked by make test:
// Go sources are gofmt'd, no binary is kept in the tree, and the documents
// cite only tests, files and Go names that exist.
package hygiene

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxTracked is the largest file the repository may keep: well above any
// source or document, well below any binary statefs builds.
const maxTracked = 2 << 20

// skipDirs are build outputs and the bench's work tree, never sources.
var skipDirs = map[string]bool{".git": true, "bin": true, "var": true}

// root is the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// files lists the repository's files, relative to its root: git's tracked
// files in a clone, else every file outside build outputs.
func files(t *testing.T, top string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = top
	if out, err := cmd.Output(); err == nil {
		var names []string
		for _, n := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if n != "" {
				names = append(names, n)
			}
		}
		return names
	}
	var names []string
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, path)
		if d.IsDir() && skipDirs[rel] {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestGoSourcesAreFormatted(t *testing.T) {
	top := root(t)
	for _, name := range files(t, top) {
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(top, name))
		if err != nil {
			t.Fatal(err)
		}
		formatted, err := format.Source(src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !bytes.Equal(src, formatted) {
			t.Errorf("%s is not gofmt'd (run gofmt -w %s)", name, name)
		}
	}
}

func TestNoBinariesAreKept(t *testing.T) {
	top := root(t)
	for _, name := range files(t, top) {
		f, err := os.Open(filepath.Join(top, name))
		if os.IsNotExist(err) {
			continue // removed in the work tree, not yet in git's index
		}
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		switch {
		case bytes.Equal(head[:n], []byte("\x7fELF")):
			t.Errorf("%s is an executable: build outputs belong in bin/ or var/, which git ignores", name)
		case st.Size() > maxTracked:
			t.Errorf("%s is %d bytes, over the %d a source or document may be", name, st.Size(), maxTracked)
		}
	}
}

var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	testName   = regexp.MustCompile(`^(Test|Fuzz)[A-Z][A-Za-z0-9_]*$`)
	repoFile   = regexp.MustCompile(`^[a-z_][a-z0-9_./-]*\.(go|md|rules|yaml|sh|json)$`)
	// fileName is a name like control.sock or status.json, which reads
	// as pkg.name but names a file.
	fileName = regexp.MustCompile(`\.(sock|json|md|go|yaml|rules|sh|log|tmp)$`)
	flagName = regexp.MustCompile(`^--([a-z][a-z0-9-]*)`)
	// repoPath is a path with no extension (a package, a directory):
	// it is the repository's when its first part is a top directory.
	repoPath = regexp.MustCompile(`^([a-z][a-z0-9_]*)(/[a-z0-9_.-]+)+$`)
	// packageRow is a row of DESIGN.md's table of packages.
	packageRow = regexp.MustCompile("(?m)^\\| `([a-z][a-z0-9_/]*)` \\|")
	goName     = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$`)
)

// TestDocumentsCiteWhatExists reads every backticked name in README.md
// and DESIGN.md and fails on a test function, a repository file, a
// command-line flag (--name, which some string in the sources must
// name), or a Go name of one of the module's packages (pkg.Name or
// pkg.Type.Member: a top-level declaration, or a method or field of a
// type) that does not exist: a document that outlives what it describes.
func TestDocumentsCiteWhatExists(t *testing.T) {
	top := root(t)
	all := files(t, top)
	exists := make(map[string]bool, len(all))
	for _, name := range all {
		exists[name] = true
		for dir := filepath.Dir(name); dir != "."; dir = filepath.Dir(dir) {
			exists[dir] = true
		}
	}
	pkgs, literals := declarations(t, top, all)
	tests := map[string]bool{}
	for _, p := range pkgs {
		for name := range p.top {
			if testName.MatchString(name) {
				tests[name] = true
			}
		}
	}
	for _, doc := range []string{"README.md", "DESIGN.md"} {
		text, err := os.ReadFile(filepath.Join(top, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range backticked.FindAllStringSubmatch(string(text), -1) {
			cited := strings.TrimSuffix(strings.TrimSuffix(m[1], "()"), "/")
			switch {
			case flagName.MatchString(cited):
				if name := flagName.FindStringSubmatch(cited)[1]; !literals[name] {
					t.Errorf("%s cites flag --%s, which no source declares", doc, name)
				}
			case testName.MatchString(cited):
				if !tests[cited] {
					t.Errorf("%s cites test %s, which does not exist", doc, cited)
				}
			case repoFile.MatchString(cited) && strings.Contains(cited, "/"):
				if !exists[cited] {
					t.Errorf("%s cites file %s, which does not exist", doc, cited)
				}
			case repoPath.MatchString(cited) && exists[repoPath.FindStringSubmatch(cited)[1]]:
				if !exists[cited] {
					t.Errorf("%s cites %s, which does not exist", doc, cited)
				}
			case goName.MatchString(cited) && !fileName.MatchString(cited):
				g := goName.FindStringSubmatch(cited)
				p, ok := pkgs[g[1]]
				if !ok || p.has(g[2], g[3]) {
					continue // not one of ours (say, os.File), or it exists
				}
				t.Errorf("%s cites %s, which package %s does not declare", doc, cited, g[1])
			}
		}
	}
}

// TestDesignListsThePackages holds DESIGN.md's table of packages to the
// packages there are: every row one, and every package a row.
func TestDesignListsThePackages(t *testing.T) {
	top := root(t)
	text, err := os.ReadFile(filepath.Join(top, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range packageRow.FindAllStringSubmatch(string(text), -1) {
		listed[m[1]] = true
	}
	have := map[string]bool{}
	for _, name := range files(t, top) {
		if strings.HasSuffix(name, ".go") {
			have[filepath.Dir(name)] = true
		}
	}
	for p := range listed {
		if !have[p] {
			t.Errorf("DESIGN.md's table of packages lists %s, which is no package", p)
		}
	}
	for p := range have {
		if !listed[p] {
			t.Errorf("package %s is not in DESIGN.md's table of packages", p)
		}
	}
}

// TestDesignGivesTheImports holds DESIGN.md's list of the imports between
// statefs packages (tests left out) to the imports of the sources.
func TestDesignGivesTheImports(t *testing.T) {
	top := root(t)
	text, err := os.ReadFile(filepath.Join(top, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(text), "The imports between statefs packages")
	if ok {
		_, block, ok = strings.Cut(block, "```\n")
	}
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("DESIGN.md has no list of the imports between statefs packages")
	}
	const module = "github.com/statefs/statefs/"
	imports := map[string]map[string]bool{}
	for _, name := range files(t, top) {
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(top, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(name)
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, module) {
				imports[dir][strings.TrimPrefix(path, module)] = true
			}
		}
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Errorf("DESIGN.md's imports: %q is not a package and its imports", line)
			continue
		}
		pkg, want := fields[0], map[string]bool{}
		listed[pkg] = true
		for _, f := range fields[1:] {
			if f != "-" {
				want[f] = true
			}
		}
		got := imports[pkg]
		if got == nil {
			got = map[string]bool{}
		}
		if !maps.Equal(got, want) {
			t.Errorf("DESIGN.md says %s imports %v; it imports %v", pkg, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
		}
	}
	for pkg, deps := range imports {
		if !listed[pkg] && len(deps) > 0 {
			t.Errorf("DESIGN.md's imports leave out %s, which imports %v", pkg, slices.Sorted(maps.Keys(deps)))
		}
	}
}

// pkgDecls are the names a package declares.
type pkgDecls struct {
	top     map[string]bool            // functions, types, variables, constants
	members map[string]map[string]bool // type -> its methods and fields
	embeds  map[string][]string        // type -> the types it embeds
}

// has reports whether the package declares name, or, with member, whether
// type name has it; a lone name may also be a member of any type, as the
// documents shorten store.Store.Full to store.Full.
func (p pkgDecls) has(name, member string) bool {
	if member != "" {
		return p.hasMember(name, member, 0)
	}
	if p.top[name] {
		return true
	}
	for _, ms := range p.members {
		if ms[name] {
			return true
		}
	}
	return false
}

// hasMember reports whether type typ has member m, its own or promoted
// from a type it embeds.
func (p pkgDecls) hasMember(typ, m string, depth int) bool {
	if p.members[typ][m] {
		return true
	}
	for _, e := range p.embeds[typ] {
		if depth < 8 && p.hasMember(e, m, depth+1) {
			return true
		}
	}
	return false
}

// declarations parses every package of the module, keyed by its name, and
// gathers the names its string literals give flags: "name" as a flag set
// declares it, and "--name" or "--name=value" as a command line passes it.
func declarations(t *testing.T, top string, all []string) (map[string]pkgDecls, map[string]bool) {
	t.Helper()
	pkgs := map[string]pkgDecls{}
	literals := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range all {
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(top, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					literals[v] = true
					if m := flagName.FindStringSubmatch(v); m != nil {
						literals[m[1]] = true
					}
				}
			}
			return true
		})
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		p, ok := pkgs[pkg]
		if !ok {
			p = pkgDecls{top: map[string]bool{}, members: map[string]map[string]bool{}, embeds: map[string][]string{}}
			pkgs[pkg] = p
		}
		member := func(typ, m string) {
			if p.members[typ] == nil {
				p.members[typ] = map[string]bool{}
			}
			p.members[typ][m] = true
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.top[d.Name.Name] = true
				} else if typ := receiverType(d.Recv.List[0].Type); typ != "" {
					member(typ, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.top[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									member(s.Name.Name, n.Name)
								}
								if len(fld.Names) == 0 { // embedded
									e := receiverType(fld.Type)
									member(s.Name.Name, e)
									p.embeds[s.Name.Name] = append(p.embeds[s.Name.Name], e)
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									member(s.Name.Name, n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.top[n.Name] = true
						}
					}
				}
			}
		}
	}
	return pkgs, literals
}

// receiverType is the name of a receiver's or embedded field's type.
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}
