package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
	"github.com/rockline/rockline/validators"
)

// ColumnFamily is a handle on one generation of a column family, safe to use until
// the database closes. Once the family is dropped, writes through it fail with
// ErrColumnFamilyDropped. Reads through it work only while something keeps the
// dropped generation: a transaction begun before the drop reads it until that
// transaction ends, and any read works until the physical drop (which waits for the
// commits admitted before the drop). After both, the generation's native memory is
// freed and reads through the handle fail with ErrColumnFamilyDropped (a
// *DroppedError naming the family). An iterator opened before the drop keeps working
// until it is closed.
type ColumnFamily struct {
	db   *DB
	f    *storage.Family
	name string // a remote DB's family (f is nil then)
}

// Name returns the family's name.
func (c *ColumnFamily) Name() string {
	if c.f == nil {
		return c.name
	}
	return c.f.Name()
}

// Options returns the family's memtable options, defaults filled in (zero on a DB
// opened with OpenEngine: the engine has no memtables of rockline's).
func (c *ColumnFamily) Options() storage.FamilyOptions {
	if c.f == nil {
		return storage.FamilyOptions{}
	}
	return c.f.Options()
}

func (db *DB) wrap(f *storage.Family) *ColumnFamily { return &ColumnFamily{db: db, f: f} }

// CreateColumnFamily creates a family with the options Config.Families gives its name
// (or Config.FamilyDefaults). It fails with ErrColumnFamilyExists for a live name and
// with an *ArgumentError for an empty, over-long or reserved ("rockline." prefix) name.
// The creation is a log entry of its own (LogEntry.Families), durable before the call
// returns, so Replay and Rebuild reproduce it. A name dropped earlier gets a new
// generation, above every one it had, also across reopens.
func (db *DB) CreateColumnFamily(name string) (*ColumnFamily, error) {
	if err := db.writable(); err != nil {
		return nil, err
	}
	if err := checkFamilyName("CreateColumnFamily", name); err != nil {
		return nil, err
	}
	if db.remote != nil {
		return db.createRemoteFamily(name)
	}
	db.familyMu.Lock()
	defer db.familyMu.Unlock()
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	readPos, err := db.seq.Acquire() // fails while a Replay holds the database
	if err != nil {
		return nil, err
	}
	defer db.seq.Release(readPos)
	f, err := db.store.CreateFamily(name, db.familyOptions(name))
	if err != nil {
		return nil, closedErr(err)
	}
	if err := db.recordFamily(readPos, f.QualifiedName(), false); err != nil {
		// Not created as far as the log knows: take the family back. Should that
		// fail too, the next Open records the creation (see reconcileFamilies).
		if derr := db.store.DropFamily(name); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, closedErr(err)
	}
	return db.wrap(f), nil
}

// EnsureColumnFamily returns the live family with that name, creating it (as
// CreateColumnFamily does) when there is none: the open-or-create call for code that
// runs against a new or an existing database alike. It fails as ColumnFamily and
// CreateColumnFamily do, never with ErrColumnFamilyExists.
func (db *DB) EnsureColumnFamily(name string) (*ColumnFamily, error) {
	if err := checkFamilyName("EnsureColumnFamily", name); err != nil {
		return nil, err
	}
	cf, err := db.ColumnFamily(name)
	if !errors.Is(err, ErrColumnFamilyNotFound) {
		return cf, err
	}
	cf, err = db.CreateColumnFamily(name)
	if errors.Is(err, ErrColumnFamilyExists) { // created meanwhile by another caller
		return db.ColumnFamily(name)
	}
	return cf, err
}

// ColumnFamily returns the live family with that name, or an error matching
// ErrColumnFamilyNotFound.
func (db *DB) ColumnFamily(name string) (*ColumnFamily, error) {
	if isReserved(name) {
		return nil, fmt.Errorf("rockline: family %q: %w", name, ErrColumnFamilyNotFound)
	}
	if db.remote != nil {
		return db.remoteColumnFamily(name)
	}
	f, err := db.store.Family(name)
	if err != nil {
		return nil, closedErr(err)
	}
	return db.wrap(f), nil
}

// Default returns the default column family, which always exists and cannot be
// dropped. After Close it returns a handle whose every use fails with ErrClosed.
func (db *DB) Default() *ColumnFamily {
	if db.remote != nil {
		return db.remoteHandle(storage.DefaultFamily)
	}
	f := db.store.Default()
	if f == nil {
		return &ColumnFamily{db: db}
	}
	return db.wrap(f)
}

// ColumnFamilies returns the names of the live families, sorted, without rockline's own.
func (db *DB) ColumnFamilies() ([]string, error) {
	if db.remote != nil {
		return db.remoteColumnFamilies()
	}
	names, err := db.store.Families()
	if err != nil {
		return nil, closedErr(err)
	}
	out := names[:0]
	for _, n := range names {
		if !isReserved(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// DropColumnFamily drops the family. It does not wait for commits already admitted
// that write to it: they complete normally, and only the physical drop waits for
// them. From the call on, new writes to the family and commits that buffered writes to
// it (or read it with tracking) before the drop fail whole with ErrColumnFamilyDropped
// (a *DroppedError naming it), and the name can be created again at once as a new,
// empty family. The drop is a log entry of its own (LogEntry.Families), durable before
// the call returns, so Replay and Rebuild reproduce it. That entry takes the next log
// position as a commit does, so the call waits for the write group ahead of it in the
// writer queue: under the parallel policy only for that group's write, under the
// serial policy also for its validation, Checks included, since the serial leader
// validates a whole group before it assigns positions. The physical RocksDB drop runs
// exactly once, when the last admitted commit releases the family (a crash in between
// is completed by the next Open). Transactions begun before the drop keep reading the
// old family, and iterators already open on it keep working, until they end; its
// native memory is freed after that and the physical drop (see ColumnFamily). The
// default family and rockline's own families cannot be dropped (*ArgumentError). The
// span rockline.cf.drop covers the call up to the physical drop.
func (db *DB) DropColumnFamily(name string) error {
	if err := db.writable(); err != nil {
		return err
	}
	if name == storage.DefaultFamily {
		return &ArgumentError{Op: "DropColumnFamily", Arg: "name", Reason: "the default family cannot be dropped"}
	}
	if isReserved(name) {
		return &ArgumentError{Op: "DropColumnFamily", Arg: "name", Reason: fmt.Sprintf("%q is reserved by rockline", name)}
	}
	if db.remote != nil {
		return db.dropRemoteFamily(name)
	}
	start := time.Now()
	_, span := db.tracer.Start(context.Background(), tracing.SpanDropCF, trace.WithAttributes(tracing.AttrFamily.String(name)))
	err := db.dropFamily(name, func(err error) {
		span.SetAttributes(tracing.AttrDropWaitMillis.Float64(float64(time.Since(start).Microseconds()) / 1000))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(tracing.AttrErrorType.String(errorType(err)))
		span.End()
		return closedErr(err)
	}
	return nil
}

// dropFamily makes the drop durable (storage's intent), records it in the log and
// retires the family. Should the log entry fail to be written, the drop still happens
// and the next Open writes its entry (see reconcileFamilies).
func (db *DB) dropFamily(name string, done func(error)) error {
	db.familyMu.Lock()
	defer db.familyMu.Unlock()
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	readPos, err := db.seq.Acquire() // fails while a Replay holds the database
	if err != nil {
		return err
	}
	defer db.seq.Release(readPos)
	return db.store.DropFamilyWith(name, func(f *storage.Family) error {
		return db.recordFamily(readPos, f.QualifiedName(), true)
	}, done)
}

// recordFamily commits, through the validator, the log entry of the creation (or drop)
// of the family generation named qualified, so it takes the next dense position like
// any commit. The entry also writes (or deletes) the generation's marker in the system
// family, which says the log holds its creation and not yet its drop. The entry is as
// durable as a commit (Config.Sync, Config.DisableWAL): the family change itself is
// durable before the entry is written (RocksDB's manifest for a creation, storage's
// synced intent for a drop), and an entry lost to a crash is written again by the next
// Open (reconcileFamilies). The caller holds familyMu, the
// gate and a read position.
func (db *DB) recordFamily(readPos uint64, qualified string, drop bool) error {
	sys := db.sys
	marker := familyMarker(qualified)
	c := &validators.Commit{
		ReadPos:   readPos,
		Batch:     storage.NewBatch(),
		HasRecord: true,
		System:    true,
		Owner: &commitOwner{entry: func(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error) {
			w := logentry.Write{Family: sys.QualifiedName(), Key: marker, Delete: drop}
			var err error
			if drop {
				err = b.Delete(sys, marker)
			} else {
				w.Value = []byte{1}
				err = b.Put(sys, marker, w.Value)
			}
			if err != nil {
				return nil, err
			}
			e := logentry.Entry{Position: pos, Time: unixNano, Writes: []logentry.Write{w},
				Families: []logentry.FamilyOp{{Family: qualified, Drop: drop}}}
			return logentry.Append(dst, &e), nil
		}},
	}
	pos, err := db.validate(context.Background(), c)
	if err != nil {
		return err
	}
	return db.seq.Wait(pos)
}

// familyMarker is the system-family key that says a family generation's creation is
// in the log.
func familyMarker(qualified string) []byte { return append([]byte("mfamily/"), qualified...) }

// familyMarkerPrefix starts every family marker; familyMarkerEnd is the first key
// past them all ('0' follows '/').
var (
	familyMarkerPrefix = familyMarker("")
	familyMarkerEnd    = []byte("mfamily0")
)

// reconcileFamilies, at Open, makes the log agree with the families on disk: a live
// family without a marker (a crash between creating it and writing its entry, or a
// database written before creations were recorded) gets its creation entry, and a
// marker whose family is gone (a crash after the drop was made durable, before its entry
// was) gets the drop entry. Either entry lands after every write a replay must route
// by it: no commit wrote to the family after it was created without an entry, and none
// wrote to a dropped one after its (lost) entry, since later commits were lost with it.
func (db *DB) reconcileFamilies() error {
	names, err := db.ColumnFamilies()
	if err != nil {
		return err
	}
	marked := make(map[string]bool)
	it, err := db.store.NewIterator(db.sys, storage.IterOptions{Lower: familyMarkerPrefix, Upper: familyMarkerEnd})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k, _, err := it.Item()
		if err != nil {
			it.Close()
			return err
		}
		marked[string(k[len(familyMarkerPrefix):])] = true
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return err
	}
	record := func(qualified string, drop bool) error {
		readPos, err := db.seq.Acquire()
		if err != nil {
			return err
		}
		defer db.seq.Release(readPos)
		return db.recordFamily(readPos, qualified, drop)
	}
	for _, n := range names {
		if n == storage.DefaultFamily {
			continue
		}
		f, err := db.store.Family(n)
		if err != nil {
			return err
		}
		if marked[f.QualifiedName()] {
			delete(marked, f.QualifiedName())
			continue
		}
		if err := record(f.QualifiedName(), false); err != nil {
			return fmt.Errorf("rockline: record the creation of family %q: %w", n, err)
		}
	}
	for _, q := range slices.Sorted(maps.Keys(marked)) {
		if err := record(q, true); err != nil {
			return fmt.Errorf("rockline: record the drop of family %q: %w", q, err)
		}
	}
	return nil
}

func checkFamilyName(op, name string) error {
	if err := storage.ValidateFamilyName(name); err != nil {
		reason := "must be 1 to 255 bytes long, without \"#\""
		var ce *ConfigError
		if errors.As(err, &ce) {
			reason = fmt.Sprintf("%q: expected %s", name, ce.Expected)
		}
		return &ArgumentError{Op: op, Arg: "name", Reason: reason, Err: err}
	}
	if isReserved(name) {
		return &ArgumentError{Op: op, Arg: "name", Reason: fmt.Sprintf("%q: names starting with %q are reserved", name, reservedPrefix)}
	}
	return nil
}

// checkFamily verifies a family argument of a transaction call. A dropped family
// passes: storage refuses reads once its handle is freed (readErr), and writes check
// Dropped themselves.
func (db *DB) checkFamily(op string, c *ColumnFamily) (*storage.Family, error) {
	if c == nil || c.f == nil {
		if c != nil && c.db == db {
			return nil, ErrClosed
		}
		if c != nil && c.db != nil { // Default() of another, closed database
			return nil, fmt.Errorf("rockline: %s: column family of a closed database: %w", op, ErrClosed)
		}
		return nil, &ArgumentError{Op: op, Arg: "column family", Reason: "must not be nil"}
	}
	if c.db != db {
		return nil, &ArgumentError{Op: op, Arg: "column family", Reason: fmt.Sprintf("%q belongs to another database", c.f.Name()), Err: storage.ErrForeignFamily}
	}
	return c.f, nil
}
