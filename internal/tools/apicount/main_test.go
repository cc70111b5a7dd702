package main

import (
	"go/parser"
	"go/token"
	"testing"
)

// TestCount pins what counts as API: what `go doc` shows a user, and
// nothing unexported or hidden behind an unexported receiver.
func TestCount(t *testing.T) {
	const src = `package p

import "io"

func F()      {}
func f()      {}
func (T) M()  {}
func (*T) N() {}
func (t) M()  {}
func (T) m()  {}
func (G[K]) M() {}

type T struct {
	A, b int
	C    string
	io.Reader
	t
}
type t struct{ X int }
type G[K any] struct{}
type I interface {
	Do()
	do()
	io.Closer
}

var V, v = 1, 2
var (
	W int
	w int
)

const C, c = 1, 2
const (
	D = iota
	E
	e
)
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got counts
	for _, d := range f.Decls {
		got.add(decl(d))
	}
	want := counts{Funcs: 1, Methods: 3, Types: 3, Vars: 2, Consts: 3, Fields: 5}
	if got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}
