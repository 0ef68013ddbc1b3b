package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// libraries are the layout's public library trees: every package below
// them that is not under an internal/ directory is API.
var libraries = []string{"perfdata", "symbolize", "attribute"}

// goFile matches a Go source file name, which a public doc comment must not
// send its reader to: go doc shows the comment without the file.
var goFile = regexp.MustCompile(`\b[a-z0-9_]+\.go\b`)

// TestPublicSurface checks the doc comments of every exported name of the
// library packages: each exported type, function, constant, variable and
// method of an exported type has one (constants and variables may share
// their group's), and none names a Go file. Methods that implement error,
// fmt.Stringer and errors' Unwrap say nothing a reader needs and are
// exempt. With -v it logs the package's exported names (package-level plus
// methods of exported types, test files left out), to measure the API's
// size.
func TestPublicSurface(t *testing.T) {
	root := perftest.Root(t)
	var dirs []string
	for _, lib := range libraries {
		err := filepath.WalkDir(filepath.Join(root, lib), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "internal" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, dir := range dirs {
		fset := token.NewFileSet()
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var files []*ast.File
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		rel, _ := filepath.Rel(root, dir)
		n := 0
		check := func(pos token.Pos, name string, doc ...*ast.CommentGroup) {
			n++
			text := ""
			for _, d := range doc {
				if d != nil {
					text += d.Text()
				}
			}
			where := fset.Position(pos)
			where.Filename, _ = filepath.Rel(root, where.Filename)
			switch {
			case strings.TrimSpace(text) == "":
				t.Errorf("%s: exported %s has no doc comment", where, name)
			case goFile.MatchString(text):
				t.Errorf("%s: the doc comment of %s names a file (%s): say it without the file", where, name, goFile.FindString(text))
			}
		}
		for _, f := range files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						check(d.Name.Pos(), d.Name.Name, d.Doc)
						continue
					}
					recv := receiverName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					if slices.Contains([]string{"Error", "String", "Unwrap"}, d.Name.Name) {
						n++
						continue
					}
					check(d.Name.Pos(), recv+"."+d.Name.Name, d.Doc)
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								check(s.Name.Pos(), s.Name.Name, d.Doc, s.Doc)
							}
						case *ast.ValueSpec:
							for _, id := range s.Names {
								if id.IsExported() {
									check(id.Pos(), id.Name, d.Doc, s.Doc, s.Comment)
								}
							}
						}
					}
				}
			}
		}
		if n > 0 {
			t.Logf("%-30s %4d exported names", rel, n)
		}
		total += n
	}
	t.Logf("%-30s %4d exported names", "all", total)
	if total == 0 {
		t.Fatalf("no exported names found under %v: the walk from %s found nothing", libraries, root)
	}
}

// receiverName returns the type name of a method's receiver expression.
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
