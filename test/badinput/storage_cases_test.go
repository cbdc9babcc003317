package badinput

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rockline/rockline/storage"
)

func storageCases() []badCase {
	var cs []badCase
	add := func(name string, w want, fn func(e *env) error) {
		cs = append(cs, badCase{name: "storage/" + name, call: fn, want: w})
	}
	huge := func(name string, w want, fn func(e *env) error) {
		cs = append(cs, badCase{name: "storage/" + name, call: fn, want: w, huge: true})
	}
	k, v := []byte("k"), []byte("v")

	// Open, Options and names.
	openBad := func(e *env, o storage.Options) error {
		db, err := storage.Open(e.path("bad-options"), o)
		if err == nil {
			db.Close()
		}
		return err
	}
	add("Open/empty dir", cfgErr("dir"), func(e *env) error { _, err := storage.Open("", storage.Options{}); return err })
	badOptions := []struct {
		field string
		o     storage.Options
	}{
		{"BlockCacheSize", storage.Options{BlockCacheSize: -1}},
		{"BlockCacheSize", storage.Options{BlockCacheSize: storage.MaxBlockCacheSize + 1}},
		{"family name", storage.Options{Families: map[string]storage.FamilyOptions{"": {}}}},
		{"family name", storage.Options{Families: map[string]storage.FamilyOptions{"a#b": {}}}},
		{"Families[x].WriteBufferSize", storage.Options{Families: map[string]storage.FamilyOptions{"x": {WriteBufferSize: 1}}}},
		{"Families[x].MaxWriteBufferNumber", storage.Options{Families: map[string]storage.FamilyOptions{"x": {MaxWriteBufferNumber: 1}}}},
		{"FamilyDefaults.WriteBufferSize", storage.Options{FamilyDefaults: storage.FamilyOptions{WriteBufferSize: 1}}},
		{"FamilyDefaults.MaxWriteBufferNumber", storage.Options{FamilyDefaults: storage.FamilyOptions{MaxWriteBufferNumber: 65}}},
	}
	for i, bo := range badOptions {
		add(fmt.Sprintf("Open/%s#%d", bo.field, i), cfgErr(bo.field), func(e *env) error { return openBad(e, bo.o) })
		add(fmt.Sprintf("Options.Validate/%s#%d", bo.field, i), cfgErr(bo.field), func(e *env) error { return bo.o.Validate() })
	}
	add("FamilyOptions.Validate/negative buffer", cfgErr("WriteBufferSize"), func(e *env) error {
		return storage.FamilyOptions{WriteBufferSize: -1}.Validate()
	})
	add("FamilyOptions.Validate/too many buffers", cfgErr("MaxWriteBufferNumber"), func(e *env) error {
		return storage.FamilyOptions{MaxWriteBufferNumber: storage.MaxMaxWriteBufferNumber + 1}.Validate()
	})
	for _, name := range []string{"", "a#b", strings.Repeat("f", storage.MaxFamilyNameLen+1)} {
		add(fmt.Sprintf("ValidateFamilyName/%.12q", name), cfgErr("family name"), func(e *env) error { return storage.ValidateFamilyName(name) })
	}
	add("ParseQualifiedName/odd input", noError, func(e *env) error {
		for _, q := range []string{"", "#", "a#", "a#1", "a#0", "a#-3", "a#99999999999999999999", "#2", "a#b#3"} {
			if _, gen := storage.ParseQualifiedName(q); gen < 1 {
				return fmt.Errorf("ParseQualifiedName(%q): generation %d", q, gen)
			}
		}
		return nil
	})

	// Batches.
	add("Batch.Put/nil family", is(storage.ErrColumnFamilyNotFound, "nil"), func(e *env) error { return storage.NewBatch().Put(nil, k, v) })
	add("Batch.Delete/nil family", is(storage.ErrColumnFamilyNotFound, "nil"), func(e *env) error { return storage.NewBatch().Delete(nil, k) })
	add("Batch.Put/key past 64 KiB", limitErr("key"), func(e *env) error { return storage.NewBatch().Put(e.sf, e.hugeKey, v) })
	add("Batch.Delete/key past 64 KiB", limitErr("key"), func(e *env) error { return storage.NewBatch().Delete(e.sf, e.hugeKey) })
	huge("Batch.Put/value past 1 GiB", limitErr("value"), func(e *env) error { return storage.NewBatch().Put(e.sf, k, e.hugeValue) })
	add("Batch.Put/dropped family", is(storage.ErrFamilyRetired, "retired"), func(e *env) error { return storage.NewBatch().Put(e.sRetired, k, v) })
	add("Batch.Delete/dropped family", is(storage.ErrFamilyRetired, "retired"), func(e *env) error { return storage.NewBatch().Delete(e.sRetired, k) })
	add("Batch/zero value", noError, func(e *env) error {
		var b storage.Batch
		if err := e.st.Write(&b); err != nil {
			return err
		}
		b.Append(&storage.Batch{})
		if err := b.Put(e.sf, []byte("zero-batch"), v); err != nil {
			return err
		}
		if err := e.st.Write(&b); err != nil {
			return err
		}
		b.Reset()
		return e.st.Write(&b)
	})
	add("Write/nil batch", noError, func(e *env) error { return e.st.Write(nil) })
	add("Write/family of another database", is(storage.ErrForeignFamily, "sf"), func(e *env) error {
		b := storage.NewBatch()
		if err := b.Put(e.sForeign, k, v); err != nil {
			return err
		}
		return e.st.Write(b)
	})
	add("Write/zero family", is(storage.ErrForeignFamily), func(e *env) error {
		b := storage.NewBatch()
		if err := b.Put(&storage.Family{}, k, v); err != nil {
			return err
		}
		return e.st.Write(b)
	})
	add("Write/closed database", is(storage.ErrClosed, "closed"), func(e *env) error {
		b := storage.NewBatch()
		if err := b.Put(e.sClosedCF, k, v); err != nil {
			return err
		}
		return e.stClosed.Write(b)
	})

	// Reads.
	add("Get/nil family", is(storage.ErrColumnFamilyNotFound, "nil"), func(e *env) error { _, err := e.st.Get(nil, k, nil); return err })
	add("Get/zero family", is(storage.ErrForeignFamily), func(e *env) error { _, err := e.st.Get(&storage.Family{}, k, nil); return err })
	add("Get/family of another database", is(storage.ErrForeignFamily, "sf"), func(e *env) error { _, err := e.st.Get(e.sForeign, k, nil); return err })
	add("Get/key past 64 KiB", limitErr("key"), func(e *env) error { _, err := e.st.Get(e.sf, e.hugeKey, nil); return err })
	add("Get/snapshot of another database", is(storage.ErrForeignSnapshot, "snapshot"), func(e *env) error { _, err := e.st.Get(e.sf, k, e.otherSnap); return err })
	add("Get/released snapshot", is(storage.ErrReleased, "released"), func(e *env) error { _, err := e.st.Get(e.sf, k, e.released); return err })
	add("Get/missing key", is(storage.ErrNotFound, "not found"), func(e *env) error { _, err := e.st.Get(e.sf, []byte("missing"), nil); return err })
	add("Get/dropped family, freed", is(storage.ErrFamilyRetired, `"retired"`), func(e *env) error { _, err := e.st.Get(e.sRetired, []byte("missing"), nil); return err })
	add("Get/closed database", is(storage.ErrClosed, "closed"), func(e *env) error { _, err := e.stClosed.Get(e.sClosedCF, k, nil); return err })

	// Iterators and snapshots.
	newIter := func(db *storage.DB, f *storage.Family, o storage.IterOptions) error {
		it, err := db.NewIterator(f, o)
		if err == nil {
			it.Close()
		}
		return err
	}
	add("NewIterator/nil family", is(storage.ErrColumnFamilyNotFound), func(e *env) error { return newIter(e.st, nil, storage.IterOptions{}) })
	add("NewIterator/family of another database", is(storage.ErrForeignFamily), func(e *env) error { return newIter(e.st, e.sForeign, storage.IterOptions{}) })
	add("NewIterator/released snapshot", is(storage.ErrReleased), func(e *env) error {
		return newIter(e.st, e.sf, storage.IterOptions{Snapshot: e.released})
	})
	add("NewIterator/snapshot of another database", is(storage.ErrForeignSnapshot), func(e *env) error {
		return newIter(e.st, e.sf, storage.IterOptions{Snapshot: e.otherSnap})
	})
	add("NewIterator/closed database", is(storage.ErrClosed), func(e *env) error { return newIter(e.stClosed, e.sClosedCF, storage.IterOptions{}) })
	add("NewIterator/lower above upper is empty", noError, func(e *env) error {
		it, err := e.st.NewIterator(e.sf, storage.IterOptions{Lower: []byte("z"), Upper: []byte("a")})
		if err != nil {
			return err
		}
		defer it.Close()
		if it.First(); it.Valid() {
			return errors.New("found a key")
		}
		return it.Err()
	})
	add("Iterator/used after Close", is(storage.ErrReleased), func(e *env) error {
		it, err := e.st.NewIterator(e.sf, storage.IterOptions{})
		if err != nil {
			return err
		}
		it.Close()
		it.First()
		it.Last()
		it.Next()
		it.Prev()
		it.Seek(k)
		if it.Valid() || it.Key() != nil || it.Value() != nil {
			return errors.New("closed iterator is valid")
		}
		it.Close()
		return it.Err()
	})
	add("NewSnapshot/closed database", is(storage.ErrClosed), func(e *env) error { _, err := e.stClosed.NewSnapshot(); return err })
	add("Snapshot.Release/twice", noError, func(e *env) error {
		e.released.Release()
		var nilSnap *storage.Snapshot
		nilSnap.Release()
		return nil
	})

	// Families.
	for _, name := range []string{"", "a#b", strings.Repeat("f", storage.MaxFamilyNameLen+1)} {
		add(fmt.Sprintf("CreateFamily/%.12q", name), cfgErr("family name"), func(e *env) error { _, err := e.st.CreateFamily(name, storage.FamilyOptions{}); return err })
	}
	add("CreateFamily/bad options", cfgErr("WriteBufferSize"), func(e *env) error {
		_, err := e.st.CreateFamily(e.unique("x"), storage.FamilyOptions{WriteBufferSize: 1})
		return err
	})
	add("CreateFamily/exists", is(storage.ErrColumnFamilyExists, "sf"), func(e *env) error { _, err := e.st.CreateFamily("sf", storage.FamilyOptions{}); return err })
	add("CreateFamily/closed database", is(storage.ErrClosed), func(e *env) error { _, err := e.stClosed.CreateFamily("x", storage.FamilyOptions{}); return err })
	add("DropFamily/default", cfgErr("family name"), func(e *env) error { return e.st.DropFamily(storage.DefaultFamily) })
	add("DropFamily/meta", cfgErr("family name"), func(e *env) error { return e.st.DropFamily(storage.MetaFamily) })
	add("DropFamily/missing", is(storage.ErrColumnFamilyNotFound, "nope"), func(e *env) error { return e.st.DropFamily("nope") })
	add("DropFamily/dropped", is(storage.ErrColumnFamilyNotFound, "retired"), func(e *env) error { return e.st.DropFamily("retired") })
	add("DropFamily/closed database", is(storage.ErrClosed), func(e *env) error { return e.stClosed.DropFamily("sf") })
	add("Family/missing", is(storage.ErrColumnFamilyNotFound, "nope"), func(e *env) error { _, err := e.st.Family("nope"); return err })
	add("Family/empty name", is(storage.ErrColumnFamilyNotFound), func(e *env) error { _, err := e.st.Family(""); return err })
	add("Family/closed database", is(storage.ErrClosed), func(e *env) error { _, err := e.stClosed.Family("sf"); return err })
	add("Families/closed database", is(storage.ErrClosed), func(e *env) error { _, err := e.stClosed.Families(); return err })
	add("Default/closed database is nil", noError, func(e *env) error {
		if f := e.stClosed.Default(); f != nil {
			return fmt.Errorf("Default after Close = %v, want nil", f.Name())
		}
		return nil
	})
	add("Family.Claim/dropped family", is(storage.ErrFamilyRetired, "retired"), func(e *env) error { return e.sRetired.Claim() })
	add("DeleteRange/nil family", is(storage.ErrColumnFamilyNotFound), func(e *env) error { return e.st.DeleteRange(nil, k, v) })
	add("DeleteRange/family of another database", is(storage.ErrForeignFamily), func(e *env) error { return e.st.DeleteRange(e.sForeign, k, v) })
	add("DeleteRange/dropped family", is(storage.ErrFamilyRetired, "retired"), func(e *env) error { return e.st.DeleteRange(e.sRetired, k, v) })
	add("DeleteRange/end before start", cfgErr("range start"), func(e *env) error { return e.st.DeleteRange(e.sf, []byte("z"), []byte("a")) })
	add("DeleteRange/empty range", noError, func(e *env) error { return e.st.DeleteRange(e.sf, []byte("a"), []byte("a")) })
	add("DeleteRange/closed database", is(storage.ErrClosed), func(e *env) error { return e.stClosed.DeleteRange(e.sClosedCF, k, v) })

	// Whole-database calls.
	add("Checkpoint/dir exists", cfgErr("checkpoint dir"), func(e *env) error { return e.st.Checkpoint(e.dir) })
	add("Checkpoint/empty dir", cfgErr("checkpoint dir"), func(e *env) error { return e.st.Checkpoint("") })
	add("Checkpoint/closed database", is(storage.ErrClosed), func(e *env) error { return e.stClosed.Checkpoint(e.path("cp")) })
	add("Stats/closed database", is(storage.ErrClosed), func(e *env) error { _, err := e.stClosed.Stats(); return err })
	add("Flush/closed database", is(storage.ErrClosed), func(e *env) error { return e.stClosed.Flush() })
	add("Close/twice", noError, func(e *env) error {
		_ = e.stClosed.Dir()
		_ = e.sClosedCF.Name()
		return e.stClosed.Close()
	})
	return cs
}
