package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/internal/storagefaults"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
)

// dropGate parks one chosen commit right after admission, through testhooks.Hooks.AfterAdmit:
// arm it, start the commit, wait on parked. The parked commit holds its claims on the
// families it writes (so their physical drop waits for it) until the gate is opened.
// Only the first commit admitted while the gate is armed parks; every other commit
// passes the hook untouched.
type dropGate struct {
	armed   atomic.Bool
	parked  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *dropGate) afterAdmit() {
	if g.armed.CompareAndSwap(true, false) {
		g.parked <- struct{}{}
		<-g.release
	}
}

// open lets the parked commit (and any later one) go; it is idempotent.
func (g *dropGate) open() { g.once.Do(func() { close(g.release) }) }

// openDropDB opens a database whose AfterAdmit hook is a fresh dropGate. The gate is
// opened at cleanup before the database closes, so a failing test never leaves a
// commit parked.
func openDropDB(t testing.TB, cfg pipeline.Config) (*pipeline.DB, string, *dropGate) {
	t.Helper()
	g := &dropGate{parked: make(chan struct{}, 1), release: make(chan struct{})}
	cfg = testhooks.With(cfg, &testhooks.Hooks{AfterAdmit: g.afterAdmit})
	db, dir := openDB(t, cfg)
	t.Cleanup(g.open)
	return db, dir, g
}

// park buffers key=value in cf, commits it with mode on a new goroutine and returns
// once that commit is parked after admission. The channel yields its outcome.
func (g *dropGate) park(t testing.TB, db *pipeline.DB, cf *pipeline.ColumnFamily, mode commitMode, k, v string) <-chan error {
	t.Helper()
	tx := db.Begin()
	if err := tx.Put(cf, []byte(k), []byte(v)); err != nil {
		t.Fatalf("Put(%q) of the commit to park: %v", k, err)
	}
	g.armed.Store(true)
	res := make(chan error, 1)
	go func() { res <- mode.commit(tx) }()
	recv(t, g.parked, "the commit to park after admission")
	return res
}

// dropWithin drops name and fails the test if DropColumnFamily does not return by the
// deadline (it must never wait for admitted commits).
func dropWithin(t testing.TB, db *pipeline.DB, name string) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- db.DropColumnFamily(name) }()
	return recv(t, ch, fmt.Sprintf("DropColumnFamily(%q) to return", name))
}

func dropCreate(t testing.TB, db *pipeline.DB, name string) *pipeline.ColumnFamily {
	t.Helper()
	cf, err := db.CreateColumnFamily(name)
	if err != nil {
		t.Fatalf("CreateColumnFamily(%q): %v", name, err)
	}
	return cf
}

func dropStats(t testing.TB, db *pipeline.DB) storage.Stats {
	t.Helper()
	s, err := db.StorageStats()
	if err != nil {
		t.Fatalf("StorageStats: %v", err)
	}
	return s
}

// dropCheckCounts checks the drop counters of StorageStats.
func dropCheckCounts(t testing.TB, db *pipeline.DB, pending, completed int64) storage.Stats {
	t.Helper()
	s := dropStats(t, db)
	if s.PendingDrops != pending || s.CompletedDrops != completed {
		t.Fatalf("StorageStats: PendingDrops=%d CompletedDrops=%d (FailedDrops=%d, LastDropError=%q), want %d and %d",
			s.PendingDrops, s.CompletedDrops, s.FailedDrops, s.LastDropError, pending, completed)
	}
	return s
}

func dropFamilies(t testing.TB, db *pipeline.DB) []string {
	t.Helper()
	names, err := db.ColumnFamilies()
	if err != nil {
		t.Fatalf("ColumnFamilies: %v", err)
	}
	return names
}

// dropCheckGone checks that name is no live family.
func dropCheckGone(t testing.TB, db *pipeline.DB, name string) {
	t.Helper()
	if _, err := db.ColumnFamily(name); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Fatalf("ColumnFamily(%q) after the drop: %v, want ErrColumnFamilyNotFound", name, err)
	}
	if names := dropFamilies(t, db); slices.Contains(names, name) {
		t.Fatalf("ColumnFamilies() = %q still lists %q", names, name)
	}
}

// dropCheckDense checks that ReadLog from 1 returns exactly LastPosition entries,
// positions 1, 2, ...
func dropCheckDense(t testing.TB, db *pipeline.DB) []pipeline.LogEntry {
	t.Helper()
	last := db.LastPosition()
	if last == 0 {
		return nil
	}
	es, err := db.ReadLog(1, int(last))
	if err != nil {
		t.Fatalf("ReadLog(1, %d): %v", last, err)
	}
	if uint64(len(es)) != last {
		t.Fatalf("ReadLog(1, %d) returned %d entries, want %d", last, len(es), last)
	}
	for i, e := range es {
		if e.Position != uint64(i+1) {
			t.Fatalf("log entry %d has position %d", i, e.Position)
		}
	}
	return es
}

// dropCheckFreed checks that freed dropped families' memory has been given back, none
// is held, and a read through victim's old handle is refused with a *DroppedError.
func dropCheckFreed(t testing.TB, db *pipeline.DB, victim *pipeline.ColumnFamily, freed int64) {
	t.Helper()
	if s := dropStats(t, db); s.HeldDropped != 0 || s.FreedDropped != freed {
		t.Fatalf("StorageStats: HeldDropped=%d FreedDropped=%d, want 0 and %d", s.HeldDropped, s.FreedDropped, freed)
	}
	tx := db.Begin()
	defer tx.Discard()
	_, err := tx.Get(victim, []byte("before"))
	dropCheckDropped(t, err, victim.Name())
}

// dropCheckDropped checks that err is the whole-commit refusal for family.
func dropCheckDropped(t testing.TB, err error, family string) {
	t.Helper()
	if !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Fatalf("error %v, want ErrColumnFamilyDropped", err)
	}
	var de *pipeline.DroppedError
	if !errors.As(err, &de) || de.Family != family {
		t.Fatalf("error %v (%T), want a *DroppedError naming %q", err, err, family)
	}
}

// TestDropWhileCommitParked: a drop does not wait for a commit admitted before it; the
// name disappears at once, the commit then completes into the old generation, and its
// release runs the physical drop. The re-created name is a new, empty family.
func TestDropWhileCommitParked(t *testing.T) {
	for _, pol := range policies {
		for _, mode := range commitModes {
			t.Run(pol+"/"+string(mode), func(t *testing.T) {
				db, _, g := openDropDB(t, pipeline.Config{Validation: pol})
				victim := dropCreate(t, db, "victim")
				other := dropCreate(t, db, "other")
				put(t, db, victim, "before", "b")
				put(t, db, other, "o1", "1")

				res := g.park(t, db, victim, mode, "parked", "p")
				if err := dropWithin(t, db, "victim"); err != nil {
					t.Fatalf("DropColumnFamily: %v", err)
				}
				dropCheckGone(t, db, "victim")
				dropCheckCounts(t, db, 1, 0)
				if n := dropStats(t, db).FailedDrops; n != 0 {
					t.Fatalf("FailedDrops = %d", n)
				}

				// While the drop is pending: other families work, new writes to the old
				// generation are refused.
				put(t, db, other, "o2", "2")
				tx := db.Begin()
				dropCheckDropped(t, tx.Put(victim, []byte("late"), []byte("x")), "victim")
				tx.Discard()

				g.open()
				if err := recv(t, res, "the parked commit"); err != nil {
					t.Fatalf("parked commit after the drop: %v", err)
				}
				// Its release ran the physical drop before the commit returned, and no
				// transaction begun before the drop is open: the old generation is freed
				// and reads through the old handle are refused. (The log, checked below,
				// shows the parked write landed in generation 1.)
				dropCheckCounts(t, db, 0, 1)
				dropCheckFreed(t, db, victim, 1)

				again := dropCreate(t, db, "victim")
				mustAbsent(t, db, again, "before")
				mustAbsent(t, db, again, "parked")
				pos := put(t, db, again, "after", "a")
				if got := mustGet(t, db, again, "after"); got != "a" {
					t.Fatalf("re-created family: after = %q", got)
				}
				if got := mustGet(t, db, other, "o2"); got != "2" {
					t.Fatalf("other: o2 = %q", got)
				}
				for i := range 3 {
					put(t, db, db.Default(), fmt.Sprintf("d%d", i), "d")
				}
				if dropStats(t, db).WriteStopped {
					t.Fatal("RocksDB reports writes stopped")
				}
				es := dropCheckDense(t, db)
				// The parked write is logged in generation 1, the re-created one's in 2.
				gens := map[string]int{}
				for _, e := range es {
					for _, w := range e.Writes {
						if w.Family == "victim" {
							gens[string(w.Key)] = w.Generation
						}
					}
				}
				if gens["parked"] != 1 || gens["after"] != 2 {
					t.Fatalf("log generations of victim writes = %v, want parked:1 after:2", gens)
				}
				if e, err := db.Entry(pos); err != nil || len(e.Writes) != 1 || e.Writes[0].Generation != 2 {
					t.Fatalf("Entry(%d) = %+v, %v", pos, e, err)
				}
			})
		}
	}
}

// TestDropRefusesStagedCommit: a transaction that buffered writes to a family before
// its drop fails whole when it commits after it, and uses no log position; a
// transaction on another family is unaffected.
func TestDropRefusesStagedCommit(t *testing.T) {
	for _, pol := range policies {
		for _, mode := range commitModes {
			t.Run(pol+"/"+string(mode), func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol})
				victim := dropCreate(t, db, "victim")
				other := dropCreate(t, db, "other")
				put(t, db, victim, "a", "1")

				mixed := db.Begin() // writes both families: refused whole
				if err := mixed.Put(other, []byte("y"), []byte("mixed")); err != nil {
					t.Fatal(err)
				}
				if err := mixed.Put(victim, []byte("x"), []byte("mixed")); err != nil {
					t.Fatal(err)
				}
				only := db.Begin() // writes the dropped family only
				if err := only.Delete(victim, []byte("a")); err != nil {
					t.Fatal(err)
				}
				unrelated := db.Begin()
				if err := unrelated.Put(other, []byte("z"), []byte("fine")); err != nil {
					t.Fatal(err)
				}

				if err := db.DropColumnFamily("victim"); err != nil {
					t.Fatalf("DropColumnFamily: %v", err)
				}
				last := db.LastPosition() // the drop is an entry of its own
				dropCheckDropped(t, mode.commit(mixed), "victim")
				dropCheckDropped(t, mode.commit(only), "victim")
				if got := db.LastPosition(); got != last {
					t.Fatalf("LastPosition = %d after refused commits, want %d", got, last)
				}
				if es, err := db.ReadLog(last+1, 10); err != nil || len(es) != 0 {
					t.Fatalf("ReadLog(%d) after refused commits = %d entries, %v", last+1, len(es), err)
				}
				mustAbsent(t, db, other, "y")
				if got := mustGet(t, db, victim, "a"); got != "1" {
					t.Fatalf("old handle: a = %q, want the delete not applied", got)
				}

				if err := mode.commit(unrelated); err != nil {
					t.Fatalf("commit on another family: %v", err)
				}
				if got := db.LastPosition(); got != last+1 {
					t.Fatalf("LastPosition = %d, want %d", got, last+1)
				}
				if got := mustGet(t, db, other, "z"); got != "fine" {
					t.Fatalf("other: z = %q", got)
				}
				dropCheckCounts(t, db, 0, 1)
				dropCheckDense(t, db)
			})
		}
	}
}

// TestDropKeepsOpenReads: a transaction and an iterator opened on the old generation
// before the drop keep reading it after the drop (which here is physical at once);
// once they end, the generation's memory is freed and reads through the old handle
// fail with a *DroppedError.
func TestDropKeepsOpenReads(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	victim := dropCreate(t, db, "victim")
	tx := db.Begin()
	for i := range 10 {
		if err := tx.Put(victim, key("k%d", i), key("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}

	reader := db.Begin()
	defer reader.Discard()
	it, err := reader.NewIterator(victim, pipeline.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	it.First()
	if !it.Valid() || string(it.Key()) != "k0" {
		t.Fatalf("iterator before the drop at %q (valid %v)", it.Key(), it.Valid())
	}

	if err := db.DropColumnFamily("victim"); err != nil {
		t.Fatalf("DropColumnFamily: %v", err)
	}
	dropCheckCounts(t, db, 0, 1)

	var keys []string
	for ; it.Valid(); it.Next() {
		if want := fmt.Sprintf("v%s", strings.TrimPrefix(string(it.Key()), "k")); string(it.Value()) != want {
			t.Fatalf("iterator: %s = %q, want %q", it.Key(), it.Value(), want)
		}
		keys = append(keys, string(it.Key()))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterator after the drop: %v", err)
	}
	if len(keys) != 10 {
		t.Fatalf("iterator after the drop yielded %q, want 10 keys", keys)
	}
	v, err := reader.Get(victim, []byte("k3"))
	if err != nil || string(v) != "v3" {
		t.Fatalf("Get in a transaction begun before the drop: %q, %v", v, err)
	}
	if v, err := reader.GetUntracked(victim, []byte("k7")); err != nil || string(v) != "v7" {
		t.Fatalf("GetUntracked in a transaction begun before the drop: %q, %v", v, err)
	}
	it.Close()
	// The reader begun before the drop still keeps the old generation: a new
	// transaction reads it too.
	if got := mustGet(t, db, victim, "k9"); got != "v9" {
		t.Fatalf("old handle in a new transaction: k9 = %q", got)
	}
	if s := dropStats(t, db); s.HeldDropped != 1 {
		t.Fatalf("StorageStats.HeldDropped = %d while a transaction begun before the drop is open, want 1", s.HeldDropped)
	}
	// Once it ends, the generation is freed and reads through the old handle refused.
	reader.Discard()
	dropCheckFreed(t, db, victim, 1)
	late := db.Begin()
	defer late.Discard()
	it2, err := late.NewIterator(victim, pipeline.IterOptions{})
	if err == nil {
		it2.Close()
	}
	dropCheckDropped(t, err, "victim")
}

// TestDropProtectedFamilies: the default family and rockline's own families cannot be
// dropped; an unknown name is not found.
func TestDropProtectedFamilies(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	for _, name := range []string{"default", "rockline.log", "rockline.system", "rockline.streams", "rockline.meta", "rockline.other"} {
		err := db.DropColumnFamily(name)
		var ae *pipeline.ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, pipeline.ErrInvalidArgument) {
			t.Errorf("DropColumnFamily(%q) = %v (%T), want an *ArgumentError matching ErrInvalidArgument", name, err, err)
		}
	}
	if err := db.DropColumnFamily("nosuch"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Errorf("DropColumnFamily(nosuch) = %v, want ErrColumnFamilyNotFound", err)
	}
	dropCheckCounts(t, db, 0, 0)
	put(t, db, db.Default(), "k", "v")
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := es.Append(context.Background(), "s", eventstore.NoStream, pipeline.Event{Type: "t"}); err != nil {
		t.Fatalf("Append after refused drops: %v", err)
	}
	if evs, err := es.ReadStream(context.Background(), "s", 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("ReadStream = %d events, %v", len(evs), err)
	}
	dropCheckDense(t, db)
}

// TestDropSpan: the rockline.cf.drop span of a drop that waited for a parked commit
// ends only when that commit releases the family, and records the wait.
func TestDropSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	db, _, g := openDropDB(t, pipeline.Config{TracerProvider: tp})
	victim := dropCreate(t, db, "victim")
	res := g.park(t, db, victim, viaCommit, "parked", "p")

	if err := dropWithin(t, db, "victim"); err != nil {
		t.Fatalf("DropColumnFamily: %v", err)
	}
	dropSpans := func() []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == tracing.SpanDropCF {
				out = append(out, s)
			}
		}
		return out
	}
	if n := len(dropSpans()); n != 0 {
		t.Fatalf("%d %s spans ended before the parked commit was released", n, tracing.SpanDropCF)
	}
	g.open()
	if err := recv(t, res, "the parked commit"); err != nil {
		t.Fatalf("parked commit: %v", err)
	}
	spans := dropSpans()
	if len(spans) != 1 {
		t.Fatalf("%d %s spans ended, want 1", len(spans), tracing.SpanDropCF)
	}
	a := attrs(spans[0])
	if a[string(tracing.AttrFamily)] != "victim" {
		t.Errorf("%s = %v, want victim", tracing.AttrFamily, a[string(tracing.AttrFamily)])
	}
	if ms, ok := a[string(tracing.AttrDropWaitMillis)].(float64); !ok || ms <= 0 {
		t.Errorf("%s = %v, want > 0", tracing.AttrDropWaitMillis, a[string(tracing.AttrDropWaitMillis)])
	}
	if st := spans[0].Status(); st.Code == codes.Error {
		t.Errorf("span status %v", st)
	}
}

// TestDropCloseRace: Close while a parked commit holds a claim on a family whose drop
// is pending and other goroutines commit. Every commit succeeds or fails with
// ErrClosed, Close returns, and the reopened database no longer has the family.
// "race" releases the parked commit while Close runs; "closeFirst" releases it only
// after Close returned (Close does not wait for a commit parked before its lane), so
// the drop is certainly still pending at Close and must be completed by Open.
func TestDropCloseRace(t *testing.T) {
	for _, order := range []string{"race", "closeFirst"} {
		for _, mode := range commitModes {
			t.Run(order+"/"+string(mode), func(t *testing.T) {
				testDropCloseRace(t, mode, order == "closeFirst")
			})
		}
	}
}

func testDropCloseRace(t *testing.T, mode commitMode, closeFirst bool) {
	db, dir, g := openDropDB(t, pipeline.Config{})
	victim := dropCreate(t, db, "victim")
	other := dropCreate(t, db, "other")
	put(t, db, victim, "before", "b")
	res := g.park(t, db, victim, mode, "parked", "p")
	if err := dropWithin(t, db, "victim"); err != nil {
		t.Fatalf("DropColumnFamily: %v", err)
	}

	const workers = 4
	var (
		wg        sync.WaitGroup
		committed atomic.Int64
		started   = make(chan struct{}, workers)
		errs      = make(chan error, workers)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := commitModes[w%2]
			for i := 0; ; i++ {
				tx := db.Begin()
				err := tx.Put(other, key("w%d-%d", w, i), []byte("v"))
				if err == nil {
					err = m.commit(tx)
				}
				if i == 0 {
					started <- struct{}{}
				}
				switch {
				case err == nil:
					committed.Add(1)
				case errors.Is(err, pipeline.ErrClosed):
					return
				default:
					errs <- fmt.Errorf("worker %d commit %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	for range workers {
		recv(t, started, "the workers to start committing")
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	var cerr error
	if closeFirst {
		cerr = recv(t, closed, "Close with a commit parked")
	}
	g.open()
	perr := recv(t, res, "the parked commit")
	if perr != nil && !errors.Is(perr, pipeline.ErrClosed) {
		t.Fatalf("parked commit: %v, want nil or ErrClosed", perr)
	}
	if closeFirst {
		if !errors.Is(perr, pipeline.ErrClosed) {
			t.Fatalf("parked commit released after Close: %v, want ErrClosed", perr)
		}
	} else {
		cerr = recv(t, closed, "Close")
	}
	wait(t, wg.Wait, "the workers")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Close may run before the parked commit releases its claim: the drop is then
	// still pending at Close, and completed by the next Open.
	if cerr != nil && !strings.Contains(cerr.Error(), "pending at close") {
		t.Fatalf("Close: %v", cerr)
	}
	t.Logf("parked commit: %v; Close: %v; %d worker commits", perr, cerr, committed.Load())

	db2 := openAt(t, dir, pipeline.Config{})
	dropCheckGone(t, db2, "victim")
	if s := dropStats(t, db2); s.PendingDrops != 0 || s.FailedDrops != 0 {
		t.Fatalf("after reopen: PendingDrops=%d FailedDrops=%d (%s)", s.PendingDrops, s.FailedDrops, s.LastDropError)
	}
	other2, err := db2.ColumnFamily("other")
	if err != nil {
		t.Fatal(err)
	}
	put(t, db2, other2, "after", "a")
	again := dropCreate(t, db2, "victim")
	mustAbsent(t, db2, again, "before")
	mustAbsent(t, db2, again, "parked")
	dropCheckDense(t, db2)
}

// TestDropPhysicalFailure: a physical drop that fails leaves the family retired (the
// call succeeds, the name is gone) and pending, with the failure in StorageStats. It
// is retried by the next drop, at Close and at Open.
func TestDropPhysicalFailure(t *testing.T) {
	newFaults := func(failing *atomic.Bool, calls *atomic.Int64) *storagefaults.Faults {
		return &storagefaults.Faults{Drop: func(name string) error {
			calls.Add(1)
			if failing.Load() {
				return fmt.Errorf("injected drop failure for %s", name)
			}
			return nil
		}}
	}

	t.Run("completed at open", func(t *testing.T) {
		var failing atomic.Bool
		var calls atomic.Int64
		failing.Store(true)
		db, dir := openDB(t, testhooks.With(pipeline.Config{}, &testhooks.Hooks{StorageFaults: newFaults(&failing, &calls)}))
		victim := dropCreate(t, db, "victim")
		put(t, db, victim, "k", "v")
		if err := db.DropColumnFamily("victim"); err != nil {
			t.Fatalf("DropColumnFamily with a failing physical drop: %v, want nil", err)
		}
		s := dropStats(t, db)
		if s.FailedDrops < 1 || s.PendingDrops != 1 || s.CompletedDrops != 0 || !strings.Contains(s.LastDropError, "injected drop failure") {
			t.Fatalf("StorageStats: PendingDrops=%d FailedDrops=%d CompletedDrops=%d LastDropError=%q",
				s.PendingDrops, s.FailedDrops, s.CompletedDrops, s.LastDropError)
		}
		dropCheckGone(t, db, "victim")
		tx := db.Begin()
		dropCheckDropped(t, tx.Put(victim, []byte("k2"), []byte("v")), "victim")
		tx.Discard()
		if got := mustGet(t, db, victim, "k"); got != "v" {
			t.Fatalf("old handle: k = %q", got)
		}
		put(t, db, db.Default(), "d", "1")

		// Close retries the drop, which still fails: Close says so, and leaves it to Open.
		if err := db.Close(); err == nil || !strings.Contains(err.Error(), "pending at close") {
			t.Fatalf("Close with a failing drop = %v, want the pending drop reported", err)
		}
		if calls.Load() < 2 {
			t.Fatalf("physical drop attempted %d times, want a retry at Close", calls.Load())
		}

		db2 := openAt(t, dir, pipeline.Config{})
		dropCheckGone(t, db2, "victim")
		dropCheckCounts(t, db2, 0, 1)
		again := dropCreate(t, db2, "victim")
		mustAbsent(t, db2, again, "k")
		put(t, db2, again, "k", "new")
		if got := mustGet(t, db2, db2.Default(), "d"); got != "1" {
			t.Fatalf("default: d = %q", got)
		}
		dropCheckDense(t, db2)
	})

	t.Run("retried by the next drop", func(t *testing.T) {
		var failing atomic.Bool
		var calls atomic.Int64
		failing.Store(true)
		db, _ := openDB(t, testhooks.With(pipeline.Config{}, &testhooks.Hooks{StorageFaults: newFaults(&failing, &calls)}))
		dropCreate(t, db, "first")
		dropCreate(t, db, "second")
		if err := db.DropColumnFamily("first"); err != nil {
			t.Fatal(err)
		}
		if s := dropStats(t, db); s.FailedDrops < 1 || s.PendingDrops != 1 {
			t.Fatalf("after a failed drop: FailedDrops=%d PendingDrops=%d", s.FailedDrops, s.PendingDrops)
		}
		failing.Store(false)
		if err := db.DropColumnFamily("second"); err != nil {
			t.Fatal(err)
		}
		dropCheckCounts(t, db, 0, 2)
		if err := db.Close(); err != nil {
			t.Fatalf("Close after the retry: %v", err)
		}
	})
}

// TestDropRandomInterleavings: 8 goroutines create, drop and commit to 4 family names
// at random. Only documented errors occur; afterwards every drop has completed, the
// log is dense, and a reopen lists exactly the live families.
func TestDropRandomInterleavings(t *testing.T) {
	const (
		goroutines = 8
		rounds     = 200
	)
	names := []string{"f0", "f1", "f2", "f3"}
	db, dir := openDB(t, pipeline.Config{Lanes: 2})
	for _, n := range names[:2] {
		dropCreate(t, db, n)
	}
	documented := func(err error) bool {
		return err == nil ||
			errors.Is(err, pipeline.ErrColumnFamilyDropped) ||
			errors.Is(err, pipeline.ErrColumnFamilyNotFound) ||
			errors.Is(err, pipeline.ErrColumnFamilyExists) ||
			errors.Is(err, pipeline.ErrConflict)
	}
	var (
		wg      sync.WaitGroup
		drops   atomic.Int64
		commits atomic.Int64
		errs    = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g)+1, 0x5eed))
			handle := func() (*pipeline.ColumnFamily, error) {
				return db.ColumnFamily(names[rng.IntN(len(names))])
			}
			fail := func(round int, op string, err error) bool {
				if documented(err) {
					return false
				}
				errs <- fmt.Errorf("goroutine %d round %d %s: unexpected error %w", g, round, op, err)
				return true
			}
			for r := range rounds {
				switch op := rng.IntN(10); {
				case op < 2:
					_, err := db.CreateColumnFamily(names[rng.IntN(len(names))])
					if fail(r, "create", err) {
						return
					}
				case op < 4:
					err := db.DropColumnFamily(names[rng.IntN(len(names))])
					if err == nil {
						drops.Add(1)
					}
					if fail(r, "drop", err) {
						return
					}
				default:
					// Stage writes to one or two families (and sometimes read one key
					// first), maybe drop or create a name in between, then commit.
					tx := db.Begin()
					err := func() error {
						for range 1 + rng.IntN(2) {
							cf, err := handle()
							if err != nil {
								return err
							}
							k := key("k%d", rng.IntN(8))
							if rng.IntN(2) == 0 {
								if _, err := tx.Get(cf, k); err != nil && !errors.Is(err, pipeline.ErrNotFound) {
									return err
								}
							}
							if err := tx.Put(cf, k, key("g%d-r%d", g, r)); err != nil {
								return err
							}
						}
						if rng.IntN(4) == 0 {
							if err := db.DropColumnFamily(names[rng.IntN(len(names))]); err == nil {
								drops.Add(1)
							} else if !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
								return err
							}
						}
						var err error
						if rng.IntN(2) == 0 {
							err = tx.Commit(context.Background())
						} else {
							err = tx.CommitInline()
						}
						if err == nil {
							commits.Add(1)
						}
						return err
					}()
					tx.Discard()
					if fail(r, "commit", err) {
						return
					}
				}
			}
		}()
	}
	wait(t, wg.Wait, "the random workers")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d drops, %d commits, last position %d", drops.Load(), commits.Load(), db.LastPosition())
	if drops.Load() == 0 || commits.Load() == 0 {
		t.Fatalf("degenerate run: %d drops, %d commits", drops.Load(), commits.Load())
	}
	// No claim is left, so every drop has run physically.
	if s := dropCheckCounts(t, db, 0, drops.Load()); s.FailedDrops != 0 {
		t.Fatalf("FailedDrops = %d: %s", s.FailedDrops, s.LastDropError)
	}
	live := dropFamilies(t, db)
	for _, n := range live {
		cf, err := db.ColumnFamily(n)
		if err != nil {
			t.Fatal(err)
		}
		put(t, db, cf, "final", n)
	}
	put(t, db, db.Default(), "final", "default")
	if got := uint64(len(dropCheckDense(t, db))); got != db.LastPosition() {
		t.Fatalf("log has %d entries, LastPosition %d", got, db.LastPosition())
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db2 := openAt(t, dir, pipeline.Config{})
	if got := dropFamilies(t, db2); !slices.Equal(got, live) {
		t.Fatalf("families after reopen = %q, want %q", got, live)
	}
	for _, n := range live {
		cf, err := db2.ColumnFamily(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, db2, cf, "final"); got != n {
			t.Fatalf("%s: final = %q", n, got)
		}
	}
	dropCheckCounts(t, db2, 0, 0)
	put(t, db2, db2.Default(), "after", "reopen")
	dropCheckDense(t, db2)
}
