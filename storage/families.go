package storage

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
)

// Family is an open column family. A *Family stays valid until its database closes:
// after DropFamily it refuses writes (Batch.Put and Write return an error matching
// ErrColumnFamilyNotFound) but reads through it keep working.
type Family struct {
	db         *DB
	name       string
	id         uint32
	handle     *grocksdb.ColumnFamilyHandle
	nativeOpts *grocksdb.Options
	opts       FamilyOptions
	dropped    atomic.Bool
}

// Name returns the family's name.
func (f *Family) Name() string { return f.name }

// ID returns RocksDB's numeric id for the family, unique within the database for its
// whole life (a re-created name gets a new id).
func (f *Family) ID() uint32 { return f.id }

// Options returns the family's options with defaults filled in.
func (f *Family) Options() FamilyOptions { return f.opts }

// Dropped reports whether the family has been dropped.
func (f *Family) Dropped() bool { return f.dropped.Load() }

// DB returns the database the family belongs to.
func (f *Family) DB() *DB { return f.db }

// registry is the one place that knows which families exist. It holds every handle
// ever opened (live ones by name, dropped ones in graveyard) so Close frees them all.
type registry struct {
	mu        sync.RWMutex
	byName    map[string]*Family
	graveyard []*Family
}

func (r *registry) add(f *Family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = make(map[string]*Family)
	}
	r.byName[f.name] = f
}

func (r *registry) get(name string) *Family {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

// all returns live and dropped families.
func (r *registry) all() []*Family {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Family, 0, len(r.byName)+len(r.graveyard))
	for _, f := range r.byName {
		out = append(out, f)
	}
	return append(out, r.graveyard...)
}

// Family returns the live family with that name, or an error matching
// ErrColumnFamilyNotFound.
func (db *DB) Family(name string) (*Family, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	if f := db.families.get(name); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("storage: family %q: %w", name, ErrColumnFamilyNotFound)
}

// Default returns the default family, which always exists. It returns nil after Close.
func (db *DB) Default() *Family {
	if db.enter() != nil {
		return nil
	}
	defer db.leave()
	return db.families.get(DefaultFamily)
}

// Families returns the names of the live families, sorted.
func (db *DB) Families() ([]string, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	db.families.mu.RLock()
	names := make([]string, 0, len(db.families.byName))
	for n := range db.families.byName {
		names = append(names, n)
	}
	db.families.mu.RUnlock()
	sort.Strings(names)
	return names, nil
}

// CreateFamily creates a column family with the given options. It fails with an
// *OptionsError for a bad name or option, and with an error matching
// ErrColumnFamilyExists when the name is live.
func (db *DB) CreateFamily(name string, opts FamilyOptions) (*Family, error) {
	if err := ValidateFamilyName(name); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	r := &db.families
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; ok {
		return nil, fmt.Errorf("storage: create family %q: %w", name, ErrColumnFamilyExists)
	}
	no := db.familyOptions(opts)
	h, err := db.native.CreateColumnFamily(no, name)
	if err != nil {
		no.Destroy()
		return nil, mapError(fmt.Sprintf("create family %q", name), err)
	}
	f := &Family{db: db, name: name, id: h.ID(), handle: h, nativeOpts: no, opts: opts.withDefaults()}
	r.byName[name] = f
	return f, nil
}

// DropFamily drops the live family with that name from RocksDB at once. The default
// family cannot be dropped. The *Family values already handed out keep serving reads
// until Close; writes through them fail. The name can be created again immediately.
func (db *DB) DropFamily(name string) error {
	if name == DefaultFamily {
		return &OptionsError{Field: "family name", Value: name, Reason: "the default family cannot be dropped"}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	r := &db.families
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.byName[name]
	if !ok {
		return fmt.Errorf("storage: drop family %q: %w", name, ErrColumnFamilyNotFound)
	}
	if err := db.native.DropColumnFamily(f.handle); err != nil {
		return mapError(fmt.Sprintf("drop family %q", name), err)
	}
	f.dropped.Store(true)
	delete(r.byName, name)
	r.graveyard = append(r.graveyard, f)
	return nil
}

// check verifies that f can be used with db.
func (db *DB) check(f *Family) error {
	if f == nil {
		return fmt.Errorf("storage: nil column family: %w", ErrColumnFamilyNotFound)
	}
	if f.db != db {
		return fmt.Errorf("storage: family %q: %w", f.name, ErrForeignFamily)
	}
	return nil
}

type grocksdbHandles = grocksdb.ColumnFamilyHandles

func newFlushOptions() *grocksdb.FlushOptions {
	fo := grocksdb.NewDefaultFlushOptions()
	fo.SetWait(true)
	return fo
}
