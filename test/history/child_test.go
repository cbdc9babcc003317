package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// The local engine's kill fault: the test binary, re-executed with envChild set, opens
// the database, runs the workload and a subscriber from 0, and reports every event on
// stdout until the parent SIGKILLs it (or its stdin closes, or childLifetime passes).

const envChild = "ROCKLINE_HISTORY_CHILD"

// childLifetime bounds a child the parent forgot to kill.
const childLifetime = 2 * time.Minute

// childConfig is what a child runs.
type childConfig struct {
	Dir                           string
	Sub                           int
	Seed                          uint64
	Clients                       int
	FirstID, FirstKey, ActiveKeys int
	FirstValue                    int64
}

func runChildIfAsked() {
	v, ok := os.LookupEnv(envChild)
	if !ok {
		return
	}
	if err := runChild(v); err != nil {
		fmt.Fprintln(os.Stderr, "history child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(v string) error {
	var c childConfig
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return fmt.Errorf("%s: %w", envChild, err)
	}
	db, err := pipeline.Open(c.Dir, pipeline.Config{})
	if err != nil {
		return err
	}
	rec := NewRecorder(os.Stdout)
	f := Follow(db, c.Sub, rec.Seen)
	stop := make(chan struct{})
	go func() { // ends with the process
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	life := time.AfterFunc(childLifetime, func() { os.Exit(2) })
	defer life.Stop()
	Run(stop, Workload{Clients: c.Clients, ActiveKeys: c.ActiveKeys, Seed: c.Seed, FirstID: c.FirstID, FirstValue: c.FirstValue, FirstKey: c.FirstKey, Classify: ClassifyLocal}, rec, func(int) *pipeline.DB { return db })
	f.Close()
	if err := rec.Err(); err != nil {
		return err
	}
	return db.Close()
}

// child is a running child process.
type child struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   bytes.Buffer
	complete atomic.Int64
	progress chan struct{} // a completion was replayed
	replayed chan struct{} // closed when stdout ended
	seen     []Seen
	err      error
}

// startChild starts a child on c, replaying its events into rec as they come.
func startChild(t *testing.T, c childConfig, rec *Recorder) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: exec.Command(exe, "-test.run=^$"), progress: make(chan struct{}, 1), replayed: make(chan struct{})}
	ch.cmd.Env = append(os.Environ(), envChild+"="+string(js))
	ch.cmd.Stderr = &ch.stderr
	out, err := ch.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if ch.stdin, err = ch.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // ends when the child's stdout closes
		defer close(ch.replayed)
		ch.seen, ch.err = rec.Replay(out, func(e Event) {
			if e.Kind == "complete" {
				ch.complete.Add(1)
				select {
				case ch.progress <- struct{}{}:
				default:
				}
			}
		})
	}()
	return ch
}

// killAfter SIGKILLs the child once it has completed n transactions, and waits for it
// to be gone; it fails the test when the child exited before, or did not get there
// by the deadline.
func (ch *child) killAfter(t *testing.T, n int64, deadline time.Duration) {
	t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	var problem string
	for problem == "" && ch.complete.Load() < n {
		select {
		case <-ch.progress:
		case <-ch.replayed:
			problem = fmt.Sprintf("the child ended after %d transactions, before the kill at %d", ch.complete.Load(), n)
		case <-timeout.C:
			problem = fmt.Sprintf("the child completed %d transactions in %v, want %d", ch.complete.Load(), deadline, n)
		}
	}
	_ = ch.cmd.Process.Kill()
	<-ch.replayed
	_ = ch.cmd.Wait() // after the reads of stdout; stderr is complete once it returns
	_ = ch.stdin.Close()
	stderr := ch.stderr.String()
	switch {
	case problem != "":
		t.Fatalf("%s (replay: %v); stderr:\n%s", problem, ch.err, stderr)
	case ch.err != nil:
		t.Fatalf("replaying the child's events: %v", ch.err)
	case strings.Contains(stderr, "DATA RACE") || strings.Contains(stderr, "panic"):
		t.Fatalf("the child reported:\n%s", stderr)
	}
}
