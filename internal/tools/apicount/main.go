// Command apicount counts the exported API of a module's public packages, so
// that a change meant to shrink that API can say by how much.
//
// It counts what `go doc -all` shows a user: exported functions, exported
// methods of exported types, exported types, and exported variables and
// constants (one per name), in every package whose import path has no
// "internal" element and that is not a command. Struct fields are counted in a
// separate column, since issue 13 quotes the total both with and without them:
// exported fields of exported struct types, and the methods of exported
// interfaces. Test files are not read.
//
// With -undocumented it lists instead the exported names that have no doc
// comment (a name in a documented const, var or type group counts as
// documented, as go doc shows the group's comment), and exits 1 if any.
//
// Usage (from the module root; scripts/api-count.sh wraps it):
//
//	go run ./internal/tools/apicount [-undocumented] [packages]   # default ./... ./cluster/... ./grpclimit/...
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// counts is one package's exported API by kind.
type counts struct {
	Funcs, Methods, Types, Vars, Consts int
	Fields                              int // struct fields and interface methods
}

func (c counts) api() int { return c.Funcs + c.Methods + c.Types + c.Vars + c.Consts }

func (c *counts) add(o counts) {
	c.Funcs += o.Funcs
	c.Methods += o.Methods
	c.Types += o.Types
	c.Vars += o.Vars
	c.Consts += o.Consts
	c.Fields += o.Fields
}

// pkg is the part of `go list -json` that apicount reads.
type pkg struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
	CgoFiles   []string
}

func main() {
	undocumented := flag.Bool("undocumented", false, "list the exported names without a doc comment instead of counting")
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		// Every module of the workspace with public packages: ./... stops
		// at the root module's edge.
		patterns = []string{"./...", "./cluster/...", "./grpclimit/..."}
	}
	do := run
	if *undocumented {
		do = listUndocumented
	}
	if err := do(os.Stdout, patterns); err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(1)
	}
}

// listUndocumented prints pkg.Name (pkg.Type.Method for methods) for every
// exported name without a doc comment, and fails if there is one.
func listUndocumented(w io.Writer, patterns []string) error {
	pkgs, err := list(patterns)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range pkgs {
		files, err := parse(p)
		if err != nil {
			return err
		}
		for _, f := range files {
			for _, d := range f.Decls {
				for _, name := range undocumented(d) {
					fmt.Fprintf(w, "%s.%s\n", p.ImportPath, name)
					n++
				}
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%d exported names without a doc comment", n)
	}
	return nil
}

// undocumented names the exported API of d that has no doc comment.
func undocumented(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if decl(d).api() == 1 && d.Doc == nil {
			name := d.Name.Name
			if d.Recv != nil {
				name = receiver(d.Recv.List[0].Type) + "." + name
			}
			out = append(out, name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() && s.Doc == nil && d.Doc == nil && s.Comment == nil {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

func run(w io.Writer, patterns []string) error {
	pkgs, err := list(patterns)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "package\tfuncs\tmethods\ttypes\tvars\tconsts\tAPI\tfields\tAPI+fields\t")
	var total counts
	for _, p := range pkgs {
		c, err := count(p)
		if err != nil {
			return err
		}
		total.add(c)
		row(tw, p.ImportPath, c)
	}
	row(tw, "total", total)
	return tw.Flush()
}

func row(w io.Writer, name string, c counts) {
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
		name, c.Funcs, c.Methods, c.Types, c.Vars, c.Consts, c.api(), c.Fields, c.api()+c.Fields)
}

// list asks the go command for the public, importable packages matching
// patterns, so that build constraints are applied as a build would.
func list(patterns []string) ([]pkg, error) {
	var out, stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,Name,GoFiles,CgoFiles"}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []pkg
	dec := json.NewDecoder(bufio.NewReader(&out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if p.Name != "main" && !slices.Contains(strings.Split(p.ImportPath, "/"), "internal") {
			pkgs = append(pkgs, p)
		}
	}
	slices.SortFunc(pkgs, func(a, b pkg) int { return cmp.Compare(a.ImportPath, b.ImportPath) })
	return pkgs, nil
}

// count counts the exported declarations of p's non-test files.
func count(p pkg) (counts, error) {
	var c counts
	files, err := parse(p)
	if err != nil {
		return c, err
	}
	for _, f := range files {
		for _, d := range f.Decls {
			c.add(decl(d))
		}
	}
	return c, nil
}

// parse reads p's non-test files, with their comments.
func parse(p pkg) ([]*ast.File, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range append(p.GoFiles, p.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func decl(d ast.Decl) counts {
	var c counts
	switch d := d.(type) {
	case *ast.FuncDecl:
		switch {
		case !d.Name.IsExported():
		case d.Recv == nil:
			c.Funcs++
		case ast.IsExported(receiver(d.Recv.List[0].Type)):
			c.Methods++
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					c.Types++
					c.Fields += members(s.Type)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					if d.Tok == token.CONST {
						c.Consts++
					} else {
						c.Vars++
					}
				}
			}
		}
	}
	return c
}

// receiver names a method's receiver type: T in (T), (*T), (T[K]), (*T[K]).
func receiver(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// members counts the exported fields of a struct type or the exported methods
// of an interface type; embedded types count by their type's name.
func members(e ast.Expr) int {
	var list *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return 0
	}
	n := 0
	for _, f := range list.List {
		if len(f.Names) == 0 {
			if ast.IsExported(receiver(f.Type)) || isSelector(f.Type) {
				n++
			}
			continue
		}
		for _, name := range f.Names {
			if name.IsExported() {
				n++
			}
		}
	}
	return n
}

func isSelector(e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	_, ok := e.(*ast.SelectorExpr)
	return ok
}
