package pipeline

import (
	"context"
	"errors"

	"github.com/rockline/rockline/storage"
)

// LayerFamily is Engine.LayerFamily: the layer family named full, created when
// missing (its creation is not a log entry).
func (db *localDB) LayerFamily(_ context.Context, full string) (EngineFamily, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	f, err := db.layerFamily(full)
	if err != nil {
		return nil, closedErr(err)
	}
	return f, nil
}

// layerFamily returns the layer family named full, creating it if needed; a concurrent
// creation (another LayerFamily call, a Replay) is not an error.
func (db *localDB) layerFamily(full string) (*storage.Family, error) {
	f, err := db.store.Family(full)
	if !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		return f, err
	}
	f, err = db.store.CreateFamily(full, db.familyOptions(full))
	if errors.Is(err, storage.ErrColumnFamilyExists) {
		return db.store.Family(full)
	}
	return f, err
}

// metaFormat records the layout of rockline's own families the folder is written in:
// absent in folders written before rockline.system existed, whose settings and family
// markers lived in the event store's family; formatSystemFamily since.
var metaFormat = []byte("mformat")

const (
	formatSystemFamily = 1
	// legacyFamily is the family that held the settings before formatSystemFamily.
	legacyFamily = "rockline.streams"
)

// upgradeFormat, at Open, moves the settings and family markers of a folder written
// before the system family existed into it, in one batch with the format record, so
// a crash leaves either the old layout or the new one. The event store's own records
// in the old family ('h' and 'r' keys) stay where they are: the event store still
// keeps them there.
func (db *localDB) upgradeFormat() error {
	format, err := db.metaUint(metaFormat)
	if err != nil || format >= formatSystemFamily {
		return err
	}
	b := storage.NewBatch()
	if old, err := db.store.Family(legacyFamily); err == nil {
		it, err := db.store.NewIterator(old, storage.IterOptions{Lower: []byte("m"), Upper: []byte("n")})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			k, v, err := it.Item()
			if err == nil {
				err = errors.Join(b.Put(db.sys, k, v), b.Delete(old, k))
			}
			if err != nil {
				it.Close()
				return err
			}
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return err
		}
	} else if !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		return err
	}
	if err := b.Put(db.sys, metaFormat, []byte{formatSystemFamily}); err != nil {
		return err
	}
	return db.store.Write(b)
}
