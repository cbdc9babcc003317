package model_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/test/lockvalidator"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run()) // the kill child: it never returns normally
	}
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait: a call that does not return by then is a deadlock.
const deadline = 30 * time.Second

// Small pools keep collisions (re-creating a dropped name, writing a key twice, racing
// the same stream) frequent.
var (
	familyNames = []string{"a", "b", "c"}
	keys        = []string{"k0", "k1", "k2", "k3", "k4"}
	streamNames = []string{"s0", "s1"}
)

// TestModel runs random sequences of lifecycle operations against rockline and against
// the model of what its API promises (see model.go), and checks after every step that
// the two agree. A failure prints the seed and a fail file; rerun it with
// -rapid.failfile=... or -rapid.seed=..., and rapid shrinks it to a short sequence.
// ROCKLINE_MODEL_CHECKS and ROCKLINE_MODEL_STEPS scale the run (make crash runs the long
// form).
func TestModel(t *testing.T) { runModel(t) }

// TestModelOutsideValidator runs the model test on databases whose validator was
// written outside the validators package (test/lockvalidator), plugged in through
// Config.Validator: the kill child opens its database the same way.
func TestModelOutsideValidator(t *testing.T) {
	t.Setenv(validatorEnv, lockvalidator.Policy)
	runModel(t)
}

// validatorEnv names the validator the databases of a run use: empty for the
// built-in default, lockvalidator.Policy for the outside one. It reaches the kill
// child through the environment.
const validatorEnv = "ROCKLINE_MODEL_VALIDATOR"

// modelConfig is the Config every database of the run opens with.
func modelConfig() pipeline.Config {
	if os.Getenv(validatorEnv) == lockvalidator.Policy {
		return pipeline.Config{Validator: lockvalidator.New}
	}
	return pipeline.Config{}
}

func runModel(t *testing.T) {
	checks := envInt(t, "ROCKLINE_MODEL_CHECKS", 12)
	steps := envInt(t, "ROCKLINE_MODEL_STEPS", 40)
	for name, v := range map[string]int{"rapid.checks": checks, "rapid.steps": steps} {
		if err := flag.Set(name, strconv.Itoa(v)); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	runs := 0
	start := time.Now()
	counts := make(map[string]int)
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		m := newMachine(rt, filepath.Join(root, strconv.Itoa(runs)))
		defer m.close()
		actions := m.actions()
		for n, act := range actions {
			if n != "" {
				actions[n] = func(rt *rapid.T) {
					act(rt)
					counts[n]++
				}
			}
		}
		rt.Repeat(actions)
	})
	t.Logf("model: %d runs (rapid.checks=%d, rapid.steps=%d) in %v; actions run: %v", runs, checks, steps, time.Since(start).Round(time.Millisecond), counts)
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

// machine holds the database under test and the model it must agree with.
type machine struct {
	dir   string
	db    *pipeline.DB
	es    *eventstore.Store // db's event store
	model *model
	// stale holds handles of family generations that were dropped since, by name.
	stale map[string]*pipeline.ColumnFamily
	sub   *follower
	// subPos is where the subscription got to before the last Close; the next one
	// resumes there, as an application storing its position would.
	subPos uint64
	cps    []checkpoint
	step   int
}

type checkpoint struct {
	dir       string
	covered   uint64
	truncated uint64 // the truncation mark the copy was taken with
}

func newMachine(t *rapid.T, dir string) *machine {
	m := &machine{dir: dir, model: newModel(), stale: make(map[string]*pipeline.ColumnFamily)}
	m.open(t)
	return m
}

func (m *machine) open(t *rapid.T) {
	db, err := pipeline.Open(m.dir, modelConfig())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		db.Close()
		t.Fatalf("eventstore.New: %v", err)
	}
	m.db, m.es = db, es
	m.sub = follow(t, db, m.subPos)
}

// closeDB closes the database within the deadline and returns Close's error.
func (m *machine) closeDB(t *rapid.T) error {
	m.subPos = m.sub.stop(t)
	done := make(chan error, 1)
	go func() { done <- m.db.Close() }()
	select {
	case err := <-done:
		m.db, m.es = nil, nil
		return err
	case <-time.After(deadline):
		t.Fatalf("Close did not return within %v", deadline)
		return nil
	}
}

func (m *machine) close() {
	if m.db != nil {
		m.sub.cancel()
		<-m.sub.done
		m.db.Close()
	}
}

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"create":            m.create,
		"drop":              m.drop,
		"commit":            m.commit,
		"commitStale":       m.commitStale,
		"append":            m.append,
		"racingAppends":     m.racingAppends,
		"commitsRacingDrop": m.commitsRacingDrop,
		"checkpoint":        m.checkpoint,
		"truncate":          m.truncate,
		"replayCheckpoint":  m.replayCheckpoint,
		"rebuild":           m.rebuild,
		"reopen":            m.reopen,
		"closeRacingWrites": m.closeRacingWrites,
		"kill":              m.kill,
		"":                  m.check,
	}
}

func (m *machine) family(t *rapid.T, name string) *pipeline.ColumnFamily {
	cf, err := m.db.ColumnFamily(name)
	if err != nil {
		t.Fatalf("ColumnFamily(%q): %v", name, err)
	}
	return cf
}

// create: a live name fails with ErrColumnFamilyExists; otherwise the next generation
// exists, empty, with a log entry.
func (m *machine) create(t *rapid.T) {
	name := rapid.SampledFrom(familyNames).Draw(t, "family")
	cf, err := m.db.CreateColumnFamily(name)
	if m.model.live(name) {
		expectIs(t, "CreateColumnFamily of a live name", err, pipeline.ErrColumnFamilyExists)
		return
	}
	if err != nil {
		t.Fatalf("CreateColumnFamily(%q): %v", name, err)
	}
	_ = cf
	m.learnCreate(t, name)
}

// learnCreate records in the model the creation of name at the next position, with
// the generation its log entry gives, which must be above every earlier one.
func (m *machine) learnCreate(t *rapid.T, name string) {
	pos := m.model.pos + 1
	e, err := m.db.Entry(pos)
	if err != nil {
		t.Fatalf("Entry(%d) of the creation of %q: %v", pos, name, err)
	}
	m.model.create(name, m.createdGen(t, e, name))
}

// createdGen returns the generation e records name's creation with.
func (m *machine) createdGen(t *rapid.T, e pipeline.LogEntry, name string) int {
	if len(e.Families) != 1 || e.Families[0].Family != name || e.Families[0].Dropped {
		t.Fatalf("entry %d records %+v, want the creation of %q", e.Position, e.Families, name)
	}
	gen := e.Families[0].Generation
	if gen <= m.model.maxGen[name] {
		t.Fatalf("%q created at generation %d, not above its earlier %d", name, gen, m.model.maxGen[name])
	}
	return gen
}

// drop: an unknown name fails with ErrColumnFamilyNotFound; otherwise the family is
// gone, with a log entry, and its old handle refuses writes.
func (m *machine) drop(t *rapid.T) {
	name := rapid.SampledFrom(familyNames).Draw(t, "family")
	var old *pipeline.ColumnFamily
	if m.model.live(name) {
		old = m.family(t, name)
	}
	err := m.db.DropColumnFamily(name)
	if !m.model.live(name) {
		expectIs(t, "DropColumnFamily of an unknown name", err, pipeline.ErrColumnFamilyNotFound)
		return
	}
	if err != nil {
		t.Fatalf("DropColumnFamily(%q): %v", name, err)
	}
	m.model.drop(name)
	m.stale[name] = old
}

type write struct {
	family, key, value string
	del                bool
}

func drawWrites(t *rapid.T, families []string, label string) []write {
	n := rapid.IntRange(1, 4).Draw(t, label+" writes")
	var ws []write
	for i := range n {
		w := write{
			family: rapid.SampledFrom(families).Draw(t, label+" family"),
			key:    rapid.SampledFrom(keys).Draw(t, label+" key"),
			del:    rapid.IntRange(0, 3).Draw(t, label+" delete") == 0,
		}
		if !w.del {
			w.value = fmt.Sprintf("%s-%d", label, i)
		}
		ws = append(ws, w)
	}
	return ws
}

func (m *machine) apply(tx *pipeline.Txn, ws []write) error {
	for _, w := range ws {
		cf, err := m.db.ColumnFamily(w.family)
		if err != nil {
			return err
		}
		if w.del {
			err = tx.Delete(cf, []byte(w.key))
		} else {
			err = tx.Put(cf, []byte(w.key), []byte(w.value))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// commit: puts and deletes over live families (and default), with a tracked read,
// through Commit or CommitInline.
func (m *machine) commit(t *rapid.T) {
	m.step++
	ws := drawWrites(t, append([]string{"default"}, m.model.liveNames()...), fmt.Sprintf("c%d", m.step))
	sync := rapid.Bool().Draw(t, "CommitInline")
	tx := m.db.Begin()
	if _, err := tx.Get(m.family(t, ws[0].family), []byte(ws[0].key)); err != nil && !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("Get: %v", err)
	}
	if err := m.apply(tx, ws); err != nil {
		t.Fatalf("buffering %v: %v", ws, err)
	}
	var err error
	if sync {
		err = tx.CommitInline()
	} else {
		err = tx.Commit(context.Background())
	}
	if err != nil {
		t.Fatalf("commit of %v: %v", ws, err)
	}
	m.model.commit(ws)
}

// commitStale: a transaction that buffered a write through a handle of a generation
// dropped since (or read it with tracking) fails whole with ErrColumnFamilyDropped.
func (m *machine) commitStale(t *rapid.T) {
	names := slices.Sorted(maps.Keys(m.stale))
	if len(names) == 0 {
		t.Skip("no dropped family handle")
	}
	name := rapid.SampledFrom(names).Draw(t, "stale family")
	old := m.stale[name]
	tx := m.db.Begin()
	defer tx.Discard()
	if rapid.Bool().Draw(t, "read only") {
		// The read itself works while something keeps the dropped generation (a
		// transaction begun before the drop) and is refused once its memory is freed;
		// either way it is tracked.
		if _, err := tx.Get(old, []byte("k0")); err != nil && !errors.Is(err, pipeline.ErrNotFound) && !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
			t.Fatalf("read through a dropped handle: %v", err)
		}
		if err := tx.Put(m.db.Default(), []byte("stale"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		expectIs(t, "commit after a tracked read of a dropped family", tx.Commit(context.Background()), pipeline.ErrColumnFamilyDropped)
		return
	}
	expectIs(t, "Put through a dropped handle", tx.Put(old, []byte("k0"), []byte("x")), pipeline.ErrColumnFamilyDropped)
}

// append: an append with an expected revision drawn to match or not.
func (m *machine) append(t *rapid.T) {
	m.step++
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	cur := m.model.streams[s]
	var exp eventstore.ExpectedRevision
	want := true
	switch rapid.IntRange(0, 3).Draw(t, "expected") {
	case 0:
		exp = eventstore.Any
	case 1:
		exp, want = eventstore.NoStream, len(cur) == 0
	case 2:
		exp, want = eventstore.StreamExists, len(cur) > 0
	default:
		r := uint64(rapid.IntRange(0, len(cur)+1).Draw(t, "revision"))
		exp, want = eventstore.Revision(r), len(cur) > 0 && r == uint64(len(cur)-1)
	}
	id := fmt.Sprintf("e%d", m.step)
	_, err := m.es.Append(context.Background(), s, exp, pipeline.Event{ID: id, Type: "t", Data: []byte(id)})
	if !want {
		expectIs(t, fmt.Sprintf("Append(%s, %v) to a stream of %d events", s, exp, len(cur)), err, eventstore.ErrWrongExpectedVersion)
		return
	}
	if err != nil {
		t.Fatalf("Append(%s, %v): %v", s, exp, err)
	}
	m.model.append(s, id)
}

// racingAppends: several appends expecting the same revision race; exactly one wins.
func (m *machine) racingAppends(t *rapid.T) {
	m.step++
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	n := rapid.IntRange(2, 4).Draw(t, "racers")
	exp := eventstore.NoStream
	if cur := m.model.streams[s]; len(cur) > 0 {
		exp = eventstore.Revision(uint64(len(cur) - 1))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("r%d-%d", m.step, i)
			_, errs[i] = m.es.Append(context.Background(), s, exp, pipeline.Event{ID: id, Type: "t"})
		}()
	}
	waitFor(t, &wg, "racing appends")
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("racing appends to %s: %d and %d both won", s, winner, i)
			}
			winner = i
		case !errors.Is(err, eventstore.ErrWrongExpectedVersion):
			t.Fatalf("racing append %d: %v, want nil or ErrWrongExpectedVersion", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("racing appends to %s: none won (%v)", s, errs)
	}
	m.model.append(s, fmt.Sprintf("r%d-%d", m.step, winner))
}

// commitsRacingDrop: commits that write a family and the default family race its drop.
// Each either lands whole (before the drop) or fails whole with ErrColumnFamilyDropped.
func (m *machine) commitsRacingDrop(t *rapid.T) {
	live := m.model.liveNames()
	if len(live) == 0 {
		t.Skip("no live family")
	}
	m.step++
	name := rapid.SampledFrom(live).Draw(t, "family")
	n := rapid.IntRange(1, 4).Draw(t, "commits")
	cf := m.family(t, name)
	txs := make([]*pipeline.Txn, n)
	writes := make([][]write, n)
	for i := range n {
		writes[i] = []write{
			{family: name, key: fmt.Sprintf("k%d", i), value: fmt.Sprintf("race%d-%d", m.step, i)},
			{family: "default", key: fmt.Sprintf("race%d-%d", m.step, i), value: "x"},
		}
		txs[i] = m.db.Begin()
		if err := txs[i].Put(cf, []byte(writes[i][0].key), []byte(writes[i][0].value)); err != nil {
			t.Fatal(err)
		}
		if err := txs[i].Put(m.db.Default(), []byte(writes[i][1].key), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, n)
	var dropErr error
	var wg sync.WaitGroup
	wg.Add(n + 1)
	for i := range n {
		go func() {
			defer wg.Done()
			errs[i] = txs[i].Commit(context.Background())
		}()
	}
	go func() {
		defer wg.Done()
		dropErr = m.db.DropColumnFamily(name)
	}()
	waitFor(t, &wg, "commits racing a drop")
	if dropErr != nil {
		t.Fatalf("DropColumnFamily(%q) racing commits: %v", name, dropErr)
	}
	// Commits that landed did so before the drop's entry or, admitted before it,
	// after: either way their writes to the dropped generation are gone with it. The
	// log says which, and the model follows it.
	landed := make(map[int]uint64)
	for i, err := range errs {
		switch {
		case err == nil:
			landed[i] = 0
		case !errors.Is(err, pipeline.ErrColumnFamilyDropped):
			t.Fatalf("commit %d racing the drop of %q: %v, want nil or ErrColumnFamilyDropped", i, name, err)
		}
	}
	m.model.raceDrop(name, writes, landed, m.positionsOf(t, landed, writes))
	m.stale[name] = cf
}

// positionsOf finds in the log the position of each landed commit, by its default-family
// key, so the model can order the commits and the drop as the log does.
func (m *machine) positionsOf(t *rapid.T, landed map[int]uint64, writes [][]write) map[int]uint64 {
	out := make(map[int]uint64, len(landed))
	from := m.model.pos + 1
	es, err := m.db.ReadLog(from, 64)
	if err != nil {
		t.Fatalf("ReadLog(%d): %v", from, err)
	}
	for _, e := range es {
		for i := range landed {
			for _, w := range e.Writes {
				if w.Family == "default" && string(w.Key) == writes[i][1].key {
					out[i] = e.Position
				}
			}
		}
	}
	for i := range landed {
		if out[i] == 0 {
			t.Fatalf("landed commit %d is not in the log after %d", i, from-1)
		}
	}
	return out
}

// checkpoint: a copy whose log is 1..covered, covered being every position so far.
func (m *machine) checkpoint(t *rapid.T) {
	dir := filepath.Join(m.dir+"-cp", strconv.Itoa(len(m.cps)))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	covered, err := m.db.Checkpoint(dir)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if covered != m.model.pos {
		t.Fatalf("Checkpoint covers %d, want %d (every position so far)", covered, m.model.pos)
	}
	m.cps = append(m.cps, checkpoint{dir: dir, covered: covered, truncated: m.model.truncated})
	m.model.checkpointed = covered
}

// truncate: below a checkpointed position it succeeds; above, ErrNotCheckpointed.
func (m *machine) truncate(t *rapid.T) {
	before := uint64(rapid.IntRange(1, int(m.model.pos)+2).Draw(t, "before"))
	err := m.db.TruncateLog(before)
	if before-1 > m.model.checkpointed {
		expectIs(t, fmt.Sprintf("TruncateLog(%d) past the checkpoint %d", before, m.model.checkpointed), err, pipeline.ErrNotCheckpointed)
		return
	}
	if err != nil {
		t.Fatalf("TruncateLog(%d): %v", before, err)
	}
	m.model.truncated = max(m.model.truncated, before)
}

// replayCheckpoint: a checkpoint brought up to date with the rest of the log equals the
// database, families and generations included, or the log no longer holds what it
// needs (ErrLogTruncated).
func (m *machine) replayCheckpoint(t *rapid.T) {
	if len(m.cps) == 0 {
		t.Skip("no checkpoint")
	}
	cp := m.cps[rapid.IntRange(0, len(m.cps)-1).Draw(t, "checkpoint")]
	db, err := pipeline.Open(cp.dir, modelConfig())
	if err != nil {
		t.Fatalf("Open checkpoint: %v", err)
	}
	defer db.Close()
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("eventstore.New on the checkpoint: %v", err)
	}
	from := db.LastPosition() + 1
	var tail []pipeline.LogEntry
	for {
		es, err := m.db.ReadLog(from, 256)
		if from < m.model.truncated {
			expectIs(t, "ReadLog below the truncation", err, pipeline.ErrLogTruncated)
			return
		}
		if err != nil {
			t.Fatalf("ReadLog(%d): %v", from, err)
		}
		if len(es) == 0 {
			break
		}
		tail = append(tail, es...)
		from = es[len(es)-1].Position + 1
	}
	if err := db.Replay(context.Background(), tail); err != nil {
		t.Fatalf("Replay onto checkpoint %s: %v", cp.dir, err)
	}
	m.model.compare(t, "checkpoint + replay", es, cp.truncated)
}

// rebuild: a database rebuilt from the whole log equals this one.
func (m *machine) rebuild(t *rapid.T) {
	m.step++
	dir := fmt.Sprintf("%s-rebuild-%d", m.dir, m.step)
	db, err := m.db.Rebuild(context.Background(), dir, pipeline.Config{})
	if m.model.truncated > 1 {
		expectIs(t, "Rebuild after truncation", err, pipeline.ErrLogTruncated)
		return
	}
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	defer os.RemoveAll(dir)
	defer db.Close()
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("eventstore.New on the rebuilt database: %v", err)
	}
	m.model.compare(t, "rebuild", es, 0)
}

// reopen: Close returns within the deadline; the reopened database equals the model.
func (m *machine) reopen(t *rapid.T) {
	if err := m.closeDB(t); err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.open(t)
	clear(m.stale) // handles die with the database
}

// closeRacingWrites: Close races commits, a create and a drop. Close returns within the
// deadline; each call either took effect or failed with ErrClosed (Close itself may
// report a drop left pending, which the next Open completes).
func (m *machine) closeRacingWrites(t *rapid.T) {
	m.step++
	n := rapid.IntRange(1, 4).Draw(t, "commits")
	create := rapid.SampledFrom(familyNames).Draw(t, "create")
	drop := rapid.SampledFrom(familyNames).Draw(t, "drop")
	if create == drop {
		t.Skip("create and drop of one name race each other, not Close")
	}
	errs := make([]error, n+2)
	db, step := m.db, m.step // closeDB clears m.db
	var wg sync.WaitGroup
	wg.Add(n + 2)
	for i := range n {
		go func() {
			defer wg.Done()
			tx := db.Begin()
			if err := tx.Put(db.Default(), fmt.Appendf(nil, "close%d-%d", step, i), []byte("x")); err != nil {
				errs[i] = err
				return
			}
			errs[i] = tx.Commit(context.Background())
		}()
	}
	go func() {
		defer wg.Done()
		_, errs[n] = db.CreateColumnFamily(create)
	}()
	go func() {
		defer wg.Done()
		errs[n+1] = db.DropColumnFamily(drop)
	}()
	cerr := m.closeDB(t)
	waitFor(t, &wg, "calls racing Close")
	if cerr != nil && !errors.Is(cerr, pipeline.ErrDropPending) {
		t.Fatalf("Close racing writes: %v", cerr)
	}
	m.open(t)
	clear(m.stale)
	// Each call that returned nil took one position, in an order the log tells: commits
	// only change contents, the family changes are learnt where the log has them.
	landed := 0
	for i := range n {
		switch err := errs[i]; {
		case err == nil:
			landed++
			m.model.apply([]write{{family: "default", key: fmt.Sprintf("close%d-%d", m.step, i), value: "x"}})
		case !errors.Is(err, pipeline.ErrClosed):
			t.Fatalf("commit racing Close: %v, want nil or ErrClosed", err)
		}
	}
	created, dropped := false, false
	switch err := errs[n]; {
	case err == nil:
		if m.model.live(create) {
			t.Fatalf("CreateColumnFamily(%q) of a live name succeeded", create)
		}
		created = true
	case errors.Is(err, pipeline.ErrClosed), m.model.live(create) && errors.Is(err, pipeline.ErrColumnFamilyExists):
	default:
		t.Fatalf("CreateColumnFamily(%q) racing Close: %v", create, err)
	}
	switch err := errs[n+1]; {
	case err == nil:
		dropped = true
	case errors.Is(err, pipeline.ErrClosed), !m.model.live(drop) && errors.Is(err, pipeline.ErrColumnFamilyNotFound):
	default:
		t.Fatalf("DropColumnFamily(%q) racing Close: %v", drop, err)
	}
	first := m.model.pos + 1
	want := landed
	if created {
		want++
	}
	if dropped {
		want++
	}
	if got := int(m.db.LastPosition() - m.model.pos); got != want {
		t.Fatalf("%d entries after Close raced %d successful calls", got, want)
	}
	for p := first; p <= m.db.LastPosition(); p++ {
		e, err := m.db.Entry(p)
		if err != nil {
			t.Fatalf("Entry(%d): %v", p, err)
		}
		switch {
		case len(e.Families) == 0:
		case created && !e.Families[0].Dropped:
			m.model.createdAt(create, m.createdGen(t, e, create), p)
			created = false
		case dropped && e.Families[0].Dropped && e.Families[0].Family == drop:
			m.model.droppedAt(drop, p)
			dropped = false
		default:
			t.Fatalf("entry %d records %+v, which no call made", p, e.Families)
		}
	}
	if created || dropped {
		t.Fatalf("a family change that returned nil is not in the log (create %v, drop %v)", created, dropped)
	}
	m.model.pos = m.db.LastPosition()
}

// check runs after every action: the database agrees with the model.
func (m *machine) check(t *rapid.T) {
	m.model.compare(t, "database", m.es, m.model.truncated)
	m.sub.caughtUp(t, m.model.pos)
}

func expectIs(t *rapid.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want %v", what, err, target)
	}
}

func waitFor(t *rapid.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatalf("%s did not return within %v", what, deadline)
	}
}
