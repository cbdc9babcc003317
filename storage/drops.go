package storage

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rockline/rockline/internal/storagefaults"
)

// MetaFamily is the storage layer's own family. It holds durable drop intents; it is
// not listed by Families and cannot be dropped.
const MetaFamily = "rockline.meta"

// dropIntentPrefix starts the MetaFamily key of a drop intent: the prefix followed by
// the family's RocksDB name.
var dropIntentPrefix = []byte("drop/")

// dropStats are the drop protocol's counters, read by Stats.
type dropStats struct {
	pending atomic.Int64 // retired, not yet dropped physically
	failed  atomic.Int64 // physical drop attempts that failed, cumulative
	done    atomic.Int64 // physical drops completed, cumulative
	lastErr atomic.Value // string
}

// DropFamily retires the live family with that name and returns without waiting for
// commits that hold claims on it. Before it returns, the retirement is recorded
// durably, so a drop is never forgotten by a crash: the next Open completes it. New
// claims and batch writes to the family fail at once; the name can be created again
// at once; reads through the *Family keep working until its native handle is freed
// (see Family). The physical RocksDB drop runs
// exactly once, when the last claim is released (now, if none is held). A physical
// drop that fails is retried on the next DropFamily, Open or Close, and counted in
// Stats. done, when not nil, is called once with the physical drop's outcome (nil
// when it happened) on the goroutine that ran it; after a failure it is called on the
// attempt that finally succeeds or at Close.
//
// The default family, MetaFamily and the padding families (PadFamilyPrefix) cannot be
// dropped (*ConfigError). After the first drop the storage layer keeps padding
// families so that creating families later costs no memory for good (see pads.go).
func (db *DB) DropFamily(name string, done ...func(error)) error {
	return db.dropFamily(name, nil, done)
}

// DropFamilyWith is DropFamily with a step of the caller's between the durable drop
// intent and the retirement: record runs once the intent is durable (so the drop will
// happen, if need be at the next Open), while the family is still live and no other
// family is created or dropped; it is where a caller writes its own record of the drop
// (a log entry). The family is retired whatever record returns, and record's error is
// returned.
func (db *DB) DropFamilyWith(name string, record func(f *Family) error, done ...func(error)) error {
	return db.dropFamily(name, record, done)
}

func (db *DB) dropFamily(name string, record func(*Family) error, done []func(error)) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if name == DefaultFamily || isInternal(name) {
		return &ConfigError{Field: "family name", Value: name, Expected: "a family other than the default family and the storage layer's own families (its meta and padding families), which cannot be dropped"}
	}
	db.ddl.Lock()
	defer db.ddl.Unlock()
	f, err := db.Family(name) // its error names the family
	if err != nil {
		return err
	}
	b := NewBatch()
	if err := b.putDropIntent(f); err != nil {
		return err
	}
	// Synced with the WAL on, whatever the database's options: the drop survives a
	// crash from here on.
	if err := db.writeWith(db.syncWO, b); err != nil {
		return err
	}
	if record != nil {
		err = record(f)
	}
	db.retire(f, done)
	if db.enter() == nil {
		db.padFamilies()
		db.leave()
	}
	return err
}

// putDropIntent adds f's durable drop intent to b.
func (b *Batch) putDropIntent(f *Family) error {
	return b.Put(f.db.meta, intentKey(f.physical), []byte(f.name))
}

func intentKey(physical string) []byte { return append(bytes.Clone(dropIntentPrefix), physical...) }

// retire marks f dropped once its intent is durable, and starts the physical drop if
// no claim holds it. The caller holds db.ddl, not the gate.
func (db *DB) retire(f *Family, done []func(error)) {
	db.noteRetired(f)
	r := &db.families
	r.mu.Lock()
	f.mu.Lock()
	f.retired.Store(true)
	f.onDrop = append(f.onDrop, done...)
	run := f.readyToDropLocked()
	f.mu.Unlock()
	r.retireLocked(f)
	r.mu.Unlock()
	db.drops.pending.Add(1)
	if run {
		db.physicalDrop(f)
	}
	db.retryDrops(f)
}

// physicalDrop drops f in RocksDB and removes its intent. The caller marked the attempt
// started (f.dropping). It runs outside the gate's write side; after Close began it
// does nothing (Close drops what is pending itself).
func (db *DB) physicalDrop(f *Family) {
	if db.enter() != nil {
		f.mu.Lock()
		f.dropping = false
		f.mu.Unlock()
		return
	}
	defer db.leave()
	db.dropLocked(f)
}

// dropLocked performs the drop; the caller holds the gate (either side).
func (db *DB) dropLocked(f *Family) {
	err := db.fault(func(fl *storagefaults.Faults) error {
		if fl.Drop != nil {
			return fl.Drop(f.name)
		}
		return nil
	})
	if err == nil {
		err = db.dropNative(f)
	}
	if err == nil {
		// The intent is only a reminder now; losing this delete means one redundant
		// check at the next Open, which finds no such family.
		if derr := db.native.DeleteCF(db.wo, db.meta.handle, intentKey(f.physical)); derr != nil {
			db.drops.lastErr.Store(mapError("delete drop intent", derr).Error())
		}
	}
	f.mu.Lock()
	f.dropping = false
	var callbacks []func(error)
	if err == nil {
		f.dropped = true
		callbacks, f.onDrop = f.onDrop, nil
	}
	f.mu.Unlock()
	if err != nil {
		db.drops.failed.Add(1)
		db.drops.lastErr.Store(err.Error())
		return
	}
	db.drops.pending.Add(-1)
	db.drops.done.Add(1)
	db.handleDropped(f)
	for _, cb := range callbacks {
		cb(nil)
	}
}

// dropNative drops f in RocksDB through its handle.
func (db *DB) dropNative(f *Family) error {
	h, err := f.pin("drop family")
	if err != nil {
		return err
	}
	defer f.unpin()
	return mapError(fmt.Sprintf("drop family %q", f.name), db.native.DropColumnFamily(h))
}

// retryDrops retries physical drops that failed earlier and are no longer claimed,
// except skip's (just attempted by the caller).
func (db *DB) retryDrops(skip *Family) {
	if db.drops.failed.Load() == 0 {
		return
	}
	for _, f := range db.pendingDrops() {
		if f == skip {
			continue
		}
		f.mu.Lock()
		run := f.readyToDropLocked()
		f.mu.Unlock()
		if run {
			db.physicalDrop(f)
		}
	}
}

// pendingDrops returns the retired families not yet dropped physically.
func (db *DB) pendingDrops() []*Family {
	var out []*Family
	for _, f := range db.families.all() {
		if f.retired.Load() && !f.physicallyDropped() {
			out = append(out, f)
		}
	}
	return out
}

// fault runs a fault hook if one is configured.
func (db *DB) fault(fn func(*storagefaults.Faults) error) error {
	if db.opts.faults == nil {
		return nil
	}
	return fn(db.opts.faults)
}

// completeIntents drops, at Open, every family whose drop was recorded but not done,
// and forgets intents for families that no longer exist.
func (db *DB) completeIntents() error {
	it, err := db.NewIterator(db.meta, IterOptions{Lower: dropIntentPrefix, Upper: PrefixEnd(dropIntentPrefix)})
	if err != nil {
		return err
	}
	type intent struct{ key, physical []byte }
	var intents []intent
	for it.First(); it.Valid(); it.Next() {
		k, _, err := it.Item()
		if err != nil {
			it.Close()
			return err
		}
		intents = append(intents, intent{key: k, physical: k[len(dropIntentPrefix):]})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return err
	}
	for _, in := range intents {
		var target *Family
		for _, f := range db.families.all() {
			if f.physical == string(in.physical) {
				target = f
			}
		}
		if target == nil {
			if err := db.native.DeleteCF(db.wo, db.meta.handle, in.key); err != nil {
				return mapError("delete drop intent", err)
			}
			name, gen := parsePhysical(string(in.physical))
			db.families.mu.Lock()
			db.families.noteGen(name, gen)
			db.families.mu.Unlock()
			continue
		}
		r := &db.families
		r.mu.Lock()
		r.retireLocked(target) // an older generation may already be in the graveyard
		r.mu.Unlock()
		db.noteRetired(target)
		target.mu.Lock()
		target.retired.Store(true)
		target.dropping = true
		target.mu.Unlock()
		db.drops.pending.Add(1)
		db.physicalDrop(target)
	}
	// A live name whose newest generation was retired falls back to nothing; an older
	// live generation left by a crash is not resurrected.
	return nil
}

// dropPendingOnClose runs at Close, under the gate's write side: every retired family
// that holds no claim is dropped now; callbacks of drops that cannot run get an error.
func (db *DB) dropPendingOnClose() error {
	var errs []error
	for _, f := range db.pendingDrops() {
		f.mu.Lock()
		run := f.readyToDropLocked()
		f.mu.Unlock()
		if run {
			db.dropLocked(f)
		}
		f.mu.Lock()
		if !f.dropped {
			err := &DropPendingError{Family: f.name, Claims: f.claims}
			errs = append(errs, err)
			callbacks := f.onDrop
			f.onDrop = nil
			f.mu.Unlock()
			for _, cb := range callbacks {
				cb(err)
			}
			continue
		}
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// PrefixEnd returns the first key after every key that starts with p: the Upper bound
// of a scan of the prefix (nil, unbounded, when p is empty or all 0xff bytes).
func PrefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
