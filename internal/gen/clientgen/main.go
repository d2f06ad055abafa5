// Command clientgen generates client/calls_gen.go: the typed one-answer
// calls of package api as methods of *client.Client, and api's exported
// names (CommitRequest, GroupRef, IfAbsent, ...) under package client, so
// that a program importing client alone sees and uses every call. The
// calls stay written once, in api: each generated method hands its
// arguments to api.Calls over the client (the Requestor that routes,
// retries and judges them), and each name is an alias of api's.
//
// Signatures are api's, spelt with client's names where client has an
// alias of the codec's type (felix.CacheRef reads CacheRef), so that go
// doc ./client reads in one package's names. Run it from anywhere in the
// module (go generate ./... does so through the //go:generate line in
// client/aliases.go):
//
//	go run ./internal/gen/clientgen
//
// The output is deterministic, so CI checks that the committed file is up
// to date with go generate ./... && git diff --exit-code.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// outName is the generated file, in the client package's directory.
const outName = "calls_gen.go"

// skipped are api's exported names client does not re-export: the Calls
// themselves (their methods are the client's) and their constructor (a
// Client makes its own).
var skipped = map[string]bool{"Calls": true, "New": true}

func main() {
	root, err := moduleRoot()
	if err != nil {
		log.Fatal(err)
	}
	src, err := generate(filepath.Join(root, "api"), filepath.Join(root, "client"))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "client", outName), src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// moduleRoot is the nearest directory above the working directory that
// holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("clientgen: no go.mod above the working directory")
		}
		dir = up
	}
}

// parseDir parses the package's non-test Go files of dir, leaving out the
// file named skip.
func parseDir(fset *token.FileSet, dir, skip string) ([]*ast.File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == skip {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// decl is one generated declaration, kept with its sort key.
type decl struct {
	name string
	text string
}

// gen holds what generation needs to know about both packages.
type gen struct {
	apiTypes  map[string]bool   // api's exported type names
	felixName map[string]string // felix.X → client's alias name of it (types and values)
	clientTop map[string]bool   // client's hand-written top-level names
	imports   map[string]string // package name → import path (from api)
	used      map[string]bool   // package names the output uses
}

// generate returns the formatted calls_gen.go for the api package in
// apiDir and the client package in clientDir.
func generate(apiDir, clientDir string) ([]byte, error) {
	fset := token.NewFileSet()
	apiFiles, err := parseDir(fset, apiDir, "")
	if err != nil {
		return nil, err
	}
	clientFiles, err := parseDir(fset, clientDir, outName)
	if err != nil {
		return nil, err
	}
	g := &gen{apiTypes: map[string]bool{}, felixName: map[string]string{}, clientTop: map[string]bool{},
		imports: map[string]string{}, used: map[string]bool{"api": true}}
	for _, f := range clientFiles {
		for _, d := range f.Decls {
			for _, n := range topNames(d) {
				g.clientTop[n] = true
			}
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() && isPkg(sel.X, "felix") {
						g.felixName[sel.Sel.Name] = s.Name.Name
					}
				case *ast.ValueSpec:
					for i, v := range s.Values {
						if sel, ok := v.(*ast.SelectorExpr); ok && isPkg(sel.X, "felix") && i < len(s.Names) {
							g.felixName[sel.Sel.Name] = s.Names[i].Name
						}
					}
				}
			}
		}
	}
	for _, f := range apiFiles {
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			g.imports[name] = p
		}
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, s := range gd.Specs {
					if ts := s.(*ast.TypeSpec); ts.Name.IsExported() && !skipped[ts.Name.Name] {
						g.apiTypes[ts.Name.Name] = true
					}
				}
			}
		}
	}
	g.imports["api"] = "github.com/flxproto/felix/api"

	var types, consts, vars, funcs, methods []decl
	for _, f := range apiFiles {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					if skipped[d.Name.Name] {
						continue
					}
					if err := g.clash(d.Name.Name); err != nil {
						return nil, err
					}
					funcs = append(funcs, decl{d.Name.Name, g.wrapper(d, "", "api."+d.Name.Name)})
				} else if recvName(d.Recv) == "Calls" {
					if g.clientTop[d.Name.Name] {
						return nil, fmt.Errorf("clientgen: api.Calls.%s: *client.Client already has a method or name %s", d.Name.Name, d.Name.Name)
					}
					methods = append(methods, decl{d.Name.Name, g.wrapper(d, "c *Client", "c.calls."+d.Name.Name)})
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						n := s.Name.Name
						if !s.Name.IsExported() || skipped[n] {
							continue
						}
						if err := g.clash(n); err != nil {
							return nil, err
						}
						types = append(types, decl{n, g.doc(pick(s.Doc, d.Doc, len(d.Specs))) + "type " + n + " = api." + n + "\n"})
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if !id.IsExported() {
								continue
							}
							if err := g.clash(id.Name); err != nil {
								return nil, err
							}
							text := g.doc(pick(s.Doc, d.Doc, len(d.Specs))) + d.Tok.String() + " " + id.Name + " = api." + id.Name + "\n"
							if d.Tok == token.CONST {
								consts = append(consts, decl{id.Name, text})
							} else {
								vars = append(vars, decl{id.Name, text})
							}
						}
					}
				}
			}
		}
	}

	var b bytes.Buffer
	b.WriteString("// Code generated by internal/gen/clientgen from package api; DO NOT EDIT.\n\npackage client\n\nimport (\n")
	var names []string
	for n := range g.used {
		names = append(names, n)
	}
	std := func(n string) bool { return !strings.Contains(g.imports[n], ".") }
	sort.Slice(names, func(i, j int) bool {
		if std(names[i]) != std(names[j]) {
			return std(names[i])
		}
		return g.imports[names[i]] < g.imports[names[j]]
	})
	group := 0 // standard library first, then the rest, a blank line between
	for _, n := range names {
		p, ok := g.imports[n]
		if !ok {
			return nil, fmt.Errorf("clientgen: no import path for package %s", n)
		}
		g2 := 1
		if strings.Contains(p, ".") {
			g2 = 2
		}
		if group != 0 && g2 != group {
			b.WriteString("\n")
		}
		group = g2
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n")
	section := func(title string, ds []decl) {
		if len(ds) == 0 {
			return
		}
		slices.SortFunc(ds, func(a, b decl) int { return strings.Compare(a.name, b.name) })
		b.WriteString("\n// " + title + "\n")
		for _, d := range ds {
			b.WriteString("\n" + d.text)
		}
	}
	section("The types of the typed calls (package api's).", types)
	section("Package api's constants.", consts)
	section("Package api's variables.", vars)
	section("Package api's functions.", funcs)
	section("The typed one-answer calls of package api, as methods of the client: each\n// is sent through Request (routed, retried and judged by the client).", methods)
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("clientgen: generated code does not parse: %w\n%s", err, b.Bytes())
	}
	return out, nil
}

// clash refuses an api name that client already declares by hand.
func (g *gen) clash(name string) error {
	if g.clientTop[name] {
		return fmt.Errorf("clientgen: api.%s: package client already declares %s; rename one or add it to skipped", name, name)
	}
	return nil
}

// topNames are the top-level names a declaration declares (methods
// included, by their names: a method of Client must not clash either).
func topNames(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || recvName(d.Recv) == "Client" {
			out = append(out, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				out = append(out, s.Name.Name)
			case *ast.ValueSpec:
				for _, id := range s.Names {
					out = append(out, id.Name)
				}
			}
		}
	}
	return out
}

// recvName is the receiver's type name (T for T and *T).
func recvName(fl *ast.FieldList) string {
	t := fl.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isPkg(x ast.Expr, name string) bool {
	id, ok := x.(*ast.Ident)
	return ok && id.Name == name
}

// pick is the spec's own doc comment, or its declaration's when the
// declaration holds this spec alone.
func pick(spec, group *ast.CommentGroup, n int) *ast.CommentGroup {
	if spec != nil || n > 1 {
		return spec
	}
	return group
}

// qualified matches a qualified exported name in a doc comment.
var qualified = regexp.MustCompile(`\b(felix|client)\.([A-Z]\w*)`)

// doc renders a doc comment ("" for none) in client's names: a name of
// the codec that client has under a name of its own is written so, and
// client's own names lose their qualifier.
func (g *gen) doc(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range cg.List {
		text := qualified.ReplaceAllStringFunc(c.Text, func(m string) string {
			pkg, name, _ := strings.Cut(m, ".")
			if pkg == "client" {
				return name
			}
			if n, ok := g.felixName[name]; ok {
				return n
			}
			return m
		})
		b.WriteString(text + "\n")
	}
	return b.String()
}

// wrapper is a function (recv "") or method with fn's doc and signature
// whose body calls target with fn's parameters.
func (g *gen) wrapper(fn *ast.FuncDecl, recv, target string) string {
	var b strings.Builder
	b.WriteString(g.doc(fn.Doc))
	b.WriteString("func ")
	if recv != "" {
		b.WriteString("(" + recv + ") ")
	}
	b.WriteString(fn.Name.Name)
	params, args := g.params(fn.Type.Params, false)
	b.WriteString("(" + params + ")")
	if res := fn.Type.Results; res != nil && len(res.List) > 0 {
		r, _ := g.params(res, true)
		named := len(res.List[0].Names) > 0
		if named || len(res.List) > 1 || len(res.List[0].Names) > 1 {
			r = "(" + r + ")"
		}
		b.WriteString(" " + r + " {\n\treturn ")
	} else {
		b.WriteString(" {\n\t")
	}
	b.WriteString(target + "(" + args + ")\n}\n")
	return b.String()
}

// params renders a field list and the argument list that passes it on
// (unnamed parameters get names p0, p1, ...).
func (g *gen) params(fl *ast.FieldList, result bool) (string, string) {
	var ps, as []string
	i := 0
	for _, f := range fl.List {
		t := g.typ(f.Type)
		_, variadic := f.Type.(*ast.Ellipsis)
		names := f.Names
		if len(names) == 0 {
			names = []*ast.Ident{ast.NewIdent("p" + strconv.Itoa(i))}
		}
		var ns []string
		for _, n := range names {
			ns = append(ns, n.Name)
			a := n.Name
			if variadic {
				a += "..."
			}
			as = append(as, a)
			i++
		}
		if len(f.Names) == 0 && result {
			ps = append(ps, t)
			continue
		}
		ps = append(ps, strings.Join(ns, ", ")+" "+t)
	}
	return strings.Join(ps, ", "), strings.Join(as, ", ")
}

// typ renders a type expression of package api in client's names: api's
// own types by their alias (the same name), felix types that client
// aliases by the alias, everything else qualified as in api.
func (g *gen) typ(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		if e.IsExported() && !g.apiTypes[e.Name] {
			log.Fatalf("clientgen: api type %s is not re-exported by client", e.Name)
		}
		return e.Name // a predeclared type, or api's type under its alias
	case *ast.SelectorExpr:
		pkg := e.X.(*ast.Ident).Name
		if pkg == "felix" {
			if n, ok := g.felixName[e.Sel.Name]; ok {
				return n
			}
		}
		g.used[pkg] = true
		return pkg + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + g.typ(e.X)
	case *ast.ArrayType:
		if e.Len == nil {
			return "[]" + g.typ(e.Elt)
		}
		return "[" + exprText(e.Len) + "]" + g.typ(e.Elt)
	case *ast.Ellipsis:
		return "..." + g.typ(e.Elt)
	case *ast.MapType:
		return "map[" + g.typ(e.Key) + "]" + g.typ(e.Value)
	case *ast.ChanType:
		switch e.Dir {
		case ast.SEND:
			return "chan<- " + g.typ(e.Value)
		case ast.RECV:
			return "<-chan " + g.typ(e.Value)
		}
		return "chan " + g.typ(e.Value)
	case *ast.IndexExpr:
		return g.typ(e.X) + "[" + g.typ(e.Index) + "]"
	case *ast.IndexListExpr:
		var ts []string
		for _, x := range e.Indices {
			ts = append(ts, g.typ(x))
		}
		return g.typ(e.X) + "[" + strings.Join(ts, ", ") + "]"
	case *ast.FuncType:
		p, _ := g.params(e.Params, false)
		s := "func(" + p + ")"
		if e.Results != nil && len(e.Results.List) > 0 {
			r, _ := g.params(e.Results, true)
			if len(e.Results.List) > 1 || len(e.Results.List[0].Names) > 0 {
				r = "(" + r + ")"
			}
			s += " " + r
		}
		return s
	case *ast.InterfaceType:
		if e.Methods == nil || len(e.Methods.List) == 0 {
			return "interface{}"
		}
	}
	log.Fatalf("clientgen: cannot render type %T %s", e, exprText(e))
	return ""
}

// exprText is e as written.
func exprText(e ast.Expr) string {
	var b bytes.Buffer
	format.Node(&b, token.NewFileSet(), e)
	return b.String()
}
