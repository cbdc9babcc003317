package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// binary is the rockline command, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rockline-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "rockline")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build rockline: " + err.Error() + "\n" + string(out))
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		goleak.VerifyTestMain(exitCapture{&code, m})
	}()
	os.Exit(code)
}

// exitCapture lets TestMain clean up after goleak's run.
type exitCapture struct {
	code *int
	m    *testing.M
}

func (e exitCapture) Run() int { *e.code = e.m.Run(); return *e.code }

// run runs the binary and returns its stdout, stderr and exit status.
func run(t *testing.T, a ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, a...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	}
	t.Fatalf("run %v: %v", a, err)
	return "", "", -1
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestCommandsOnALiveDatabase: every command reads a database this test process holds
// open for writing (through a secondary open), sees what it has written, writes
// nothing into its folder, and sees later writes on the next run.
func TestCommandsOnALiveDatabase(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	accounts, err := db.CreateColumnFamily("accounts")
	if err != nil {
		t.Fatal(err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx *pipeline.Txn) error {
		return errors.Join(tx.Put(accounts, []byte("alice"), []byte("100")), tx.Put(accounts, []byte("bob"), []byte("7")),
			tx.Put(accounts, []byte("carol"), []byte{0, 1}))
	}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"placed", "paid"} {
		if _, err := es.Append(ctx, "order-1", eventstore.Any, eventstore.Event{ID: typ, Type: typ, Data: []byte(`{"amount":5}`)}); err != nil {
			t.Fatal(err)
		}
	}
	before := listing(t, dir)

	out, _, code := run(t, "info", "--dir", dir, "--json")
	var info struct {
		LastPosition uint64                  `json:"last_position"`
		Families     []struct{ Name string } `json:"families"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.LastPosition != db.LastPosition() {
		t.Fatalf("info --json: exit %d, %q; want last position %d", code, out, db.LastPosition())
	}
	if !slices.ContainsFunc(info.Families, func(f struct{ Name string }) bool { return f.Name == "accounts" }) {
		t.Errorf("info lists families %+v, without accounts", info.Families)
	}
	if out, _, code := run(t, "info", "--dir", dir); code != 0 || !strings.Contains(out, "accounts") || !strings.Contains(out, "GEN") ||
		!strings.Contains(out, "created       20") || !strings.Contains(out, "validation parallel") {
		t.Errorf("info: exit %d:\n%s", code, out)
	}

	out, _, code = run(t, "log", "--dir", dir, "--json")
	var entries []pipeline.LogEntry
	if code != 0 || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != int(db.LastPosition()) {
		t.Fatalf("log --json: exit %d, %d entries; want %d", code, len(entries), db.LastPosition())
	}
	if out, _, code := run(t, "log", "--dir", dir, "--last", "1"); code != 0 || !strings.Contains(out, "order-1@1 paid") {
		t.Errorf("log --last 1: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "stream", "order-1", "--dir", dir); code != 0 || !strings.Contains(out, "placed") || strings.Index(out, "placed") > strings.Index(out, "paid") {
		t.Errorf("stream: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "stream", "order-1", "--dir", dir, "--backward", "--limit", "1"); code != 0 || !strings.Contains(out, "paid") || strings.Contains(out, "placed") {
		t.Errorf("stream --backward --limit 1: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "get", "accounts", "alice", "--dir", dir); code != 0 || strings.TrimSpace(out) != "100" {
		t.Errorf("get: exit %d, %q", code, out)
	}
	if out, _, code := run(t, "scan", "accounts", "--dir", dir); code != 0 || !strings.Contains(out, "bob") || !strings.Contains(out, "0x0001") {
		t.Errorf("scan: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "scan", "accounts", "--prefix", "b", "--dir", dir); code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("scan --prefix b: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "scan", "accounts", "--start", "b", "--end", "c", "--dir", dir); code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob") || strings.Contains(out, "carol") {
		t.Errorf("scan --start b --end c: exit %d:\n%s", code, out)
	}
	if after := listing(t, dir); !slices.Equal(before, after) {
		t.Errorf("the commands changed the folder: %v -> %v", before, after)
	}

	// The writer goes on; the next run sees it.
	if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(accounts, []byte("alice"), []byte("90")) }); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, "get", "accounts", "alice", "--dir", dir); code != 0 || strings.TrimSpace(out) != "90" {
		t.Errorf("get after the writer's update: exit %d, %q", code, out)
	}
}

// TestBadArguments: bad command lines exit with status 2 and a message naming what was
// wrong, and a folder that is not there with status 1.
func TestBadArguments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"info"}, 2, "--dir is required"},
		{[]string{"info", "--dir", dir, "--colour"}, 2, "unknown flag"},
		{[]string{"stream", "--dir", dir}, 2, "accepts 1 arg"},
		{[]string{"get", "nosuch", "k", "--dir", dir}, 2, `family "nosuch"`},
		{[]string{"get", "default", "zz", "--hex", "--dir", dir}, 2, "expected hex"},
		{[]string{"log", "--limit", "0", "--dir", dir}, 2, "--limit 0"},
		{[]string{"stream", "s", "--limit", "0", "--dir", dir}, 2, "limit"},
		{[]string{"info", "--dir", filepath.Join(t.TempDir(), "missing")}, 1, "no such file"},
	}
	for _, tc := range cases {
		_, errOut, code := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) || !strings.HasPrefix(errOut, "rockline: ") {
			t.Errorf("%v: exit %d, %q; want exit %d and a message containing %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

// TestBadArgumentsOfTheMaintenanceCommands: the commands that write refuse bad command
// lines with exit status 2 and change nothing.
func TestBadArgumentsOfTheMaintenanceCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dir)
	existing := t.TempDir()
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"verify", "extra", "--dir", dir}, 2, "unknown command"},
		{[]string{"checkpoint", "--dir", dir}, 2, "accepts 1 arg"},
		{[]string{"checkpoint", existing, "--dir", dir}, 2, "exists; expected a folder that does not exist yet"},
		{[]string{"restore", dir, "--dir", notEmpty}, 2, "is not empty"},
		{[]string{"restore", dir}, 2, "--dir is required"},
		{[]string{"restore", t.TempDir(), "--dir", filepath.Join(t.TempDir(), "r")}, 1, "holds no database"},
		{[]string{"truncate", "--dir", dir}, 2, "--before 0"},
		{[]string{"truncate", "--before", "99", "--dir", dir}, 2, "the log ends at"},
		{[]string{"compact", "--start", "a", "--dir", dir}, 2, "need a FAMILY"},
		{[]string{"compact", "default", "--start", "b", "--end", "a", "--dir", dir}, 2, "after --end"},
		{[]string{"compact", "nosuch", "--dir", dir}, 2, `family "nosuch"`},
		{[]string{"log", "--stream", "(", "--dir", dir}, 2, "expected a regular expression"},
		{[]string{"scan", "default", "--prefix", "a", "--start", "b", "--dir", dir}, 2, "one or the other"},
		{[]string{"scan", "default", "--start", "b", "--end", "a", "--dir", dir}, 2, "after --end"},
		{[]string{"log", "--follow", "--poll", "0s", "--dir", dir}, 2, "--poll"},
		{[]string{"verify", "--progress", "sometimes", "--dir", dir}, 2, "expected auto, always or never"},
		{[]string{"compact", "--dir", t.TempDir()}, 1, "holds no database"},
	}
	for _, tc := range cases {
		_, errOut, code := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) || !strings.HasPrefix(errOut, "rockline: ") {
			t.Errorf("%v: exit %d, %q; want exit %d and a message containing %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	if after := listing(t, dir); !slices.Equal(before, after) {
		t.Errorf("refused commands changed the folder: %v -> %v", before, after)
	}
}

// TestOnTheExamplesDatabases runs the tool on the folders the orders and bank examples
// leave: verify passes, and info, log and stream show what the examples wrote.
func TestOnTheExamplesDatabases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the examples")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	examples := []struct {
		name string
		args []string
	}{
		{"orders", nil},
		{"bank", []string{"-load", "1s", "-addr", "127.0.0.1:0"}},
	}
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			cmd := exec.Command("go", append([]string{"run", "./examples/" + ex.name, "-dir", dir}, ex.args...)...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s example: %v\n%s", ex.name, err, out)
			}
			out, _, code := run(t, "verify", "--dir", dir)
			if code != 0 || !strings.Contains(out, "verify: ok") || !strings.Contains(out, "state     ok") {
				t.Errorf("verify: exit %d:\n%s", code, out)
			}
			out, _, code = run(t, "info", "--dir", dir, "--json")
			var info struct {
				LastPosition uint64 `json:"last_position"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.LastPosition < 10 {
				t.Errorf("info: exit %d, %s", code, out)
			}
			if out, _, code := run(t, "log", "--dir", dir, "--last", "3"); code != 0 || strings.Count(out, "events, ") != 3 {
				t.Errorf("log --last 3: exit %d:\n%s", code, out)
			}
			if ex.name != "orders" {
				return
			}
			if out, _, code := run(t, "stream", "order-demo", "--dir", dir); code != 0 || !strings.Contains(out, "REVISION") || strings.Count(out, "\n") < 2 {
				t.Errorf("stream order-demo: exit %d:\n%s", code, out)
			}
		})
	}
}
