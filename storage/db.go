package storage

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
)

// DB is an open RocksDB database and every native handle that belongs to it.
//
// Invariants:
//   - Every method that touches a native handle runs between enter and leave, which
//     hold gate for reading; Close holds it for writing while it frees handles, so no
//     native call can be in flight during or after the free.
//   - closed only goes from false to true, under gate's write lock.
//   - Snapshots and iterators are in live until released; Close releases what is left.
//   - A live family's handle is destroyed only by Close; a dropped family's as soon as
//     nothing can read through it (handles.go), or by Close.
type DB struct {
	dir  string
	opts Options

	gate   sync.RWMutex
	closed bool

	native *grocksdb.DB
	dbOpts *grocksdb.Options
	bbto   *grocksdb.BlockBasedTableOptions
	cache  *grocksdb.Cache
	wo     *grocksdb.WriteOptions
	// unsyncedWO is wo without sync (WriteUnsynced); it is wo itself without Options.Sync.
	unsyncedWO *grocksdb.WriteOptions
	syncWO     *grocksdb.WriteOptions // WAL on, sync on: for drop intents and generations
	ro         *grocksdb.ReadOptions
	families   registry
	meta       *Family
	drops      dropStats
	handles    handles
	// writeFailed is set once a native write or WAL sync returned an error (a full
	// disk, an I/O error). RocksDB's WAL writer then holds that error, and syncing the
	// WAL again (FlushWAL at Close) trips an assertion that aborts the process in
	// builds with assertions on (Debian's librocksdb), so Close and SyncWAL skip it.
	writeFailed atomic.Bool

	// ddl serialises family creation and retirement, which write MetaFamily records
	// (generations, drop intents) that must agree with the registry.
	ddl sync.Mutex

	liveMu sync.Mutex
	live   map[releaser]struct{}
}

// releaser is a snapshot or iterator that Close must free if its owner did not.
type releaser interface{ releaseLocked() }

// Open creates or opens the database in dir. Options are validated first; a bad option
// returns a *ConfigError and creates nothing on disk. A folder another open database
// holds (in this process or another) fails with a *LockedError. Families present on disk are
// discovered and reopened, whether or not opts names them; families named in opts but
// missing on disk are created.
func Open(dir string, opts Options) (*DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, &ConfigError{Field: "dir", Value: dir, Expected: "a folder name"}
	}
	if opts.ReadOnly {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("rockline: open %s read-only: %w", dir, err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("rockline: open %s: %w", dir, err)
	}
	opts = opts.withDefaults()
	db := &DB{dir: dir, opts: opts, live: make(map[releaser]struct{})}
	db.cache = grocksdb.NewLRUCache(uint64(max(opts.BlockCacheSize, 8<<20)))
	db.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	db.bbto.SetBlockCache(db.cache)
	if opts.BloomBitsPerKey > 0 {
		db.bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(opts.BloomBitsPerKey)) // moved into bbto
	}

	db.dbOpts = db.familyOptions(opts.Families[DefaultFamily])
	db.dbOpts.SetCreateIfMissing(true)
	db.dbOpts.SetCreateIfMissingColumnFamilies(true)
	db.dbOpts.SetErrorIfExists(opts.ErrorIfExists)
	db.dbOpts.EnableStatistics()
	db.dbOpts.SetMaxBackgroundJobs(opts.BackgroundJobs)
	db.dbOpts.SetMaxLogFileSize(uint64(opts.MaxLogFileSize))
	db.dbOpts.SetKeepLogFileNum(uint(opts.KeepLogFiles))
	// Without the WAL only flushed memtables survive a crash, and RocksDB flushes each
	// family on its own schedule: a batch spanning families (a commit's data and its log
	// entry) could then survive in one family and not the other. Atomic flush flushes
	// every family together, so a crash keeps each batch whole or not at all.
	db.dbOpts.SetAtomicFlush(opts.DisableWAL)

	if opts.Secondary != "" {
		db.dbOpts.SetMaxOpenFiles(-1) // a secondary must keep every file open
	}
	// names are RocksDB's names (with generations); logical names key the options.
	names := []string{DefaultFamily}
	existing, listErr := grocksdb.ListColumnFamilies(db.dbOpts, dir)
	if listErr == nil {
		for _, n := range existing {
			if n != DefaultFamily {
				names = append(names, n)
			}
		}
	}
	if opts.ReadOnly {
		if listErr != nil || !slices.Contains(names, MetaFamily) {
			db.freeOptions()
			return nil, fmt.Errorf("rockline: open %s read-only: not a rockline database (%v): %w", dir, listErr, ErrNotFound)
		}
	} else {
		if !slices.Contains(names, MetaFamily) {
			names = append(names, MetaFamily)
		}
		for n := range opts.Families {
			if !containsLogical(names, n) {
				names = append(names, n)
			}
		}
	}
	cfOpts := make([]*grocksdb.Options, len(names))
	for i, n := range names {
		if i == 0 {
			cfOpts[i] = db.dbOpts
		} else {
			logical, _ := parsePhysical(n)
			cfOpts[i] = db.familyOptions(opts.familyOptions(logical))
		}
	}
	var native *grocksdb.DB
	var handles []*grocksdb.ColumnFamilyHandle
	var err error
	switch {
	case opts.Secondary != "":
		native, handles, err = grocksdb.OpenDbAsSecondaryColumnFamilies(db.dbOpts, dir, opts.Secondary, names, cfOpts)
	case opts.ReadOnly:
		native, handles, err = grocksdb.OpenDbForReadOnlyColumnFamilies(db.dbOpts, dir, names, cfOpts, false)
	default:
		native, handles, err = grocksdb.OpenDbColumnFamilies(db.dbOpts, dir, names, cfOpts)
	}
	if err != nil {
		for _, o := range cfOpts[1:] {
			o.Destroy()
		}
		db.freeOptions()
		if lerr := lockError(dir, err); lerr != nil {
			return nil, lerr
		}
		return nil, mapError("open "+dir, err)
	}
	db.native = native
	for _, o := range cfOpts[1:] {
		o.Destroy() // RocksDB keeps a copy of the options it opened each family with
	}
	for i, n := range names {
		logical, gen := parsePhysical(n)
		fo := opts.familyOptions(logical).withDefaults()
		db.families.add(&Family{db: db, name: logical, physical: n, gen: gen, id: handles[i].ID(), handle: handles[i], opts: fo})
	}
	db.meta = db.families.get(MetaFamily)
	db.wo = grocksdb.NewDefaultWriteOptions()
	db.wo.DisableWAL(opts.DisableWAL)
	db.wo.SetSync(opts.Sync)
	db.unsyncedWO = db.wo
	if opts.Sync {
		db.unsyncedWO = grocksdb.NewDefaultWriteOptions()
		db.unsyncedWO.DisableWAL(opts.DisableWAL)
	}
	db.syncWO = grocksdb.NewDefaultWriteOptions()
	db.syncWO.SetSync(true)
	db.ro = grocksdb.NewDefaultReadOptions()
	if err := db.loadGenerations(); err != nil {
		db.Close()
		return nil, fmt.Errorf("rockline: open %s: %w", dir, err)
	}
	if opts.ReadOnly {
		return db, nil // nothing to complete or create: the folder stays as it is
	}
	if err := db.completeIntents(); err != nil {
		db.Close()
		return nil, fmt.Errorf("rockline: open %s: complete pending drops: %w", dir, err)
	}
	for n, fo := range opts.Families {
		if db.families.get(n) == nil {
			if _, err := db.CreateFamily(n, fo); err != nil {
				db.Close()
				return nil, err
			}
		}
	}
	return db, nil
}

// familyOptions builds the native options for one family, sharing the block cache.
func (db *DB) familyOptions(f FamilyOptions) *grocksdb.Options {
	f = f.withDefaults()
	o := grocksdb.NewDefaultOptions()
	o.SetWriteBufferSize(uint64(f.WriteBufferSize))
	o.SetMaxWriteBufferNumber(f.MaxWriteBufferNumber)
	o.SetCompression(compressions[f.Compression])
	o.SetBottommostCompression(compressions[f.BottommostCompression])
	o.SetLevelCompactionDynamicLevelBytes(!f.StaticLevelBytes)
	o.SetBlockBasedTableFactory(db.bbto)
	return o
}

func (db *DB) freeOptions() {
	if db.dbOpts != nil {
		db.dbOpts.Destroy()
	}
	db.bbto.Destroy()
	db.cache.Destroy()
}

// CatchUp brings a secondary (Options.Secondary) up to the writes its primary has
// made since Open or the last CatchUp. Others fail with ErrNotSecondary.
func (db *DB) CatchUp() error {
	if db.opts.Secondary == "" {
		return ErrNotSecondary
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return mapError("catch up with the primary", db.native.TryCatchUpWithPrimary())
}

// ReadOnly reports whether the database was opened read-only (or as a secondary).
func (db *DB) ReadOnly() bool { return db.opts.ReadOnly }

// Secondary reports whether the database was opened as a secondary (Options.Secondary).
func (db *DB) Secondary() bool { return db.opts.Secondary != "" }

// Dir returns the folder the database lives in.
func (db *DB) Dir() string { return db.dir }

// enter admits one call into native code; it fails with ErrClosed after Close.
// Every successful enter is paired with leave.
func (db *DB) enter() error {
	db.gate.RLock()
	if db.closed {
		db.gate.RUnlock()
		return ErrClosed
	}
	return nil
}

func (db *DB) leave() { db.gate.RUnlock() }

// Close waits for calls in native code to return, releases every snapshot and
// iterator still open, and frees all native handles. It is idempotent and safe to
// call from several goroutines; every call after the first returns nil and every other
// method then returns ErrClosed.
func (db *DB) Close() error {
	db.gate.Lock()
	defer db.gate.Unlock()
	if db.closed {
		return nil
	}
	var errs []error
	if err := db.dropPendingOnClose(); err != nil {
		errs = append(errs, err)
	}
	db.closed = true
	db.liveMu.Lock()
	for r := range db.live {
		r.releaseLocked()
	}
	db.live = nil
	db.liveMu.Unlock()
	if !db.opts.DisableWAL && !db.opts.ReadOnly && !db.writeFailed.Load() {
		if err := db.native.FlushWAL(true); err != nil {
			errs = append(errs, mapError("flush WAL on close", err))
		}
	}
	db.freeAllLocked()
	db.native.Close()
	if db.unsyncedWO != db.wo {
		db.unsyncedWO.Destroy()
	}
	db.wo.Destroy()
	db.syncWO.Destroy()
	db.ro.Destroy()
	db.freeOptions()
	return errors.Join(errs...)
}

func (db *DB) track(r releaser) {
	db.liveMu.Lock()
	db.live[r] = struct{}{}
	db.liveMu.Unlock()
}

func (db *DB) untrack(r releaser) {
	db.liveMu.Lock()
	delete(db.live, r)
	db.liveMu.Unlock()
}

// containsLogical reports whether any generation of name is among the RocksDB names.
func containsLogical(physical []string, name string) bool {
	for _, p := range physical {
		if n, _ := parsePhysical(p); n == name {
			return true
		}
	}
	return false
}
