package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rockline/rockline/storage"
)

// FolderSettings are the settings a database was opened with, as its folder records
// them: at creation and at its latest writable open (rockline.system keys msettings/
// created and msettings/opened). They describe; Open does not enforce them (a folder
// can be reopened with other settings, and the validation policy can change).
type FolderSettings struct {
	Validation      string    `json:"validation"`
	Lanes           int       `json:"lanes"`
	Buckets         int       `json:"buckets"`
	Sync            bool      `json:"sync"`
	DisableWAL      bool      `json:"disable_wal"`
	BloomBitsPerKey float64   `json:"bloom_bits_per_key"` // 0: no bloom filter
	At              time.Time `json:"at"`
}

var (
	metaCreatedWith = []byte("msettings/created")
	metaOpenedWith  = []byte("msettings/opened")
)

// recordSettings writes the settings of this writable open, and of the creation when
// the folder has none recorded yet (a folder created before they were, too).
func (db *localDB) recordSettings(cfg Config) error {
	bloom := cfg.BloomBitsPerKey
	switch {
	case bloom == 0:
		bloom = storage.DefaultBloomBitsPerKey
	case bloom < 0:
		bloom = 0 // no filter
	}
	fs := FolderSettings{Validation: cfg.Validation, Lanes: cfg.Lanes, Buckets: cfg.Buckets, Sync: cfg.Sync,
		DisableWAL: cfg.DisableWAL, BloomBitsPerKey: bloom, At: time.Now().UTC()}
	v, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	b := storage.NewBatch()
	if _, err := db.store.Get(db.sys, metaCreatedWith, nil); errors.Is(err, storage.ErrNotFound) {
		if err := b.Put(db.sys, metaCreatedWith, v); err != nil {
			return err
		}
	} else if err != nil {
		return closedErr(err)
	}
	if err := b.Put(db.sys, metaOpenedWith, v); err != nil {
		return err
	}
	return closedErr(db.store.Write(b))
}

// RecordedSettings is DB.RecordedSettings on the local engine.
func (db *localDB) RecordedSettings() (created, lastOpened FolderSettings, err error) {
	if err := db.enter(); err != nil {
		return created, lastOpened, err
	}
	defer db.leave()
	if created, err = db.readSettings(metaCreatedWith); err != nil {
		return created, lastOpened, err
	}
	lastOpened, err = db.readSettings(metaOpenedWith)
	return created, lastOpened, err
}

func (db *localDB) readSettings(key []byte) (FolderSettings, error) {
	var fs FolderSettings
	v, err := db.store.Get(db.sys, key, nil)
	if errors.Is(err, storage.ErrNotFound) {
		return fs, nil
	}
	if err != nil {
		return fs, closedErr(err)
	}
	if err := decodeSettings(v, &fs); err != nil {
		return FolderSettings{}, fmt.Errorf("%w: %s holds %q: %w", ErrCorrupt, key, v, err)
	}
	return fs, nil
}

// decodeSettings parses a settings record strictly: unknown fields are refused.
func decodeSettings(v []byte, fs *FolderSettings) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(fs); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// CheckpointedPosition is DB.CheckpointedPosition on the local engine.
func (db *localDB) CheckpointedPosition() (uint64, error) {
	if err := db.enter(); err != nil {
		return 0, err
	}
	defer db.leave()
	return db.metaUint(metaCheckpointed)
}
