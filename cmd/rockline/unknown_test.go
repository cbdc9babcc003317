package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rockline/rockline/pipeline"
)

// TestUnknownCommands: a word where a command is expected that names none, at the top
// or below (completion, help), exits with status 2 and a message naming the word;
// the command lines around them that are fine still exit 0.
func TestUnknownCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		msg  string // in standard error when code is not 0, in standard output when it is
	}{
		{[]string{"frobnicate", "--dir", dir}, 2, `unknown command "frobnicate" for "rockline"`},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate" for "rockline"`},
		{[]string{"--json", "frobnicate", "--dir", dir}, 2, `unknown command "frobnicate" for "rockline"`},
		{[]string{"verifi", "--dir", dir}, 2, `did you mean "verify"`},
		{[]string{"completion", "frobnicate"}, 2, `unknown command "frobnicate" for "rockline completion"`},
		{[]string{"completion", "bash", "extra"}, 2, `unknown command "extra" for "rockline completion bash"`},
		{[]string{"help", "frobnicate"}, 2, `unknown command "frobnicate" for "rockline"`},
		{[]string{"help", "completion", "frobnicate"}, 2, `unknown command "frobnicate" for "rockline completion"`},
		{[]string{"info", "extra", "--dir", dir}, 2, `unknown command "extra" for "rockline info"`},
		{[]string{}, 0, "Available Commands"},
		{[]string{"--help"}, 0, "Available Commands"},
		{[]string{"help"}, 0, "Available Commands"},
		{[]string{"help", "info"}, 0, "rockline info"},
		{[]string{"completion"}, 0, "Available Commands"},
		{[]string{"completion", "bash"}, 0, "bash completion"},
		{[]string{"info", "--dir", dir}, 0, "positions 1..0"},
	}
	for _, tc := range cases {
		out, errOut, code := run(t, tc.args...)
		switch {
		case code != tc.code:
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, tc.code, errOut)
		case code != 0 && (!strings.Contains(errOut, tc.msg) || !strings.HasPrefix(errOut, "rockline: ")):
			t.Errorf("%v: exit %d, stderr %q; want a message containing %q", tc.args, code, errOut, tc.msg)
		case code == 0 && !strings.Contains(out, tc.msg):
			t.Errorf("%v: exit 0, stdout %q; want it to contain %q", tc.args, out, tc.msg)
		}
	}
}
