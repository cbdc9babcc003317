package storage

import (
	"bytes"
	"fmt"

	"github.com/linxGnu/grocksdb"
)

// SSTWriter writes one SST file for IngestExternalFiles: the fast way to bulk-load a
// family (no memtable, no WAL, no compaction: the file is built sorted and linked into
// the tree as it is). It builds the file with the table settings Open would give the
// family (block cache aside): the bloom filter of Options.BloomBitsPerKey and the
// family's compression (the bottommost compression, as RocksDB's SstFileWriter does,
// since an ingested file into an empty range lands on the bottommost level).
//
// Keys must be added in strictly increasing byte order; an SSTWriter is not safe for
// concurrent use. Finish completes the file; Close frees the native writer and must
// always be called (after Finish, or instead of it to abandon the file).
type SSTWriter struct {
	w       *grocksdb.SSTFileWriter
	env     *grocksdb.EnvOptions
	opts    *grocksdb.Options
	bbto    *grocksdb.BlockBasedTableOptions
	path    string
	last    []byte
	entries int
	done    bool
}

// NewSSTWriter creates the file at path (which must not be open elsewhere) for a
// family with the options fo in a database opened with opts. Options are validated
// first; a bad one returns a *ConfigError and creates nothing.
func NewSSTWriter(path string, opts Options, fo FamilyOptions) (*SSTWriter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := fo.Validate(); err != nil {
		return nil, err
	}
	opts, fo = opts.withDefaults(), fo.withDefaults()
	w := &SSTWriter{path: path, env: grocksdb.NewDefaultEnvOptions(), opts: grocksdb.NewDefaultOptions()}
	w.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	if opts.BloomBitsPerKey > 0 {
		w.bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(opts.BloomBitsPerKey))
	}
	w.opts.SetBlockBasedTableFactory(w.bbto)
	w.opts.SetCompression(compressions[fo.Compression])
	w.opts.SetBottommostCompression(compressions[fo.BottommostCompression])
	w.w = grocksdb.NewSSTFileWriter(w.env, w.opts)
	if err := w.w.Open(path); err != nil {
		w.Close()
		return nil, mapError("create SST file "+path, err)
	}
	return w, nil
}

// Put adds key with value. key must sort strictly after the previous key: an
// out-of-order or repeated key fails with a *ConfigError naming "SST key order" and
// writes nothing. Sizes are limited as for a Batch (MaxKeySize, MaxValueSize).
func (w *SSTWriter) Put(key, value []byte) error {
	if w.done {
		return fmt.Errorf("rockline: put to SST file %s after Finish or Close: %w", w.path, ErrInvalidConfig)
	}
	if len(key) > MaxKeySize {
		return &LimitError{What: "key", Size: len(key), Limit: MaxKeySize}
	}
	if len(value) > MaxValueSize {
		return &LimitError{What: "value", Size: len(value), Limit: MaxValueSize}
	}
	if w.entries > 0 && bytes.Compare(key, w.last) <= 0 {
		return &ConfigError{Field: "SST key order", Value: key, Expected: fmt.Sprintf("a key after %q", w.last)}
	}
	if err := w.w.Put(key, value); err != nil {
		return mapError("write SST file "+w.path, err)
	}
	w.last = append(w.last[:0], key...)
	w.entries++
	return nil
}

// Entries returns how many keys have been added.
func (w *SSTWriter) Entries() int { return w.entries }

// Finish writes the file's index, filter and footer and closes it. A file with no key
// cannot be finished (RocksDB refuses it): Finish then fails and removes nothing.
func (w *SSTWriter) Finish() error {
	if w.done {
		return fmt.Errorf("rockline: finish SST file %s twice: %w", w.path, ErrInvalidConfig)
	}
	w.done = true
	if w.entries == 0 {
		return fmt.Errorf("rockline: finish SST file %s: no key added: %w", w.path, ErrInvalidConfig)
	}
	return mapError("finish SST file "+w.path, w.w.Finish())
}

// Close frees the native writer. It is idempotent; the file (finished or not) stays.
func (w *SSTWriter) Close() {
	w.done = true
	if w.w != nil {
		w.w.Destroy()
		w.w = nil
	}
	if w.opts != nil {
		w.opts.Destroy()
		w.opts = nil
	}
	if w.bbto != nil {
		w.bbto.Destroy()
		w.bbto = nil
	}
	if w.env != nil {
		w.env.Destroy()
		w.env = nil
	}
}

// IngestOptions tune IngestExternalFiles.
type IngestOptions struct {
	// Move hard-links each file into the database and removes the original name once
	// the ingestion succeeded (RocksDB's move_files), instead of copying it: instant,
	// but the files must be on the database's filesystem. Link a file under another
	// name first to keep it.
	Move bool
}

// IngestExternalFiles adds the SST files at paths (written by SSTWriter) to family f
// in one atomic step: every key of every file becomes visible at once, newer than
// everything written before, and survives a crash as soon as the call returns (the
// files and the MANIFEST are synced). Files must not overlap each other. A family
// whose memtable overlaps the files is flushed first.
//
// The ingested keys bypass rockline's log (this is the storage layer, below the
// commit path): a bulk load, not a commit. It fails with ErrReadOnly on a read-only
// database and names the family and RocksDB's reason otherwise.
func (db *DB) IngestExternalFiles(f *Family, paths []string, o IngestOptions) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := db.check(f); err != nil {
		return err
	}
	if len(paths) == 0 {
		return &ConfigError{Field: "ingest paths", Value: paths, Expected: "at least one SST file"}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	h, err := f.pin("ingest")
	if err != nil {
		return err
	}
	defer f.unpin()
	if f.physicallyDropped() {
		return fmt.Errorf("rockline: ingest into dropped family %q: %w", f.name, errRetired)
	}
	io := grocksdb.NewDefaultIngestExternalFileOptions()
	defer io.Destroy()
	io.SetMoveFiles(o.Move)
	err = db.native.IngestExternalFileCF(h, paths, io)
	return mapError(fmt.Sprintf("ingest %d SST files into %q", len(paths), f.name), err)
}
