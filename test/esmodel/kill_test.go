package esmodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The kill action closes the database, hands a sequence of operations to a child
// process (this test binary, running TestKillChild) that runs them on it one after
// another, with the projection running if it was, and SIGKILLs it once it has
// acknowledged a drawn number of them and started the next (which it never
// acknowledges, so at most one is in flight: a replay of a failing sequence lands the
// same operations, give or take that one). The reopened database must hold every acknowledged operation,
// the one in flight whole or not at all, and none after it; the projection's read
// model must count exactly the events up to its stored position; the subscribers,
// dead with the process in the story, come back from their stored checkpoints.

const (
	childEnv   = "ROCKLINE_ESMODEL_CHILD"
	planEnv    = "ROCKLINE_ESMODEL_PLAN"
	ackPrefix  = "ACK "
	flightLine = "FLIGHT" // the child starts the op it will be killed in
	doneLine   = "DONE"
)

// childPlan is what the child runs: the operations (acknowledging those before KillAt,
// then starting the one at KillAt), and the projection generation to run meanwhile
// (0: none).
type childPlan struct {
	Ops         []op `json:"ops"`
	KillAt      int  `json:"kill_at"`
	ProjGen     int  `json:"proj_gen,omitempty"`
	ProjFilter  int  `json:"proj_filter,omitempty"`
	ProjWorkers int  `json:"proj_workers,omitempty"`
}

// op is one operation of the child.
type op struct {
	Kind   string      `json:"kind"` // append, events, delete, meta, tombstone
	Stream string      `json:"stream,omitempty"`
	Exp    expectation `json:"-"`
	ExpJS  [2]uint64   `json:"exp"`
	Events []eventSpec `json:"-"`
	EvJS   [][3]string `json:"events,omitempty"`
	MD     eventstore.StreamMetadata
}

func (o *op) encode() {
	o.ExpJS = [2]uint64{uint64(o.Exp.kind), o.Exp.rev}
	o.EvJS = nil
	for _, e := range o.Events {
		o.EvJS = append(o.EvJS, [3]string{e.id, e.typ, e.tags})
	}
}

func (o *op) decode() {
	o.Exp = expectation{kind: int(o.ExpJS[0]), rev: o.ExpJS[1]}
	o.Events = nil
	for _, e := range o.EvJS {
		o.Events = append(o.Events, eventSpec{id: e[0], typ: e[1], tags: e[2]})
	}
}

// TestKillChild is the child half of the kill action; run directly it does nothing.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestESModel's kill action")
	}
	var plan childPlan
	if err := json.Unmarshal([]byte(os.Getenv(planEnv)), &plan); err != nil {
		t.Fatalf("child: plan: %v", err)
	}
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatalf("child: Open: %v", err)
	}
	es, err := eventstore.NewWithConfig(context.Background(), db, storeConfig)
	if err != nil {
		t.Fatalf("child: eventstore.NewWithConfig: %v", err)
	}
	if plan.ProjGen > 0 {
		if _, err := startProjection(db, es, plan.ProjGen, plan.ProjFilter, plan.ProjWorkers); err != nil {
			t.Fatalf("child: StartProjection: %v", err)
		}
	}
	for i, o := range plan.Ops {
		o.decode()
		if i == plan.KillAt {
			fmt.Println(flightLine)
			_, _ = runOp(db, es, o) // killed in it, or after it: never acknowledged
			break
		}
		pos, err := runOp(db, es, o)
		if err != nil {
			t.Fatalf("child: op %d %+v: %v", i, o, err)
		}
		fmt.Printf("%s%d %d\n", ackPrefix, i, pos)
	}
	if plan.KillAt >= len(plan.Ops) {
		fmt.Println(doneLine)
	}
	select {} // until killed; the parent's deadline bounds it
}

// runOp runs o and returns the position its commit took (0 for none).
func runOp(db *pipeline.DB, es *eventstore.Store, o op) (uint64, error) {
	ctx := context.Background()
	switch o.Kind {
	case "append":
		res, err := es.Append(ctx, o.Stream, o.Exp.api(), apiEvents(o.Events)...)
		return res.Position, err
	case "events":
		return db.UpdatePosition(ctx, func(tx *pipeline.Txn) error { return tx.AddEvents(apiEvents(o.Events)...) })
	case "delete":
		return es.DeleteStream(ctx, o.Stream, o.Exp.api())
	case "meta":
		return es.SetStreamMetadata(ctx, o.Stream, o.MD)
	case "tombstone":
		return es.TombstoneStream(ctx, o.Stream, o.Exp.api())
	}
	return 0, fmt.Errorf("unknown op %q", o.Kind)
}

// simStream is what drawing the child's operations needs of a stream, so each one
// meets its expectation.
type simStream struct {
	next                      uint64
	hasHead, deleted, tombstn bool
}

// drawOps draws a sequence of operations that all succeed when run in order.
func (m *machine) drawOps(t *rapid.T) []op {
	sim := make(map[string]*simStream)
	for _, s := range streamNames {
		st := m.model.streams[s]
		sim[s] = &simStream{next: st.nextRev(), hasHead: st.hasHead(), deleted: st.deleted, tombstn: st.tombstoned}
	}
	n := rapid.IntRange(1, 8).Draw(t, "child ops")
	ops := make([]op, 0, n)
	for range n {
		var live []string
		for _, s := range streamNames {
			if !sim[s].tombstn {
				live = append(live, s)
			}
		}
		kind := []string{"append", "append", "append", "events", "delete", "meta", "tombstone"}[rapid.IntRange(0, 6).Draw(t, "child op")]
		if len(live) == 0 {
			kind = "events"
		}
		o := op{Kind: kind, Exp: expectation{kind: expAny}}
		if kind != "events" {
			o.Stream = rapid.SampledFrom(live).Draw(t, "child stream")
		}
		ss := sim[o.Stream]
		switch kind {
		case "append", "events":
			o.Events = m.drawEvents(t, "child")
		case "meta":
			o.MD = eventstore.StreamMetadata{
				MaxCount:       uint64(rapid.IntRange(0, 3).Draw(t, "child MaxCount")),
				TruncateBefore: uint64(rapid.IntRange(0, int(ss.next)+1).Draw(t, "child TruncateBefore")),
			}
		}
		switch kind {
		case "append":
			exists := ss.hasHead && !ss.deleted
			cands := []expectation{{kind: expAny}, {kind: expNoStream}}
			if exists {
				cands = []expectation{{kind: expAny}, {kind: expStreamExists}, {kind: expExact, rev: ss.next - 1}}
			}
			o.Exp = cands[rapid.IntRange(0, len(cands)-1).Draw(t, "child expected")]
			ss.next += uint64(len(o.Events))
			ss.hasHead, ss.deleted = true, false
		case "delete":
			ss.deleted = ss.deleted || ss.hasHead
		case "tombstone":
			ss.tombstn = true
		}
		o.encode()
		ops = append(ops, o)
	}
	return ops
}

// kill: the child runs the drawn operations and is killed after a drawn number of
// acknowledgements.
func (m *machine) kill(t *rapid.T) {
	ops := m.drawOps(t)
	killAt := rapid.IntRange(0, len(ops)).Draw(t, "kill after acks")
	last := m.db.LastPosition()
	m.closeDB(t)
	plan := childPlan{Ops: ops, KillAt: killAt}
	if pr := m.proj; pr != nil && pr.wasRunning && !pr.doomed {
		plan.ProjGen, plan.ProjFilter, plan.ProjWorkers = pr.gen, pr.filter, pr.workers
	}
	acks := runChild(t, m.dir, plan)
	m.open(t)
	found := m.childEvents(t, last)
	for i, o := range ops {
		var pos uint64
		switch {
		case i < len(acks):
			pos = acks[i]
		case i == len(acks) && m.landed(t, o, found):
			if len(o.Events) > 0 {
				pos = found[o.Events[0].id].Position
			}
		default:
			for _, e := range o.Events {
				if _, ok := found[e.id]; ok {
					fatalf(t, "child op %d %+v, neither acknowledged nor in flight, landed", i, o)
				}
			}
			continue
		}
		m.applyOp(t, o, pos)
	}
	if pr := m.proj; pr != nil && pr.wasRunning && !pr.doomed {
		m.compareReadModel(t, pr, m.storedPositions(t, pr))
	}
	for _, s := range m.subs {
		s.start(t, m, s.crash(), 0, 0)
	}
	m.restartProjection(t)
}

// childEvents returns the events the log holds after position last, by ID.
func (m *machine) childEvents(t *rapid.T, last uint64) map[string]eventstore.RecordedEvent {
	evs, err := m.es.ReadAll(context.Background(), eventstore.At{Position: last + 1}, eventstore.ToEnd, eventstore.Filter{})
	if err != nil {
		fatalf(t, "ReadAll after the kill: %v", err)
	}
	out := make(map[string]eventstore.RecordedEvent, len(evs))
	for _, e := range evs {
		out[e.ID] = e
	}
	return out
}

// landed reports whether o, the op in flight at the kill, is in the reopened
// database; the model has learnt the ops before it.
func (m *machine) landed(t *rapid.T, o op, found map[string]eventstore.RecordedEvent) bool {
	ctx := context.Background()
	switch o.Kind {
	case "append", "events":
		_, ok := found[o.Events[0].id]
		return ok
	case "delete":
		st := m.model.streams[o.Stream]
		if !st.hasHead() || st.deleted {
			return false // a delete that changes nothing
		}
		// NoStream matches a soft-deleted stream, and a delete of one changes nothing.
		_, err := m.es.DeleteStream(ctx, o.Stream, eventstore.NoStream)
		if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			return false
		}
		if err != nil {
			fatalf(t, "DeleteStream(%s, no_stream) after the kill: %v", o.Stream, err)
		}
		return true
	case "meta":
		md, err := m.es.GetStreamMetadata(ctx, o.Stream)
		if err != nil {
			fatalf(t, "GetStreamMetadata(%s) after the kill: %v", o.Stream, err)
		}
		return md == o.MD
	default:
		_, err := m.es.GetStreamMetadata(ctx, o.Stream)
		return errors.Is(err, eventstore.ErrStreamDeleted)
	}
}

// applyOp applies o, which landed at pos (0 when not known), to the model.
func (m *machine) applyOp(t *rapid.T, o op, pos uint64) {
	m.model.saw(pos)
	st := m.model.streams[o.Stream]
	switch o.Kind {
	case "append":
		m.model.appendAt(o.Stream, pos, 0, o.Events)
	case "events":
		m.model.addEvents(pos, o.Events)
	case "delete":
		m.model.softDelete(o.Stream)
	case "meta":
		st.md = o.MD
	case "tombstone":
		st.tombstoned = true
	}
}

// runChild runs plan in a child on dir, kills it with SIGKILL once it has started the
// op at plan.KillAt (or finished), and returns the positions of the acknowledged ones.
func runChild(t *rapid.T, dir string, plan childPlan) []uint64 {
	js, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, planEnv+"="+string(js))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		fatalf(t, "start child: %v", err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var acks []uint64
	killed := false
	kill := func() {
		if !killed {
			killed = true
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				fatalf(t, "kill child: %v", err)
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
			case l == flightLine, l == doneLine:
				kill()
			case strings.HasPrefix(l, ackPrefix):
				f := strings.Fields(strings.TrimPrefix(l, ackPrefix))
				i, err1 := strconv.Atoi(f[0])
				pos, err2 := strconv.ParseUint(f[len(f)-1], 10, 64)
				if len(f) != 2 || err1 != nil || err2 != nil || i != len(acks) || i >= plan.KillAt {
					kill()
					fatalf(t, "child line %q: want %s%d POSITION, below %d", l, ackPrefix, len(acks), plan.KillAt)
				}
				acks = append(acks, pos)
			}
		case <-timeout:
			kill()
			fatalf(t, "child made no progress within %v (%d of %d ops acknowledged)\nstderr:\n%s", deadline, len(acks), len(plan.Ops), stderr.String())
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !killed || !errors.As(err, &ee) {
		fatalf(t, "child exited by itself (%v) after %d acks\nstderr:\n%s", err, len(acks), stderr.String())
	}
	return acks
}
