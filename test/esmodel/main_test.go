// Package esmodel_test is the model-based test of the event store: random sequences
// of appends (every expectation, retries, racing goroutines), reads both ways, deletes,
// tombstones, stream metadata, Reclaim, log truncation, index reads, subscriptions, a
// projection (one handler or parallel workers, rebuilt blue/green through an alias),
// reopens and SIGKILLs, each checked against an in-memory model of what
// package eventstore documents.
package esmodel_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run()) // the kill child: it never returns normally
	}
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait: a call or a subscription that has not got there by then
// is stuck.
const deadline = 30 * time.Second

// TestESModel runs random sequences of event-store operations against a real database
// and against the model of what the event store documents, and checks after every
// step that the two agree. A failure prints rapid's seed and fail file, the promise
// broken, and the shrunk sequence with a FAILED line holding the values; rerun it
// with -rapid.failfile=... or -rapid.seed=... (a longer -rapid.shrinktime shrinks
// further).
// ROCKLINE_ESMODEL_CHECKS (sequences) and ROCKLINE_ESMODEL_STEPS (steps per sequence)
// scale the run; make crash runs the long form.
func TestESModel(t *testing.T) {
	checks := envInt(t, "ROCKLINE_ESMODEL_CHECKS", 20)
	steps := envInt(t, "ROCKLINE_ESMODEL_STEPS", 40)
	for name, v := range map[string]int{"rapid.checks": checks, "rapid.steps": steps} {
		if err := flag.Set(name, strconv.Itoa(v)); err != nil {
			t.Fatal(err)
		}
	}
	var first sync.Once
	reportFirst = func(msg string) {
		first.Do(func() { t.Logf("first failure, before rapid replays and shrinks it: %s", msg) })
	}
	defer func() { reportFirst = nil }()
	root := t.TempDir()
	st := &stats{actions: make(map[string]int)}
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		st.sequences++
		m := newMachine(rt, filepath.Join(root, strconv.Itoa(st.sequences)), st)
		defer m.teardown()
		actions := m.actions()
		for name, act := range actions {
			if name != "" {
				actions[name] = func(rt *rapid.T) {
					act(rt)
					st.actions[name]++
					st.steps++
				}
			}
		}
		rt.Repeat(actions)
	})
	t.Logf("esmodel: %d sequences (rapid.checks=%d, rapid.steps=%d), %d steps, %d kills, in %v; actions run: %s",
		st.sequences, checks, steps, st.steps, st.actions["kill"], time.Since(start).Round(time.Millisecond), st)
}

// stats counts what a run did, for its log line.
type stats struct {
	sequences, steps int
	actions          map[string]int
}

func (s *stats) String() string {
	names := make([]string, 0, len(s.actions))
	for n := range s.actions {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", n, s.actions[n])
	}
	return b.String()
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// machine holds the database under test, the model it must agree with, and the
// application-side state of the subscribers and the projection.
type machine struct {
	dir   string
	db    *pipeline.DB
	es    *eventstore.Store
	model *model
	stats *stats
	ids   int          // events drawn so far: IDs are e1, e2, ...
	calls []appendCall // appends made, for retries
	subs  []*allSub
	nsubs int // subscribers made, for their names
	proj  *proj
	gens  int // projection generations made
	// aliasGen is the generation the read model's alias names (0: none yet).
	aliasGen int
	cps      int // log checkpoints taken
}

func newMachine(t *rapid.T, dir string, st *stats) *machine {
	m := &machine{dir: dir, model: newModel(), stats: st}
	m.open(t)
	return m
}

// open opens the database and its store; the caller restarts subscribers and the
// projection.
func (m *machine) open(t *rapid.T) {
	db, err := pipeline.Open(m.dir, pipeline.Config{})
	if err != nil {
		fatalf(t, "Open: %v", err)
	}
	es, err := eventstore.NewWithConfig(context.Background(), db, storeConfig)
	if err != nil {
		db.Close()
		fatalf(t, "eventstore.NewWithConfig: %v", err)
	}
	m.db, m.es = db, es
}

// closeDB stops the subscribers (returning where each got to) and the projection, then
// closes the database within the deadline.
func (m *machine) closeDB(t *rapid.T) map[*allSub]uint64 {
	at := make(map[*allSub]uint64, len(m.subs))
	for _, s := range m.subs {
		at[s] = s.stop(t, m)
	}
	m.stopProjection(t)
	done := make(chan error, 1)
	db := m.db
	go func() { done <- db.Close() }()
	select {
	case err := <-done:
		if err != nil {
			fatalf(t, "Close: %v", err)
		}
	case <-time.After(deadline):
		fatalf(t, "Close did not return within %v", deadline)
	}
	return at
}

// teardown releases what a sequence holds, whether it passed or failed.
func (m *machine) teardown() {
	for _, s := range m.subs {
		if s.inst != nil {
			s.inst.sub.Close()
		}
	}
	if m.proj != nil && m.proj.p != nil {
		m.proj.p.Close()
	}
	if m.db != nil {
		m.db.Close()
	}
}

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"append":            m.appendOne,
		"retry":             m.retry,
		"concurrentRetries": m.concurrentRetries,
		"racingAppends":     m.racingAppends,
		"parallelAppends":   m.parallelAppends,
		"appendTxn":         m.appendTxn,
		"appendIf":          m.appendIf,
		"addEvents":         m.addEvents,
		"delete":            m.deleteStream,
		"tombstone":         m.tombstone,
		"setMetadata":       m.setMetadata,
		"reclaim":           m.reclaim,
		"checkpointLog":     m.checkpointLog,
		"truncateLog":       m.truncateLog,
		"readStream":        m.readStreamAction,
		"readAll":           m.readAllAction,
		"readIndex":         m.readIndexAction,
		"subscribeAll":      m.subscribeAll,
		"restartSub":        m.restartSub,
		"crashSub":          m.crashSub,
		"dropSub":           m.dropSub,
		"subscribeStream":   m.subscribeStream,
		"projStart":         m.projStart,
		"projStop":          m.projStop,
		"projPause":         m.projPause,
		"projResume":        m.projResume,
		"projReset":         m.projReset,
		"projRebuild":       m.projRebuild,
		"reopen":            m.reopen,
		"kill":              m.kill,
		"":                  m.check,
	}
}

// reopen: Close returns within the deadline, the closed store refuses calls with
// ErrClosed, and the reopened database agrees with the model; subscribers resume from
// their Position, the projection from its stored position.
func (m *machine) reopen(t *rapid.T) {
	old := m.es
	at := m.closeDB(t)
	if _, err := old.Append(context.Background(), streamNames[0], eventstore.Any, eventstore.Event{ID: "closed", Type: "a.1"}); !errors.Is(err, pipeline.ErrClosed) {
		fatalf(t, "Append on a closed store: %v, want ErrClosed", err)
	}
	if _, err := old.ReadStream(context.Background(), streamNames[0], 0, eventstore.ToEnd); !errors.Is(err, pipeline.ErrClosed) {
		fatalf(t, "ReadStream on a closed store: %v, want ErrClosed", err)
	}
	m.open(t)
	for _, s := range m.subs {
		s.start(t, m, at[s], 0, 0)
	}
	m.restartProjection(t)
}
