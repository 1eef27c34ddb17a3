package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLineOnly: this package is the command line, and a serving
// tandem is internal/server. The only types here are flag sets, which no
// domain interface asks for, and serve.go stays a short function that
// turns flags into server.Options.
func TestCommandLineOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && !strings.HasSuffix(ts.Name.Name, "Flags") {
						t.Errorf("%s: type %s is not a flag set: it belongs in internal/server or the package it adapts", name, ts.Name.Name)
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil {
					continue
				}
				recv := d.Recv.List[0].Type
				if st, ok := recv.(*ast.StarExpr); ok {
					recv = st.X
				}
				if id, ok := recv.(*ast.Ident); !ok || !strings.HasSuffix(id.Name, "Flags") {
					t.Errorf("%s: method %s is on a type that is not a flag set", name, d.Name.Name)
				}
			}
		}
	}
	b, err := os.ReadFile("serve.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n >= 150 {
		t.Errorf("serve.go has %d lines: the serving belongs in internal/server", n)
	}
}
