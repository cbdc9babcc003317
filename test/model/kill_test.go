package model_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The kill action hands a sequence of operations to a child process, kills it with
// SIGKILL after a drawn number of acknowledgements, reopens the database and checks
// that every acknowledged operation survived and that the one in flight, if any, landed
// whole or not at all. The child runs the operations one after another, so the ones
// that landed are a prefix of the sequence.

const (
	childEnv    = "ROCKLINE_MODEL_CHILD"
	childOpsEnv = "ROCKLINE_MODEL_OPS"
	ackLine     = "ACK"
	readyLine   = "READY"
)

// op is one operation of a kill child.
type op struct {
	Kind   string `json:"kind"` // put, create, drop, append
	Family string `json:"family,omitempty"`
	Key    string `json:"key,omitempty"`
	Value  string `json:"value,omitempty"`
	Stream string `json:"stream,omitempty"`
}

// TestKillChild is the child half of the kill action; run directly it does nothing.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return
	}
	var ops []op
	if err := json.Unmarshal([]byte(os.Getenv(childOpsEnv)), &ops); err != nil {
		t.Fatalf("child: ops: %v", err)
	}
	db, err := pipeline.Open(dir, modelConfig())
	if err != nil {
		t.Fatalf("child: Open: %v", err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("child: eventstore.New: %v", err)
	}
	fmt.Println(readyLine)
	ctx := context.Background()
	for i, o := range ops {
		var err error
		switch o.Kind {
		case "put":
			err = db.Update(ctx, func(tx *pipeline.Txn) error {
				cf, err := db.ColumnFamily(o.Family)
				if err != nil {
					return err
				}
				return tx.Put(cf, []byte(o.Key), []byte(o.Value))
			})
		case "create":
			_, err = db.CreateColumnFamily(o.Family)
		case "drop":
			err = db.DropColumnFamily(o.Family)
		case "append":
			_, err = es.Append(ctx, o.Stream, eventstore.Any, pipeline.Event{ID: o.Value, Type: "t"})
		}
		if err != nil {
			t.Fatalf("child: op %d %+v: %v", i, o, err)
		}
		fmt.Println(ackLine, i)
	}
	fmt.Println("DONE")
	select {} // until killed; the parent's deadline bounds it
}

// drawOps draws a valid sequence for the child against a scratch copy of the model's
// family set.
func (m *machine) drawOps(t *rapid.T) []op {
	live := make(map[string]bool)
	for _, n := range m.model.liveNames() {
		live[n] = true
	}
	n := rapid.IntRange(1, 12).Draw(t, "child ops")
	ops := make([]op, 0, n)
	for i := range n {
		m.step++
		tag := fmt.Sprintf("kill%d-%d", m.step, i)
		name := familyNames[rapid.IntRange(0, len(familyNames)-1).Draw(t, "child family")]
		switch rapid.IntRange(0, 3).Draw(t, "child op") {
		case 0:
			if live[name] {
				ops = append(ops, op{Kind: "drop", Family: name})
			} else {
				ops = append(ops, op{Kind: "create", Family: name})
			}
			live[name] = !live[name]
		case 1:
			ops = append(ops, op{Kind: "append", Stream: rapid.SampledFrom(streamNames).Draw(t, "child stream"), Value: tag})
		default:
			fam := "default"
			if live[name] {
				fam = name
			}
			ops = append(ops, op{Kind: "put", Family: fam, Key: tag, Value: tag})
		}
	}
	return ops
}

func (m *machine) kill(t *rapid.T) {
	ops := m.drawOps(t)
	killAt := rapid.IntRange(0, len(ops)).Draw(t, "kill after acks")
	if err := m.closeDB(t); err != nil {
		t.Fatalf("Close before the kill child: %v", err)
	}
	acked := runChild(t, m.dir, ops, killAt)
	m.open(t)
	clear(m.stale)
	// Every acknowledged op landed; the next one may have.
	for i := range acked {
		m.applyOp(t, ops[i])
	}
	if acked < len(ops) && m.landed(t, ops[acked]) {
		m.applyOp(t, ops[acked])
		acked++
	}
	if acked < len(ops) && m.landed(t, ops[acked]) {
		t.Fatalf("op %d %+v landed though op %d was neither acknowledged nor in flight", acked, ops[acked], acked)
	}
}

// landed reports whether o, the op after the last one applied to the model, is in
// the reopened database.
func (m *machine) landed(t *rapid.T, o op) bool {
	switch o.Kind {
	case "create":
		return slices.Contains(m.names(t), o.Family)
	case "drop":
		return !slices.Contains(m.names(t), o.Family)
	case "append":
		evs, err := m.es.ReadStreamBackward(context.Background(), o.Stream, ^uint64(0), 1)
		if errors.Is(err, pipeline.ErrLogTruncated) {
			return false // the newest event is older than the truncation, so not o's
		}
		if err != nil {
			t.Fatalf("ReadStreamBackward(%s): %v", o.Stream, err)
		}
		return len(evs) == 1 && evs[0].ID == o.Value
	default:
		_, ok := contents(t, m.db, o.Family)[o.Key]
		return ok
	}
}

func (m *machine) names(t *rapid.T) []string {
	names, err := m.db.ColumnFamilies()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// applyOp applies o to the model; each op took one position, in order (the entry of a
// family change that a kill cut short is written by the next Open, still next).
func (m *machine) applyOp(t *rapid.T, o op) {
	switch o.Kind {
	case "create":
		m.learnCreate(t, o.Family)
	case "drop":
		m.model.drop(o.Family)
	case "append":
		m.model.append(o.Stream, o.Value)
	default:
		m.model.commit([]write{{family: o.Family, key: o.Key, value: o.Value}})
	}
}

// runChild runs ops in a child on dir, kills it with SIGKILL once it has acknowledged
// killAt of them (or finished), and returns how many it acknowledged in all.
func runChild(t *rapid.T, dir string, ops []op, killAt int) int {
	js, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childOpsEnv+"="+string(js))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	acked, killed := 0, false
	kill := func() {
		if !killed {
			killed = true
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill child: %v", err)
			}
		}
	}
	timeout := time.After(deadline)
	for open := true; open; {
		select {
		case l, ok := <-lines:
			if !ok {
				open = false
				break
			}
			switch {
			case l == readyLine && killAt == 0:
				kill()
			case strings.HasPrefix(l, ackLine+" "):
				i, err := strconv.Atoi(strings.TrimPrefix(l, ackLine+" "))
				if err != nil || i != acked {
					t.Fatalf("child line %q: want %s %d", l, ackLine, acked)
				}
				acked++
				if acked >= killAt {
					kill()
				}
			case l == "DONE":
				kill()
			}
		case <-timeout:
			kill()
			t.Fatalf("child made no progress within %v (%d of %d ops acknowledged): stuck\nstderr:\n%s", deadline, acked, len(ops), stderr.String())
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !killed || !errors.As(err, &ee) {
		t.Fatalf("child exited by itself (%v) after %d acks\nstderr:\n%s", err, acked, stderr.String())
	}
	return acked
}
