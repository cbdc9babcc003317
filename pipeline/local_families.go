package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// CreateFamily is Engine.CreateFamily: the family with the options Config.Families
// gives its name (or Config.FamilyDefaults), its creation a log entry of its own,
// durable before the call returns.
func (db *localDB) CreateFamily(_ context.Context, name string) (EngineFamily, error) {
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
	return f, nil
}

// Family is Engine.Family: the live generation of name.
func (db *localDB) Family(_ context.Context, name string) (EngineFamily, error) {
	f, err := db.store.Family(name)
	if err != nil {
		return nil, closedErr(err)
	}
	return f, nil
}

// Default is Engine.Default.
func (db *localDB) Default() EngineFamily {
	if f := db.store.Default(); f != nil {
		return f
	}
	return nil // closed
}

// Families is Engine.Families: every live family, rockline's own included.
func (db *localDB) Families(context.Context) ([]string, error) {
	names, err := db.store.Families()
	return names, closedErr(err)
}

// DropFamily is Engine.DropFamily: the drop made durable, its log entry written and
// the family retired; dropped runs at the physical drop, once the commits admitted
// before the drop released the family.
func (db *localDB) DropFamily(_ context.Context, name string, dropped func(error)) error {
	return closedErr(db.dropFamily(name, dropped))
}

// storageFamily returns the local engine's family behind f, which the front checked
// came from this database.
func storageFamily(f EngineFamily) *storage.Family { return f.(*storage.Family) }

// dropFamily makes the drop durable (storage's intent), records it in the log and
// retires the family. Should the log entry fail to be written, the drop still happens
// and the next Open writes its entry (see reconcileFamilies).
func (db *localDB) dropFamily(name string, done func(error)) error {
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
func (db *localDB) recordFamily(readPos uint64, qualified string, drop bool) error {
	sys := db.sys
	marker := familyMarker(qualified)
	r := newRecord(func(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error) {
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
	})
	r.c.ReadPos, r.c.Batch, r.c.HasRecord, r.c.System = readPos, storage.NewBatch(), true, true
	pos, err := db.validate(context.Background(), r)
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
func (db *localDB) reconcileFamilies() error {
	names, err := db.liveFamilies()
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

// liveFamilies returns the live families without rockline's own, sorted.
func (db *localDB) liveFamilies() ([]string, error) {
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
