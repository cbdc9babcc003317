package layers

import (
	"os/exec"
	"testing"
)

// TestModule is a module's layering test: it lists the packages pattern matches (run
// from the module's folder), fails when fewer than atLeast are found (a pattern that
// matches less than the module), and reports every Violation as an error. Without a
// go command on PATH it skips.
func TestModule(t *testing.T, pattern string, atLeast int) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list packages with")
	}
	pkgs, err := List(gobin, ".", pattern)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < atLeast {
		t.Fatalf("go list %s found %d packages; want at least %d, the whole module", pattern, len(pkgs), atLeast)
	}
	for _, v := range Check(pkgs) {
		t.Error(v)
	}
}
