package badinput

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// env holds the fixtures every case may use. Cases must not break db, cf, st or sf:
// after each case both databases must still commit.
type env struct {
	dir string

	db       *pipeline.DB           // the database that must keep committing
	es       *eventstore.Store      // db's event store
	cf       *pipeline.ColumnFamily // a live family of db
	other    *pipeline.DB           // another open database
	foreign  *pipeline.ColumnFamily // a family of other
	dropped  *pipeline.ColumnFamily // a family of db, dropped
	closed   *pipeline.DB           // a closed database
	closedES *eventstore.Store      // closed's event store, made before Close
	closeCF  *pipeline.ColumnFamily // a family of closed, taken before Close

	st        *storage.DB     // a storage database that must keep writing
	sf        *storage.Family // a live family of st
	stOther   *storage.DB     // another storage database
	sForeign  *storage.Family // a family of stOther
	sRetired  *storage.Family // a family of st, dropped
	stClosed  *storage.DB     // a closed storage database
	sClosedCF *storage.Family // a family of stClosed, taken before Close
	otherSnap *storage.Snapshot
	released  *storage.Snapshot

	cancelled context.Context
	hugeKey   []byte // MaxKeySize+1
	hugeValue []byte // MaxValueSize+1, nil under -short
	hugeData  []byte // MaxEventDataLen+1
	seq       int
}

// unique returns a fresh name with the given prefix.
func (e *env) unique(prefix string) string {
	e.seq++
	return fmt.Sprintf("%s-%d", prefix, e.seq)
}

// path returns a fresh path under the test's folder.
func (e *env) path(name string) string { return filepath.Join(e.dir, e.unique(name)) }

// committedTxn returns a transaction that was committed.
func (e *env) committedTxn() *pipeline.Txn {
	tx := e.db.Begin()
	if err := tx.Put(e.cf, []byte("used"), []byte("up")); err != nil {
		panic(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		panic(err)
	}
	return tx
}

// discardedTxn returns a transaction that was discarded.
func (e *env) discardedTxn() *pipeline.Txn {
	tx := e.db.Begin()
	tx.Discard()
	return tx
}

// txn runs fn in a fresh transaction of db and discards it.
func (e *env) txn(fn func(tx *pipeline.Txn) error) error {
	tx := e.db.Begin()
	defer tx.Discard()
	return fn(tx)
}

// want checks a case's error; it returns what is wrong with it, or "".
type want func(err error) string

func message(err error, names []string) string {
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			return fmt.Sprintf("message %q does not name %q", err, n)
		}
	}
	return ""
}

// argErr wants a *pipeline.ArgumentError for op and arg, matching ErrInvalidArgument,
// whose message names op and arg (and names, if given).
func argErr(op, arg string, names ...string) want {
	return func(err error) string {
		var ae *pipeline.ArgumentError
		if !errors.As(err, &ae) {
			return fmt.Sprintf("got %T %v, want *pipeline.ArgumentError", err, err)
		}
		if ae.Op != op || ae.Arg != arg {
			return fmt.Sprintf("ArgumentError{Op: %q, Arg: %q}, want {%q, %q}: %v", ae.Op, ae.Arg, op, arg, err)
		}
		if !errors.Is(err, pipeline.ErrInvalidArgument) {
			return "does not match ErrInvalidArgument"
		}
		return message(err, append([]string{op, arg}, names...))
	}
}

// cfgErr wants a *pipeline.ConfigError for field, matching ErrInvalidConfig, whose
// message names the field and says what was expected. storage refuses its options and
// arguments with the same type (storage.ConfigError is an alias of it), so this checks
// the errors of both packages.
func cfgErr(field string) want {
	return func(err error) string {
		var ce *pipeline.ConfigError
		if !errors.As(err, &ce) {
			return fmt.Sprintf("got %T %v, want *pipeline.ConfigError", err, err)
		}
		if ce.Field != field {
			return fmt.Sprintf("ConfigError.Field = %q, want %q: %v", ce.Field, field, err)
		}
		if !errors.Is(err, pipeline.ErrInvalidConfig) || !errors.Is(err, storage.ErrInvalidConfig) {
			return "does not match ErrInvalidConfig"
		}
		return message(err, []string{field, "expected " + ce.Expected})
	}
}

// droppedErr wants a *pipeline.DroppedError naming family.
func droppedErr(family string) want {
	return func(err error) string {
		var de *pipeline.DroppedError
		if !errors.As(err, &de) {
			return fmt.Sprintf("got %T %v, want *pipeline.DroppedError", err, err)
		}
		if de.Family != family || !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
			return fmt.Sprintf("DroppedError{%q}, want {%q} matching ErrColumnFamilyDropped", de.Family, family)
		}
		return message(err, []string{family})
	}
}

// limitErr wants a *storage.LimitError for what ("key" or "value"), matching ErrTooLarge.
func limitErr(what string) want {
	return func(err error) string {
		var le *storage.LimitError
		if !errors.As(err, &le) {
			return fmt.Sprintf("got %T %v, want *storage.LimitError", err, err)
		}
		if le.What != what || !errors.Is(err, storage.ErrTooLarge) {
			return fmt.Sprintf("LimitError.What = %q, want %q matching ErrTooLarge", le.What, what)
		}
		return message(err, []string{what, "limit"})
	}
}

// is wants an error matching the documented sentinel target whose message names names.
func is(target error, names ...string) want {
	return func(err error) string {
		if !errors.Is(err, target) {
			return fmt.Sprintf("got %T %v, want an error matching %q", err, err, target)
		}
		return message(err, names)
	}
}

// both wants every check to pass.
func both(ws ...want) want {
	return func(err error) string {
		for _, w := range ws {
			if p := w(err); p != "" {
				return p
			}
		}
		return ""
	}
}

// noError wants success: for boundary values that must be accepted and calls
// documented to do nothing on odd input.
func noError(err error) string {
	if err != nil {
		return fmt.Sprintf("got %v, want success", err)
	}
	return ""
}

type badCase struct {
	name string
	call func(e *env) error
	want want
	huge bool // needs the 1 GiB+1 buffer: skipped under -short
}

func TestBadInput(t *testing.T) {
	e := setup(t)
	cases := pipelineCases()
	cases = append(cases, storageCases()...)
	seen := make(map[string]bool)
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			if c.huge && e.hugeValue == nil {
				t.Skip("-short: skipping a 1 GiB+1 value case (it needs a 1 GiB buffer)")
			}
			err, panicked := call(e, c.call)
			if panicked != "" {
				t.Fatalf("panicked: %s", panicked)
			}
			if p := c.want(err); p != "" {
				t.Errorf("%s", p)
			}
			stillCommits(t, e)
		})
	}
	t.Logf("bad input: %d cases", len(cases))
}

// call runs a case, turning a panic into a report.
func call(e *env, fn func(*env) error) (err error, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprintf("%v\n%s", r, debug.Stack())
		}
	}()
	return fn(e), ""
}

// stillCommits fails the test unless both databases still take a write.
func stillCommits(t *testing.T, e *env) {
	t.Helper()
	before := e.db.LastPosition()
	tx := e.db.Begin()
	if err := tx.Put(e.cf, []byte("alive"), []byte(t.Name())); err != nil {
		t.Fatalf("database no longer takes a write: %v", err)
	}
	pos, err := tx.CommitPosition(context.Background())
	if err != nil || pos != before+1 {
		t.Fatalf("database no longer commits: position %d, %v (last was %d)", pos, err, before)
	}
	b := storage.NewBatch()
	if err := b.Put(e.sf, []byte("alive"), []byte(t.Name())); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Write(b); err != nil {
		t.Fatalf("storage database no longer writes: %v", err)
	}
	if v, err := e.st.Get(e.sf, []byte("alive"), nil); err != nil || string(v) != t.Name() {
		t.Fatalf("storage database: read back %q, %v", v, err)
	}
}

func setup(t *testing.T) *env {
	t.Helper()
	e := &env{dir: t.TempDir()}
	open := func(name string) (*pipeline.DB, *eventstore.Store) {
		db, err := pipeline.Open(filepath.Join(e.dir, name), pipeline.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		es, err := eventstore.New(db)
		if err != nil {
			t.Fatal(err)
		}
		return db, es
	}
	create := func(db *pipeline.DB, name string) *pipeline.ColumnFamily {
		cf, err := db.CreateColumnFamily(name)
		if err != nil {
			t.Fatal(err)
		}
		return cf
	}
	e.db, e.es = open("db")
	e.cf = create(e.db, "live")
	e.other, _ = open("other")
	e.foreign = create(e.other, "foreign")
	e.dropped = create(e.db, "gone")
	if err := e.db.DropColumnFamily("gone"); err != nil {
		t.Fatal(err)
	}
	e.closed, e.closedES = open("closed")
	e.closeCF = create(e.closed, "shut")
	if err := e.closed.Update(context.Background(), func(tx *pipeline.Txn) error {
		return tx.Put(e.closeCF, []byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.closed.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // a few log entries and stream events to read
		if _, err := e.es.Append(context.Background(), "s", eventstore.Any, pipeline.Event{Type: "t", ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}

	sopen := func(name string) *storage.DB {
		db, err := storage.Open(filepath.Join(e.dir, name), storage.Options{Families: map[string]storage.FamilyOptions{"sf": {}, "retired": {}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	family := func(db *storage.DB, name string) *storage.Family {
		f, err := db.Family(name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	e.st = sopen("st")
	e.sf = family(e.st, "sf")
	e.sRetired = family(e.st, "retired")
	if err := e.st.DropFamily("retired"); err != nil {
		t.Fatal(err)
	}
	e.stOther = sopen("st-other")
	e.sForeign = family(e.stOther, "sf")
	var err error
	if e.otherSnap, err = e.stOther.NewSnapshot(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.otherSnap.Release)
	if e.released, err = e.st.NewSnapshot(); err != nil {
		t.Fatal(err)
	}
	e.released.Release()
	e.stClosed = sopen("st-closed")
	e.sClosedCF = family(e.stClosed, "sf")
	if err := e.stClosed.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.cancelled = ctx
	e.hugeKey = make([]byte, storage.MaxKeySize+1)
	e.hugeData = make([]byte, pipeline.MaxEventDataLen+1)
	if !testing.Short() {
		e.hugeValue = make([]byte, storage.MaxValueSize+1) // untouched pages: cheap
	}
	return e
}
