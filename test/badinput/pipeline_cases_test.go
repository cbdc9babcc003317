package badinput

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// pathErr wants an *fs.PathError naming path.
func pathErr(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return fmt.Sprintf("got %T %v, want an *fs.PathError", err, err)
	}
	return message(err, []string{pe.Path})
}

// wrongVersion wants a *eventstore.WrongExpectedVersionError for stream.
func wrongVersion(stream string) want {
	return func(err error) string {
		var we *eventstore.WrongExpectedVersionError
		if !errors.As(err, &we) || we.Stream != stream || !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			return fmt.Sprintf("got %T %v, want *eventstore.WrongExpectedVersionError for %q", err, err, stream)
		}
		return message(err, []string{stream, "expected", "actual"})
	}
}

// openBad opens a database in a fresh folder with cfg; the folder must not exist
// afterwards (a bad config creates nothing).
func openBad(e *env, cfg pipeline.Config) error {
	dir := e.path("bad-config")
	db, err := pipeline.Open(dir, cfg)
	if err == nil {
		db.Close()
		return nil
	}
	if _, serr := os.Stat(dir); serr == nil {
		return fmt.Errorf("Open with a bad config left %s behind: %w", dir, err)
	}
	return err
}

var events1 = []pipeline.Event{{Type: "t", ID: "x"}}

func put(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
	return tx.Put(cf, []byte("k"), []byte("v"))
}

func pipelineCases() []badCase {
	ctx := context.Background()
	var cs []badCase
	add := func(name string, w want, fn func(e *env) error) {
		cs = append(cs, badCase{name: name, call: fn, want: w})
	}
	huge := func(name string, w want, fn func(e *env) error) {
		cs = append(cs, badCase{name: name, call: fn, want: w, huge: true})
	}

	// Open and Config: every field, through Open (nothing is created) and Validate.
	type badConfig struct {
		field string
		cfg   pipeline.Config
	}
	for _, bc := range []badConfig{
		{"Lanes", pipeline.Config{Lanes: -1}},
		{"Lanes", pipeline.Config{Lanes: 65}},
		{"LaneQueueDepth", pipeline.Config{LaneQueueDepth: -1}},
		{"LaneQueueDepth", pipeline.Config{LaneQueueDepth: 1<<20 + 1}},
		{"Validation", pipeline.Config{Validation: "bogus"}},
		{"Validation", pipeline.Config{Validation: "Parallel"}},
		{"Buckets", pipeline.Config{Buckets: -1}},
		{"Buckets", pipeline.Config{Buckets: 15}},
		{"Buckets", pipeline.Config{Buckets: 1<<24 + 1}},
		{"MaxAttempts", pipeline.Config{MaxAttempts: -1}},
		{"MaxAttempts", pipeline.Config{MaxAttempts: 1001}},
		{"RetryBackoff", pipeline.Config{RetryBackoff: -1}},
		{"RetryBackoff", pipeline.Config{RetryBackoff: 1<<31 + 1}},
		{"FamilyDefaults.WriteBufferSize", pipeline.Config{FamilyDefaults: storage.FamilyOptions{WriteBufferSize: 1}}},
		{"FamilyDefaults.WriteBufferSize", pipeline.Config{FamilyDefaults: storage.FamilyOptions{WriteBufferSize: -1}}},
		{"FamilyDefaults.MaxWriteBufferNumber", pipeline.Config{FamilyDefaults: storage.FamilyOptions{MaxWriteBufferNumber: 1}}},
		{"FamilyDefaults.MaxWriteBufferNumber", pipeline.Config{FamilyDefaults: storage.FamilyOptions{MaxWriteBufferNumber: 65}}},
		{"family name", pipeline.Config{Families: map[string]storage.FamilyOptions{"": {}}}},
		{"family name", pipeline.Config{Families: map[string]storage.FamilyOptions{"a#b": {}}}},
		{"family name", pipeline.Config{Families: map[string]storage.FamilyOptions{strings.Repeat("f", 256): {}}}},
		{"Families[ok].WriteBufferSize", pipeline.Config{Families: map[string]storage.FamilyOptions{"ok": {WriteBufferSize: 5 << 30}}}},
		{"Families[ok].MaxWriteBufferNumber", pipeline.Config{Families: map[string]storage.FamilyOptions{"ok": {MaxWriteBufferNumber: 100}}}},
		{"Families[rockline.log]", pipeline.Config{Families: map[string]storage.FamilyOptions{"rockline.log": {}}}},
		{"Families[rockline.mine]", pipeline.Config{Families: map[string]storage.FamilyOptions{"rockline.mine": {}}}},
		{"BlockCacheSize", pipeline.Config{BlockCacheSize: -1}},
		{"BlockCacheSize", pipeline.Config{BlockCacheSize: 65 << 30}},
	} {
		add(fmt.Sprintf("Open/Config.%s=%s", bc.field, configValue(bc.cfg)), cfgErr(bc.field), func(e *env) error { return openBad(e, bc.cfg) })
		add(fmt.Sprintf("Config.Validate/%s=%s", bc.field, configValue(bc.cfg)), cfgErr(bc.field), func(e *env) error { return bc.cfg.Validate() })
	}
	add("Config.Validate/defaults", noError, func(e *env) error { return pipeline.DefaultConfig().Validate() })
	add("Open/empty dir", cfgErr("dir"), func(e *env) error { _, err := pipeline.Open("", pipeline.Config{}); return err })
	add("Open/dir is a file", pathErr, func(e *env) error {
		p := e.path("file")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
		db, err := pipeline.Open(p, pipeline.Config{})
		if err == nil {
			db.Close()
		}
		return err
	})

	// Column families.
	for _, name := range []string{"", strings.Repeat("f", 256), "a#b"} {
		add(fmt.Sprintf("CreateColumnFamily/name=%.20q", name), argErr("CreateColumnFamily", "name"), func(e *env) error {
			_, err := e.db.CreateColumnFamily(name)
			return err
		})
	}
	add("CreateColumnFamily/name with # says why", argErr("CreateColumnFamily", "name", "#"), func(e *env) error {
		_, err := e.db.CreateColumnFamily("a#b")
		return err
	})
	add("CreateColumnFamily/reserved", argErr("CreateColumnFamily", "name", "rockline.mine", "reserved"), func(e *env) error {
		_, err := e.db.CreateColumnFamily("rockline.mine")
		return err
	})
	for _, name := range []string{"", strings.Repeat("f", 256), "a#b", "rockline.log"} {
		add(fmt.Sprintf("EnsureColumnFamily/name=%.20q", name), argErr("EnsureColumnFamily", "name"), func(e *env) error {
			_, err := e.db.EnsureColumnFamily(name)
			return err
		})
	}
	add("CreateColumnFamily/exists", is(pipeline.ErrColumnFamilyExists, "live"), func(e *env) error {
		_, err := e.db.CreateColumnFamily("live")
		return err
	})
	for _, name := range []string{"nope", "", "rockline.log", "gone"} {
		add(fmt.Sprintf("ColumnFamily/%q", name), is(pipeline.ErrColumnFamilyNotFound, fmt.Sprintf("%q", name)), func(e *env) error {
			_, err := e.db.ColumnFamily(name)
			return err
		})
	}
	add("DropColumnFamily/default", argErr("DropColumnFamily", "name", "default"), func(e *env) error { return e.db.DropColumnFamily("default") })
	add("DropColumnFamily/reserved", argErr("DropColumnFamily", "name", "rockline.log"), func(e *env) error { return e.db.DropColumnFamily("rockline.log") })
	for _, name := range []string{"nope", "", "gone"} {
		add(fmt.Sprintf("DropColumnFamily/%q", name), is(pipeline.ErrColumnFamilyNotFound, fmt.Sprintf("%q", name)), func(e *env) error {
			return e.db.DropColumnFamily(name)
		})
	}

	// The log.
	for _, limit := range []int{0, -1, 1<<20 + 1} {
		add(fmt.Sprintf("ReadLog/limit=%d", limit), argErr("ReadLog", "limit", fmt.Sprint(limit)), func(e *env) error {
			_, err := e.db.ReadLog(1, limit)
			return err
		})
	}
	add("Entry/past the end", is(pipeline.ErrNotFound, "1152921504606846976"), func(e *env) error {
		_, err := e.db.Entry(1 << 60)
		return err
	})
	add("LogIterator/past the end", noError, func(e *env) error {
		it := e.db.LogIterator(1 << 60)
		if it.Next() {
			return errors.New("Next past the end returned true")
		}
		return it.Err()
	})
	add("TruncateLog/0", is(pipeline.ErrNotCheckpointed, "0"), func(e *env) error { return e.db.TruncateLog(0) })
	add("TruncateLog/past any checkpoint", is(pipeline.ErrNotCheckpointed, "1152921504606846976"), func(e *env) error { return e.db.TruncateLog(1 << 60) })
	add("Checkpoint/dir exists", cfgErr("checkpoint dir"), func(e *env) error {
		_, err := e.db.Checkpoint(e.dir)
		return err
	})
	add("Checkpoint/empty dir", cfgErr("checkpoint dir"), func(e *env) error {
		_, err := e.db.Checkpoint("")
		return err
	})

	// The event store.
	add("eventstore.New/nil db", argErr("eventstore.New", "db"), func(e *env) error { _, err := eventstore.New(nil); return err })
	add("Store.AppendTxn/nil transaction", argErr("Store.AppendTxn", "tx"), func(e *env) error {
		return e.es.AppendTxn(nil, "s", eventstore.Any, events1...)
	})
	add("Store.AppendTxn/transaction of another database", both(argErr("Store.AppendTxn", "tx", "another database"), is(storage.ErrForeignFamily)), func(e *env) error {
		tx := e.other.Begin()
		defer tx.Discard()
		return e.es.AppendTxn(tx, "s", eventstore.Any, events1...)
	})
	badStreams := map[string]string{
		"empty":         "",
		"invalid UTF-8": "\xff\xfe",
		"NUL":           "a\x00b",
		"too long":      strings.Repeat("s", eventstore.MaxStreamNameLen+1),
	}
	for what, s := range badStreams {
		add("Store.ReadStream/stream "+what, argErr("ReadStream", "stream"), func(e *env) error { _, err := e.es.ReadStream(ctx, s, 0, 1); return err })
		add("Store.ReadStreamBackward/stream "+what, argErr("ReadStreamBackward", "stream"), func(e *env) error {
			_, err := e.es.ReadStreamBackward(ctx, s, 0, 1)
			return err
		})
		add("Store.Append/stream "+what, argErr("Store.Append", "stream"), func(e *env) error { _, err := e.es.Append(ctx, s, eventstore.Any, events1...); return err })
		add("Store.AppendTxn/stream "+what, argErr("Store.AppendTxn", "stream"), func(e *env) error {
			return e.txn(func(tx *pipeline.Txn) error { return e.es.AppendTxn(tx, s, eventstore.Any, events1...) })
		})
	}
	for _, limit := range []int{0, -2, 1<<20 + 1} { // -1 is eventstore.ToEnd
		add(fmt.Sprintf("Store.ReadAll/limit=%d", limit), argErr("ReadAll", "limit", fmt.Sprint(limit)), func(e *env) error {
			_, err := e.es.ReadAll(ctx, eventstore.Start, limit, eventstore.Filter{})
			return err
		})
		add(fmt.Sprintf("Store.ReadAllBackward/limit=%d", limit), argErr("ReadAllBackward", "limit", fmt.Sprint(limit)), func(e *env) error {
			_, err := e.es.ReadAllBackward(ctx, eventstore.End, limit, eventstore.Filter{})
			return err
		})
		add(fmt.Sprintf("Store.ReadStream/limit=%d", limit), argErr("ReadStream", "limit", fmt.Sprint(limit)), func(e *env) error {
			_, err := e.es.ReadStream(ctx, "s", 0, limit)
			return err
		})
		add(fmt.Sprintf("Store.ReadStreamBackward/limit=%d", limit), argErr("ReadStreamBackward", "limit", fmt.Sprint(limit)), func(e *env) error {
			_, err := e.es.ReadStreamBackward(ctx, "s", 0, limit)
			return err
		})
	}
	add("Store.ReadStream/ToEnd", noError, func(e *env) error {
		_, err := e.es.ReadStream(ctx, "s", 0, eventstore.ToEnd)
		return err
	})
	add("Store.ReadStream/past the end", noError, func(e *env) error {
		evs, err := e.es.ReadStream(ctx, "s", 1<<60, 10)
		if err == nil && len(evs) != 0 {
			return fmt.Errorf("%d events past the end", len(evs))
		}
		return err
	})
	add("Store.Append/zero ExpectedRevision", argErr("Store.Append", "expected"), func(e *env) error {
		_, err := e.es.Append(ctx, "s", eventstore.ExpectedRevision{}, events1...)
		return err
	})
	add("Store.AppendTxn/zero ExpectedRevision", argErr("Store.AppendTxn", "expected"), func(e *env) error {
		return e.txn(func(tx *pipeline.Txn) error {
			return e.es.AppendTxn(tx, "s", eventstore.ExpectedRevision{}, events1...)
		})
	})
	add("Store.Append/no events", argErr("Store.Append", "events"), func(e *env) error { _, err := e.es.Append(ctx, "s", eventstore.Any); return err })
	add("Store.AppendTxn/no events", argErr("Store.AppendTxn", "events"), func(e *env) error {
		return e.txn(func(tx *pipeline.Txn) error { return e.es.AppendTxn(tx, "s", eventstore.Any) })
	})
	badEvents := []struct {
		what, arg string
		events    []pipeline.Event
	}{
		{"empty type", "events[0].Type", []pipeline.Event{{}}},
		{"type too long", "events[0].Type", []pipeline.Event{{Type: strings.Repeat("t", pipeline.MaxEventTypeLen+1)}}},
		{"type invalid UTF-8", "events[0].Type", []pipeline.Event{{Type: "\xff"}}},
		{"ID too long", "events[0].ID", []pipeline.Event{{Type: "t", ID: strings.Repeat("i", pipeline.MaxEventIDLen+1)}}},
		{"ID invalid UTF-8", "events[0].ID", []pipeline.Event{{Type: "t", ID: "\xc3\x28"}}},
		{"second event's type empty", "events[1].Type", []pipeline.Event{{Type: "t"}, {Type: ""}}},
	}
	for _, be := range badEvents {
		add("Store.Append/"+be.what, argErr("Store.Append", be.arg), func(e *env) error { _, err := e.es.Append(ctx, "s", eventstore.Any, be.events...); return err })
		add("Store.AppendTxn/"+be.what, argErr("Store.AppendTxn", be.arg), func(e *env) error {
			return e.txn(func(tx *pipeline.Txn) error { return e.es.AppendTxn(tx, "s", eventstore.Any, be.events...) })
		})
		add("Txn.AddEvents/"+be.what, argErr("Txn.AddEvents", be.arg), func(e *env) error {
			return e.txn(func(tx *pipeline.Txn) error { return tx.AddEvents(be.events...) })
		})
	}
	add("Store.Append/data past 64 MiB", argErr("Store.Append", "events[0].Data", "67108865"), func(e *env) error {
		_, err := e.es.Append(ctx, "s", eventstore.Any, pipeline.Event{Type: "t", Data: e.hugeData})
		return err
	})
	add("Txn.AddEvents/data past 64 MiB", argErr("Txn.AddEvents", "events[0].Data", "67108865"), func(e *env) error {
		return e.txn(func(tx *pipeline.Txn) error { return tx.AddEvents(pipeline.Event{Type: "t", Metadata: e.hugeData}) })
	})
	add("Txn.AddEvents/none", noError, func(e *env) error { return e.txn(func(tx *pipeline.Txn) error { return tx.AddEvents() }) })
	add("Store.Append/cancelled context", is(context.Canceled), func(e *env) error {
		_, err := e.es.Append(e.cancelled, "s", eventstore.Any, pipeline.Event{Type: "t"})
		return err
	})
	add("Store.Append/wrong revision", wrongVersion("s"), func(e *env) error {
		_, err := e.es.Append(ctx, "s", eventstore.Revision(1<<40), pipeline.Event{Type: "t"})
		return err
	})
	add("Store.Append/NoStream on an existing stream", wrongVersion("s"), func(e *env) error {
		_, err := e.es.Append(ctx, "s", eventstore.NoStream, pipeline.Event{Type: "t"})
		return err
	})
	add("Store.Append/StreamExists on a missing stream", wrongVersion("missing"), func(e *env) error {
		_, err := e.es.Append(ctx, "missing", eventstore.StreamExists, pipeline.Event{Type: "t"})
		return err
	})

	// Update, View, Subscribe.
	add("Update/nil fn", argErr("Update", "fn"), func(e *env) error { return e.db.Update(ctx, nil) })
	add("UpdatePosition/nil fn", argErr("Update", "fn"), func(e *env) error { _, err := e.db.UpdatePosition(ctx, nil); return err })
	add("View/nil fn", argErr("View", "fn"), func(e *env) error { return e.db.View(nil) })
	add("Update/cancelled context", is(context.Canceled), func(e *env) error {
		return e.db.Update(e.cancelled, func(tx *pipeline.Txn) error { return put(tx, e.cf) })
	})
	add("Subscribe/nil handler", argErr("Subscribe", "handler"), func(e *env) error { _, err := e.db.Subscribe(ctx, 0, nil); return err })
	add("Subscribe/cancelled context ends it", noError, func(e *env) error {
		s, err := e.db.Subscribe(e.cancelled, 0, func(pipeline.LogEntry) error { return nil })
		if err != nil {
			return err
		}
		return s.Wait() // documented: nil after its context was cancelled
	})

	// Transactions: families.
	nilFamilies := map[string]func(e *env) *pipeline.ColumnFamily{
		"nil":        func(*env) *pipeline.ColumnFamily { return nil },
		"zero value": func(*env) *pipeline.ColumnFamily { return &pipeline.ColumnFamily{} },
	}
	for what, fam := range nilFamilies {
		for _, op := range []string{"Txn.Put", "Txn.Delete", "Txn.Get", "Txn.GetUntracked", "Txn.NewIterator"} {
			add(op+"/"+what+" family", argErr(op, "column family", "nil"), func(e *env) error { return txnOp(e.db.Begin(), op, e.es, fam(e), []byte("k"), []byte("v")) })
		}
	}
	for _, op := range []string{"Txn.Put", "Txn.Delete", "Txn.Get", "Txn.GetUntracked", "Txn.NewIterator"} {
		add(op+"/family of another database", both(argErr(op, "column family", "foreign", "another database"), is(storage.ErrForeignFamily)), func(e *env) error {
			return txnOp(e.db.Begin(), op, e.es, e.foreign, []byte("k"), []byte("v"))
		})
		add(op+"/family of a closed database", both(argErr(op, "column family", "another database"), is(storage.ErrForeignFamily)), func(e *env) error {
			return txnOp(e.db.Begin(), op, e.es, e.closeCF, []byte("k"), []byte("v"))
		})
	}
	for _, op := range []string{"Txn.Put", "Txn.Delete"} {
		add(op+"/dropped family", droppedErr("gone"), func(e *env) error { return txnOp(e.db.Begin(), op, e.es, e.dropped, []byte("k"), []byte("v")) })
	}
	add("Txn.Get/dropped family, freed", droppedErr("gone"), func(e *env) error {
		return txnOp(e.db.Begin(), "Txn.Get", e.es, e.dropped, []byte("missing"), nil)
	})
	add("Commit/writes buffered before the drop", droppedErr("doomed"), func(e *env) error {
		cf, err := e.db.CreateColumnFamily("doomed")
		if err != nil {
			return err
		}
		tx := e.db.Begin()
		if err := put(tx, cf); err != nil {
			return err
		}
		if err := e.db.DropColumnFamily("doomed"); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})

	// Transactions: keys and values.
	for _, op := range []string{"Txn.Put", "Txn.Delete", "Txn.Get", "Txn.GetUntracked"} {
		add(op+"/nil key", argErr(op, "key", "empty"), func(e *env) error { return txnOp(e.db.Begin(), op, e.es, e.cf, nil, []byte("v")) })
		add(op+"/empty key", argErr(op, "key", "empty"), func(e *env) error { return txnOp(e.db.Begin(), op, e.es, e.cf, []byte{}, []byte("v")) })
		add(op+"/key past 64 KiB", both(argErr(op, "key", "65537", "65536"), is(storage.ErrTooLarge)), func(e *env) error {
			return txnOp(e.db.Begin(), op, e.es, e.cf, e.hugeKey, []byte("v"))
		})
	}
	huge("Txn.Put/value past 1 GiB", both(argErr("Txn.Put", "value", "1073741825", "1073741824"), is(storage.ErrTooLarge)), func(e *env) error {
		return txnOp(e.db.Begin(), "Txn.Put", e.es, e.cf, []byte("k"), e.hugeValue)
	})
	add("Txn.Put/key of exactly 64 KiB commits", noError, func(e *env) error {
		tx := e.db.Begin()
		if err := tx.Put(e.cf, e.hugeKey[:storage.MaxKeySize], []byte("v")); err != nil {
			tx.Discard()
			return err
		}
		return tx.Commit(ctx)
	})
	add("Txn.Put/nil value commits", noError, func(e *env) error {
		tx := e.db.Begin()
		if err := tx.Put(e.cf, []byte("nil-value"), nil); err != nil {
			tx.Discard()
			return err
		}
		return tx.Commit(ctx)
	})
	add("Txn.NewIterator/lower above upper is empty", noError, func(e *env) error {
		return e.txn(func(tx *pipeline.Txn) error {
			it, err := tx.NewIterator(e.cf, pipeline.IterOptions{Lower: []byte("z"), Upper: []byte("a")})
			if err != nil {
				return err
			}
			defer it.Close()
			if it.First(); it.Valid() {
				return errors.New("iterator with lower > upper found a key")
			}
			return it.Err()
		})
	})
	add("Iterator/used after its transaction committed", is(pipeline.ErrTxnDone), func(e *env) error {
		tx := e.db.Begin()
		it, err := tx.NewIterator(e.cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		it.First()
		return it.Err()
	})
	add("Iterator/used after Close", is(storage.ErrReleased), func(e *env) error {
		return e.txn(func(tx *pipeline.Txn) error {
			it, err := tx.NewIterator(e.cf, pipeline.IterOptions{})
			if err != nil {
				return err
			}
			it.Close()
			it.First()
			it.Next()
			it.Close()
			if it.Valid() || it.Key() != nil {
				return errors.New("closed iterator is valid")
			}
			return it.Err()
		})
	})

	// Transactions: used up, cancelled.
	used := map[string]func(e *env) *pipeline.Txn{
		"committed": (*env).committedTxn,
		"discarded": (*env).discardedTxn,
	}
	for what, txn := range used {
		for _, op := range txnOps {
			add(op+"/"+what+" transaction", is(pipeline.ErrTxnDone, "already committed or discarded"), func(e *env) error {
				return txnOp(txn(e), op, e.es, e.cf, []byte("k"), []byte("v"))
			})
		}
	}
	add("Txn.Discard/twice and after commit", noError, func(e *env) error {
		tx := e.committedTxn()
		tx.Discard()
		tx.Discard()
		if tx.Len() != 0 {
			return errors.New("Len of a done transaction is not 0")
		}
		return nil
	})
	for _, op := range []string{"Txn.Commit", "Txn.CommitPosition", "Txn.CommitInlineContext"} {
		add(op+"/cancelled context", is(context.Canceled), func(e *env) error {
			tx := e.db.Begin()
			if err := put(tx, e.cf); err != nil {
				return err
			}
			return commitOp(tx, op, e.cancelled)
		})
	}

	// A closed database: every call says so.
	for _, op := range txnOps {
		add(op+"/closed database", is(pipeline.ErrClosed, "closed"), func(e *env) error {
			return txnOp(e.closed.Begin(), op, e.closedES, e.closeCF, []byte("k"), []byte("v"))
		})
	}
	closedCalls := map[string]func(e *env) error{
		"Update": func(e *env) error {
			return e.closed.Update(ctx, func(tx *pipeline.Txn) error { return put(tx, e.closeCF) })
		},
		"UpdatePosition": func(e *env) error {
			_, err := e.closed.UpdatePosition(ctx, func(tx *pipeline.Txn) error { return put(tx, e.closeCF) })
			return err
		},
		"View": func(e *env) error {
			return e.closed.View(func(tx *pipeline.Txn) error { _, err := tx.Get(e.closeCF, []byte("k")); return err })
		},
		"CreateColumnFamily": func(e *env) error { _, err := e.closed.CreateColumnFamily("x"); return err },
		"EnsureColumnFamily": func(e *env) error { _, err := e.closed.EnsureColumnFamily("x"); return err },
		"ColumnFamily":       func(e *env) error { _, err := e.closed.ColumnFamily("shut"); return err },
		"ColumnFamilies":     func(e *env) error { _, err := e.closed.ColumnFamilies(); return err },
		"DropColumnFamily":   func(e *env) error { return e.closed.DropColumnFamily("shut") },
		"Default": func(e *env) error {
			return txnOp(e.closed.Begin(), "Txn.Put", e.closedES, e.closed.Default(), []byte("k"), []byte("v"))
		},
		"Default in an open database's transaction": func(e *env) error {
			return txnOp(e.db.Begin(), "Txn.Put", e.es, e.closed.Default(), []byte("k"), []byte("v"))
		},
		"ReadLog":              func(e *env) error { _, err := e.closed.ReadLog(1, 1); return err },
		"ReadLog past the end": func(e *env) error { _, err := e.closed.ReadLog(100, 1); return err },
		"Entry":                func(e *env) error { _, err := e.closed.Entry(1); return err },
		"LogIterator":          func(e *env) error { it := e.closed.LogIterator(1); it.Next(); return it.Err() },
		// The event store: New refuses a closed database; a Store made before Close
		// fails every call.
		"eventstore.New":           func(e *env) error { _, err := eventstore.New(e.closed); return err },
		"Store.ReadStream":         func(e *env) error { _, err := e.closedES.ReadStream(ctx, "s", 0, 1); return err },
		"Store.ReadStreamBackward": func(e *env) error { _, err := e.closedES.ReadStreamBackward(ctx, "s", 0, 1); return err },
		"Store.Append":             func(e *env) error { _, err := e.closedES.Append(ctx, "s", eventstore.Any, events1...); return err },
		"Subscribe": func(e *env) error {
			_, err := e.closed.Subscribe(ctx, 0, func(pipeline.LogEntry) error { return nil })
			return err
		},
		"StorageStats": func(e *env) error { _, err := e.closed.StorageStats(); return err },
		"Checkpoint":   func(e *env) error { _, err := e.closed.Checkpoint(e.path("cp")); return err },
		"TruncateLog":  func(e *env) error { return e.closed.TruncateLog(1) },
		"Rebuild": func(e *env) error {
			db, err := e.closed.Rebuild(ctx, e.path("rebuild"), pipeline.Config{})
			if err == nil {
				db.Close()
			}
			return err
		},
		"Replay": func(e *env) error { return e.closed.Replay(ctx, nil) },
	}
	for name, fn := range closedCalls {
		add(name+"/closed database", is(pipeline.ErrClosed, "closed"), fn)
	}
	add("Close/twice", noError, func(e *env) error {
		_ = e.closed.LastPosition()
		_ = e.closed.Policy()
		_ = e.closed.BucketPoolBytes()
		_ = e.closeCF.Name()
		_ = e.closeCF.Options()
		return e.closed.Close()
	})

	// Rebuild and Replay.
	add("Rebuild/bad config", cfgErr("Lanes"), func(e *env) error {
		db, err := e.db.Rebuild(ctx, e.path("rebuild"), pipeline.Config{Lanes: -1})
		if err == nil {
			db.Close()
		}
		return err
	})
	add("Rebuild/into a database with a log", argErr("Rebuild", "dir"), func(e *env) error {
		dir := e.path("full")
		db, err := pipeline.Open(dir, pipeline.Config{})
		if err != nil {
			return err
		}
		es, err := eventstore.New(db)
		if err != nil {
			db.Close()
			return err
		}
		if _, err := es.Append(ctx, "x", eventstore.Any, events1...); err != nil {
			db.Close()
			return err
		}
		if err := db.Close(); err != nil {
			return err
		}
		out, err := e.db.Rebuild(ctx, dir, pipeline.Config{})
		if err == nil {
			out.Close()
		}
		return err
	})
	add("Rebuild/cancelled context", is(context.Canceled), func(e *env) error {
		db, err := e.db.Rebuild(e.cancelled, e.path("rebuild"), pipeline.Config{})
		if err == nil {
			db.Close()
		}
		return err
	})
	replayInto := func(e *env, c context.Context, entries []pipeline.LogEntry) error {
		db, err := pipeline.Open(e.path("replay"), pipeline.Config{})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Replay(c, entries)
	}
	add("Replay/position not next", argErr("Replay", "entries", "position 5"), func(e *env) error {
		return replayInto(e, ctx, []pipeline.LogEntry{{Position: 5}})
	})
	add("Replay/position 0", argErr("Replay", "entries", "position 0"), func(e *env) error {
		return replayInto(e, ctx, []pipeline.LogEntry{{Position: 0}})
	})
	add("Replay/into a database with commits", argErr("Replay", "entries", "position 1"), func(e *env) error {
		return e.db.Replay(ctx, []pipeline.LogEntry{{Position: 1}})
	})
	add("Replay/cancelled context", is(context.Canceled), func(e *env) error {
		return replayInto(e, e.cancelled, []pipeline.LogEntry{{Position: 1}})
	})
	add("Replay/write to a reserved family", argErr("Replay", "write family", "rockline.log"), func(e *env) error {
		return replayInto(e, ctx, []pipeline.LogEntry{{Position: 1, Writes: []pipeline.LogWrite{{Family: "rockline.log", Generation: 1, Key: []byte("k")}}}})
	})
	add("Replay/write to a family without a name", argErr("Replay", "name"), func(e *env) error {
		return replayInto(e, ctx, []pipeline.LogEntry{{Position: 1, Writes: []pipeline.LogWrite{{Family: "", Generation: 1, Key: []byte("k")}}}})
	})
	add("Replay/key past 64 KiB", limitErr("key"), func(e *env) error {
		return replayInto(e, ctx, []pipeline.LogEntry{{Position: 1, Writes: []pipeline.LogWrite{{Family: "f", Generation: 1, Key: e.hugeKey}}}})
	})
	return cs
}

// txnOps are the transaction calls the used-up and closed cases sweep.
var txnOps = []string{"Txn.Put", "Txn.Delete", "Txn.Get", "Txn.GetUntracked", "Txn.NewIterator", "Store.AppendTxn", "Txn.AddEvents",
	"Txn.Commit", "Txn.CommitPosition", "Txn.CommitInline", "Txn.CommitInlineContext"}

// txnOp runs one transaction call and discards the transaction. es is the event store
// of tx's database, for Store.AppendTxn.
func txnOp(tx *pipeline.Txn, op string, es *eventstore.Store, cf *pipeline.ColumnFamily, key, value []byte) error {
	defer tx.Discard()
	switch op {
	case "Txn.Put":
		return tx.Put(cf, key, value)
	case "Txn.Delete":
		return tx.Delete(cf, key)
	case "Txn.Get":
		_, err := tx.Get(cf, key)
		return err
	case "Txn.GetUntracked":
		_, err := tx.GetUntracked(cf, key)
		return err
	case "Txn.NewIterator":
		it, err := tx.NewIterator(cf, pipeline.IterOptions{})
		if err == nil {
			it.Close()
		}
		return err
	case "Store.AppendTxn":
		return es.AppendTxn(tx, "s", eventstore.Any, events1...)
	case "Txn.AddEvents":
		return tx.AddEvents(events1...)
	}
	return commitOp(tx, op, context.Background())
}

func commitOp(tx *pipeline.Txn, op string, ctx context.Context) error {
	switch op {
	case "Txn.Commit":
		return tx.Commit(ctx)
	case "Txn.CommitPosition":
		_, err := tx.CommitPosition(ctx)
		return err
	case "Txn.CommitInline":
		return tx.CommitInline()
	case "Txn.CommitInlineContext":
		return tx.CommitInlineContext(ctx)
	}
	panic("unknown op " + op)
}

// configValue renders the non-zero part of a bad Config for a case name.
func configValue(c pipeline.Config) string {
	switch {
	case c.Lanes != 0:
		return fmt.Sprint(c.Lanes)
	case c.LaneQueueDepth != 0:
		return fmt.Sprint(c.LaneQueueDepth)
	case c.Validation != "":
		return c.Validation
	case c.Buckets != 0:
		return fmt.Sprint(c.Buckets)
	case c.MaxAttempts != 0:
		return fmt.Sprint(c.MaxAttempts)
	case c.RetryBackoff != 0:
		return c.RetryBackoff.String()
	case c.BlockCacheSize != 0:
		return fmt.Sprint(c.BlockCacheSize)
	case c.FamilyDefaults != storage.FamilyOptions{}:
		return fmt.Sprintf("%+v", c.FamilyDefaults)
	}
	for n, f := range c.Families {
		return fmt.Sprintf("%.12q:%+v", n, f)
	}
	return "?"
}
