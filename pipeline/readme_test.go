package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// readmeRun is the run function of the README's first program, its body verbatim
// between the markers (TestReadmeFirstProgramMatches checks that they agree).
func readmeRun(ctx context.Context, dir string, out io.Writer) error {
	// README begin
	db, err := pipeline.Open(dir, pipeline.Config{}) // 2-4 lanes, parallel validation
	if err != nil {
		return err
	}
	defer db.Close()
	accounts, err := db.EnsureColumnFamily("accounts") // open it, or create it on the first run
	if err != nil {
		return err
	}
	// Update re-runs the function on ErrConflict, with jittered backoff.
	err = db.Update(ctx, func(tx *pipeline.Txn) error {
		v, err := tx.Get(accounts, []byte("alice")) // tracked: a concurrent write fails the commit
		if errors.Is(err, pipeline.ErrNotFound) {
			v = []byte("0")
		} else if err != nil {
			return err
		}
		n, _ := strconv.Atoi(string(v))
		return tx.Put(accounts, []byte("alice"), []byte(strconv.Itoa(n+1)))
	})
	if err != nil {
		return err
	}
	// Streams: the event store, a layer over the same transactions and log.
	store, err := eventstore.New(db)
	if err != nil {
		return err
	}
	// On a second run this is a retry of event e1: the original result, nothing written.
	res, err := store.Append(ctx, "order-42", eventstore.NoStream, eventstore.Event{ID: "e1", Type: "placed"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "order-42 at revision %d, log position %d\n", res.NextExpectedRevision, res.Position)
	return nil
	// README end
}

// TestReadmeFirstProgramRunsTwice: the README's first program works on a new folder
// and again on the same one, as the README says: the family is opened, alice counts
// the runs, and the append is an idempotent retry that prints the same line.
func TestReadmeFirstProgramRunsTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	var lines []string
	for run := range 2 {
		var out bytes.Buffer
		if err := readmeRun(context.Background(), dir, &out); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		lines = append(lines, out.String())
	}
	if !strings.HasPrefix(lines[0], "order-42 at revision 0, log position ") {
		t.Fatalf("first run printed %q, want the stream at revision 0", lines[0])
	}
	if lines[1] != lines[0] {
		t.Fatalf("second run printed %q, want the first run's %q (an idempotent retry)", lines[1], lines[0])
	}
	db := openAt(t, dir, pipeline.Config{})
	accounts, err := db.ColumnFamily("accounts")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, db, accounts, "alice"); got != "2" {
		t.Fatalf("alice = %q after two runs, want 2", got)
	}
	store, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := store.ReadStream(context.Background(), "order-42", 0, eventstore.ToEnd)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].ID != "e1" {
		t.Fatalf("order-42 holds %d events after two runs, want the one event e1", len(evs))
	}
}

// TestReadmeFirstProgramMatches: the README's first program is a complete Go file
// (package main, a main calling run), every package it uses is imported and every
// import is used, and its run function is readmeRun line for line, so the program the
// README shows is the one TestReadmeFirstProgramRunsTwice runs and the compiler checks.
func TestReadmeFirstProgramMatches(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "## A first program\n\n```go\n")
	if !ok {
		t.Fatal("README has no Go block right under ## A first program")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README's first program has no closing fence")
	}
	fset := token.NewFileSet()
	prog, err := parser.ParseFile(fset, "README.md", block, parser.ParseComments)
	if err != nil {
		t.Fatalf("README's first program does not parse: %v", err)
	}
	if prog.Name.Name != "main" {
		t.Fatalf("README's first program is package %s, want main", prog.Name.Name)
	}
	mainFn, runFn := findFunc(prog, "main"), findFunc(prog, "run")
	if mainFn == nil || runFn == nil {
		t.Fatal("README's first program needs func main and func run")
	}
	if !calls(mainFn, "run") {
		t.Fatal("README's main does not call run")
	}

	// Imports against uses: an unused import or a package used without its import
	// would not compile. Identifiers the file does not declare are packages or
	// predeclared names; those used as the left of a selector must be imported.
	imported := map[string]bool{}
	for _, imp := range prog.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imported[name] = true
	}
	unresolved := map[*ast.Ident]bool{}
	for _, id := range prog.Unresolved {
		unresolved[id] = true
	}
	used := map[string]bool{}
	ast.Inspect(prog, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && unresolved[id] {
				used[id.Name] = true
				if !imported[id.Name] {
					t.Errorf("README's first program uses %s.%s without importing %s", id.Name, sel.Sel.Name, id.Name)
				}
			}
		}
		return true
	})
	for name := range imported {
		if !used[name] {
			t.Errorf("README's first program imports %s and does not use it", name)
		}
	}

	// run: the same signature and the same body as readmeRun.
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	testFile, err := parser.ParseFile(fset, "readme_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	ours := findFunc(testFile, "readmeRun")
	if ours == nil {
		t.Fatal("readme_test.go has no func readmeRun")
	}
	if got, want := paramTypes(fset, block, runFn), paramTypes(fset, string(src), ours); !slices.Equal(got, want) {
		t.Fatalf("README's run takes %v, readmeRun takes %v", got, want)
	}
	body := func(s string, fn *ast.FuncDecl) []string {
		text := s[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
		var out []string
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			if l != "" && l != "// README begin" && l != "// README end" {
				out = append(out, l)
			}
		}
		return out
	}
	want, got := body(block, runFn), body(string(src), ours)
	if !slices.Equal(want, got) {
		t.Fatalf("README's run and readmeRun differ:\nREADME:\n%s\n\ntest:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// findFunc returns the top-level function name of f, or nil.
func findFunc(f *ast.File, name string) *ast.FuncDecl {
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
			return fn
		}
	}
	return nil
}

// calls reports whether fn calls the function named name.
func calls(fn *ast.FuncDecl, name string) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}

// paramTypes returns the source text of each parameter's and result's type of fn,
// which fset parsed from src.
func paramTypes(fset *token.FileSet, src string, fn *ast.FuncDecl) []string {
	text := func(n ast.Node) string {
		return src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset]
	}
	var out []string
	for _, field := range fn.Type.Params.List {
		for range max(1, len(field.Names)) {
			out = append(out, text(field.Type))
		}
	}
	if fn.Type.Results != nil {
		for _, field := range fn.Type.Results.List {
			out = append(out, "-> "+text(field.Type))
		}
	}
	return out
}
