package storage

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
)

// generationSep separates a family's name from its generation in RocksDB's name for
// it: generation 1 of "orders" is "orders", generation 2 is "orders#2". User family
// names may not contain it.
const generationSep = "#"

// Family is one generation of a column family. Once dropped (retired) it refuses new
// claims and new batch writes; reads through it keep working until its native handle
// is freed, which happens once the drop is physical and no snapshot taken before the
// drop is open (see handles.go). Reads after that fail with an error matching
// ErrFamilyRetired. The *Family itself stays safe to use in every call.
//
// Invariants (mu guards claims, retired's transitions, dropping, dropped):
//   - retired goes false->true once, under mu; afterwards Claim fails.
//   - The physical drop starts exactly once per successful attempt, when retired and
//     claims == 0, on the goroutine that observed that state (Retire or the last
//     Release); dropping marks an attempt in progress.
//   - dropped (physically) implies retired and claims == 0.
//   - handle is nil once freed; see handles.go for who reads and frees it.
type Family struct {
	db       *DB
	name     string // the logical name users see
	physical string // RocksDB's name: name, or name#generation
	gen      int
	id       uint32
	opts     FamilyOptions

	hmu       sync.RWMutex
	handle    *grocksdb.ColumnFamilyHandle
	retiredAt uint64 // the retirement's epoch (handles.go); 0 while live

	retired  atomic.Bool
	mu       sync.Mutex
	claims   int
	dropping bool
	dropped  bool
	onDrop   []func(error)
}

// Name returns the family's name.
func (f *Family) Name() string { return f.name }

// Generation returns the family's generation: 1 for the first family of a name, one
// more for each re-creation after a drop.
func (f *Family) Generation() int { return f.gen }

// ID returns RocksDB's numeric id for the family, unique within the database for its
// whole life (a re-created name gets a new id).
func (f *Family) ID() uint32 { return f.id }

// Options returns the family's options with defaults filled in.
func (f *Family) Options() FamilyOptions { return f.opts }

// Dropped reports whether the family has been dropped (retired): it accepts no new
// claims and no new writes, whether or not RocksDB has dropped it physically yet.
func (f *Family) Dropped() bool { return f.retired.Load() }

// QualifiedName returns RocksDB's name for this generation: the name for generation
// 1, "name#generation" after. ParseQualifiedName reverses it.
func (f *Family) QualifiedName() string { return f.physical }

// QualifiedName returns RocksDB's name for generation gen of name, as
// Family.QualifiedName does.
func QualifiedName(name string, gen int) string { return physicalName(name, gen) }

// ParseQualifiedName splits a QualifiedName into the family name and generation.
func ParseQualifiedName(q string) (name string, generation int) { return parsePhysical(q) }

// DB returns the database the family belongs to.
func (f *Family) DB() *DB { return f.db }

// physicallyDropped reports whether RocksDB has dropped the family.
func (f *Family) physicallyDropped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// physicalName returns RocksDB's name for generation gen of name.
func physicalName(name string, gen int) string {
	if gen <= 1 {
		return name
	}
	return name + generationSep + strconv.Itoa(gen)
}

// parsePhysical splits RocksDB's name for a family into name and generation.
func parsePhysical(physical string) (string, int) {
	i := strings.LastIndex(physical, generationSep)
	if i < 0 {
		return physical, 1
	}
	gen, err := strconv.Atoi(physical[i+1:])
	if err != nil || gen < 2 {
		return physical, 1
	}
	return physical[:i], gen
}

// registry is the one place that knows which families exist: live ones by name, and
// retired ones not yet dropped physically in graveyard. A family leaves the registry
// when its physical drop completes (its handle is then freed by handles.go); Close
// frees the handles of the families left, each exactly once.
type registry struct {
	mu        sync.RWMutex
	byName    map[string]*Family
	graveyard []*Family
	maxGen    map[string]int // highest generation ever used per name (durable: genKey)
}

func (r *registry) add(f *Family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = make(map[string]*Family)
		r.maxGen = make(map[string]int)
	}
	if old, ok := r.byName[f.name]; ok && old.gen > f.gen {
		r.graveyard = append(r.graveyard, f)
	} else {
		if ok {
			r.graveyard = append(r.graveyard, old)
		}
		r.byName[f.name] = f
	}
	r.noteGen(f.name, f.gen)
}

// retireLocked moves f from the live names to the graveyard, once; r.mu is held.
func (r *registry) retireLocked(f *Family) {
	if r.byName[f.name] == f {
		delete(r.byName, f.name)
	}
	if !slices.Contains(r.graveyard, f) {
		r.graveyard = append(r.graveyard, f)
	}
}

// forget removes f, dropped physically, from the graveyard.
func (r *registry) forget(f *Family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.graveyard, f); i >= 0 {
		r.graveyard = slices.Delete(r.graveyard, i, i+1)
	}
}

func (r *registry) noteGen(name string, gen int) {
	if r.maxGen == nil {
		r.maxGen = make(map[string]int)
	}
	r.maxGen[name] = max(r.maxGen[name], gen)
}

func (r *registry) get(name string) *Family {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

// all returns live and retired families.
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
	return nil, fmt.Errorf("%w: %q", ErrColumnFamilyNotFound, name)
}

// Default returns the default family, which always exists. It returns nil after Close.
func (db *DB) Default() *Family {
	if db.enter() != nil {
		return nil
	}
	defer db.leave()
	return db.families.get(DefaultFamily)
}

// Families returns the names of the live families, sorted, without the storage
// layer's own families (MetaFamily, the padding families).
func (db *DB) Families() ([]string, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	db.families.mu.RLock()
	names := make([]string, 0, len(db.families.byName))
	for n := range db.families.byName {
		if !isInternal(n) {
			names = append(names, n)
		}
	}
	db.families.mu.RUnlock()
	sort.Strings(names)
	return names, nil
}

// CreateFamily creates a column family with the given options. It fails with an
// *ConfigError for a bad name or option, and with an error matching
// ErrColumnFamilyExists when the name is live. A name whose earlier generation was
// dropped can be created at once, even while that drop is pending: the new generation
// is a distinct RocksDB family and starts empty. Its generation is one more than any
// the name ever had in this database, across reopens: the highest generation of each
// name is recorded durably (a synced write) before the family is created.
func (db *DB) CreateFamily(name string, opts FamilyOptions) (*Family, error) {
	return db.CreateFamilyGeneration(name, 0, opts)
}

// CreateFamilyGeneration is CreateFamily with the generation chosen by the caller, for
// a replay that must reproduce another database's generations; 0 means the next one.
// A generation not above every generation the name has had fails with a
// *ConfigError.
func (db *DB) CreateFamilyGeneration(name string, gen int, opts FamilyOptions) (*Family, error) {
	if db.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if err := ValidateFamilyName(name); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if strings.HasPrefix(name, PadFamilyPrefix) {
		return nil, &ConfigError{Field: "family name", Value: name, Expected: fmt.Sprintf("a name not starting with %q, which the storage layer's padding families use", PadFamilyPrefix)}
	}
	if gen < 0 {
		return nil, &ConfigError{Field: "generation", Value: gen, Expected: "0 (the next) or positive"}
	}
	// ddl before the gate, as in DropFamily: the other order could wait on a read
	// lock behind a Close queued for the write side.
	db.ddl.Lock()
	defer db.ddl.Unlock()
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	r := &db.families
	r.mu.RLock()
	_, live := r.byName[name]
	top := r.maxGen[name]
	r.mu.RUnlock()
	if live {
		return nil, fmt.Errorf("rockline: create family %q: %w", name, ErrColumnFamilyExists)
	}
	switch {
	case gen == 0:
		gen = top + 1
	case gen <= top:
		return nil, &ConfigError{Field: "generation", Value: gen, Expected: fmt.Sprintf("above %d, the highest generation %q has had", top, name)}
	}
	if err := db.recordGeneration(name, gen); err != nil {
		return nil, err
	}
	physical := physicalName(name, gen)
	no := db.familyOptions(opts)
	h, err := db.native.CreateColumnFamily(no, physical)
	no.Destroy() // RocksDB keeps a copy of the options it created the family with
	if err != nil {
		return nil, mapError(fmt.Sprintf("create family %q", name), err)
	}
	f := &Family{db: db, name: name, physical: physical, gen: gen, id: h.ID(), handle: h, opts: opts.withDefaults()}
	r.mu.Lock()
	r.byName[name] = f
	r.noteGen(name, gen)
	r.mu.Unlock()
	return f, nil
}

// MaxGeneration returns the highest generation name has had in this database (0 for
// a name never created).
func (db *DB) MaxGeneration(name string) int {
	db.families.mu.RLock()
	defer db.families.mu.RUnlock()
	return db.families.maxGen[name]
}

// check verifies that f can be used with db.
func (db *DB) check(f *Family) error {
	if f == nil {
		return fmt.Errorf("rockline: nil column family: %w", ErrColumnFamilyNotFound)
	}
	if f.db != db {
		return fmt.Errorf("rockline: family %q: %w", f.name, ErrForeignFamily)
	}
	return nil
}

func newFlushOptions() *grocksdb.FlushOptions {
	fo := grocksdb.NewDefaultFlushOptions()
	fo.SetWait(true)
	return fo
}
