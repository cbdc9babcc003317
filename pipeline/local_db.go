package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/lanes"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
	"github.com/rockline/rockline/validators"
)

// logFamily holds the commit log: one entry per position, big-endian position keys.
const logFamily = "rockline.log"

// systemFamily holds rockline's own records: settings (truncation, checkpoints, the
// folder's format) and the family markers.
//
//	'm' name                   -> a setting (see retention.go, layers.go)
//	"mfamily/" qualified name  -> 1: the family generation's creation is in the log
const systemFamily = "rockline.system"

// localDB is the local engine: a RocksDB database, its commit lanes, its validator
// and its log. Open, OpenReadOnly and OpenSecondary put it behind a DB.
//
// Invariants:
//   - closing goes false->true once (Close); after it, Begin, commits and family
//     changes fail with ErrClosed.
//   - Close closes the lanes first (they drain, running every queued commit), then
//     takes gate for writing (waiting for CommitInline calls and family changes in
//     progress), then closes storage. So no commit runs against closed storage.
//   - Every position the validator assigns is published or the database is stopped.
//   - Close drains the sequencer (every written position synced and published, or the
//     database stopped) after the last writer left and before storage closes, so no
//     fsync runs against freed handles.
type localDB struct {
	cfg   Config
	store *storage.DB
	log   *storage.Family
	sys   *storage.Family // see systemFamily
	// truncated is the first log position kept after TruncateLog (0: nothing cut).
	truncated atomic.Uint64
	seq       *sequencer
	// writeCommit writes a group of commits or fillers (validators.Env.Write): storage's
	// Write, or WriteUnsynced under Config.Sync, whose fsync the sequencer runs.
	writeCommit func(*storage.Batch) error
	val         validators.Validator
	lanes       *lanes.Lanes[*commitRecord]
	fp          validators.Fingerprinter
	tracer      trace.Tracer

	closeGate               // held for reading by CommitInline and family changes, for writing by Close
	done      chan struct{} // closed when Close begins: waits and subscriptions end

	metrics *metrics
	// front is the DB over the engine (attach), which Checks see.
	front *DB

	// familyMu serialises family creation and drop, each a storage change plus its log
	// entry, so the log orders them as they happened.
	familyMu sync.Mutex
	// truncMu serialises TruncateLog.
	truncMu sync.Mutex
	// catchMu serialises CatchUp.
	catchMu sync.Mutex
}

var _ Engine = (*localDB)(nil)

// Open opens (or creates) the database in dir. The whole Config is validated before
// anything is created: a bad field returns a *ConfigError and leaves no file behind.
// Open repairs what a crash can leave: a log position whose commit never landed is
// filled, so the log is dense.
func Open(dir string, cfg Config) (*DB, error) {
	return openFront(dir, cfg, openMode{createFamilies: true})
}

// openFront opens the local engine and puts the front over it.
func openFront(dir string, cfg Config, mode openMode) (*DB, error) {
	e, err := open(dir, cfg, mode)
	if err != nil {
		return nil, err
	}
	return newFront(e, e.cfg)
}

// openMode says how open opens: createFamilies false leaves the families Config names
// uncreated (for Rebuild, where the log creates them); readOnly opens for reading only
// (OpenReadOnly), as a secondary with its files in secondary (OpenSecondary).
type openMode struct {
	createFamilies bool
	readOnly       bool
	secondary      string
}

// open opens the local engine for Open, OpenReadOnly, OpenSecondary and Rebuild.
func open(dir string, cfg Config, mode openMode) (*localDB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	so := cfg.storageOptions()
	if !mode.createFamilies || mode.readOnly {
		for n := range cfg.Families {
			delete(so.Families, n)
		}
	}
	so.ReadOnly, so.Secondary = mode.readOnly, mode.secondary
	st, err := storage.Open(dir, so)
	if err != nil {
		return nil, closedErr(err)
	}
	db := &localDB{cfg: cfg, done: make(chan struct{})}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	db.tracer = tp.Tracer(tracing.ScopeName)
	db.store, db.fp = st, validators.NewFingerprinter()
	if db.log, err = st.Family(logFamily); err != nil {
		st.Close()
		return nil, err
	}
	if db.sys, err = st.Family(systemFamily); err != nil {
		st.Close()
		if mode.readOnly {
			err = fmt.Errorf("rockline: open %s read-only: written by an older rockline; open it writable once to upgrade it: %w", dir, err)
		}
		return nil, err
	}
	if !mode.readOnly {
		if err := db.upgradeFormat(); err != nil {
			st.Close()
			return nil, err
		}
		if err := db.recordSettings(cfg); err != nil {
			st.Close()
			return nil, err
		}
	}
	if err := db.loadTruncation(); err != nil {
		st.Close()
		return nil, err
	}
	last, err := recoverLog(st, db.log, db.truncated.Load(), !mode.readOnly)
	if err != nil {
		st.Close()
		return nil, err
	}
	var sync func() error
	if cfg.Sync && !cfg.DisableWAL && !mode.readOnly {
		// Commits are written without an fsync and published after one (sequencer).
		db.writeCommit, sync = st.WriteUnsynced, st.SyncWAL
	} else {
		db.writeCommit = st.Write
	}
	db.seq = newSequencer(last, sync)
	if sync != nil {
		// Transactions read a view taken before each fsync, so never an unsynced commit.
		initial, err := st.NewSnapshot()
		if err != nil {
			st.Close()
			return nil, closedErr(err)
		}
		db.seq.useViews(st.NewSnapshot, initial)
	}
	vo := validators.Options{Buckets: cfg.Buckets, Checks: db.validatorChecks()}
	if cfg.Validator != nil {
		db.val, err = cfg.Validator(db.validatorEnv(), vo)
		if err != nil {
			err = fmt.Errorf("rockline: Config.Validator: %w", err)
		} else if db.val == nil {
			err = &ConfigError{Field: "Validator", Value: "a nil validator", Expected: "a validators.Validator"}
		}
	} else {
		db.val, err = validators.New(cfg.Validation, db.validatorEnv(), vo)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	if db.metrics, err = newMetrics(cfg.MeterProvider, db.val.Policy()); err != nil {
		st.Close()
		return nil, fmt.Errorf("rockline: metrics: %w", err)
	}
	db.lanes, err = lanes.NewBatched(cfg.Lanes, cfg.LaneQueueDepth, maxLaneBatch, db.runTasks)
	if err != nil {
		st.Close()
		return nil, err
	}
	if !mode.readOnly {
		if err := db.reconcileFamilies(); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// Close is Engine.Close: it stops admitting commits, lets every queued and running
// commit finish, and frees every native handle. Later calls return nil.
func (db *localDB) Close() error {
	if db.closing.Swap(true) {
		return nil
	}
	close(db.done)
	db.lanes.Close()
	db.gate.Lock() // closing is set: no enter succeeds from now on
	defer db.gate.Unlock()
	// Nothing writes now; publish what is written (Config.Sync: its fsync), so that no
	// committer's fsync is in flight, or starts, when storage frees its handles.
	syncErr := db.seq.Drain()
	db.seq.CloseView()
	return errors.Join(syncErr, db.store.Close())
}

// Name is Engine.Name: the validation policy ("parallel" or "serial").
func (db *localDB) Name() string { return db.val.Policy() }

// attach records the DB the front put over the engine.
func (db *localDB) attach(front *DB) { db.front = front }

// commitMetrics hands the front the instruments the engine records its stages in.
func (db *localDB) commitMetrics() *metrics { return db.metrics }

// PoolBytes returns the memory of the validator's lock pool (0 under serial).
func (db *localDB) PoolBytes() int { return db.val.PoolBytes() }

// LastPosition is Engine.LastPosition: the highest published log position.
func (db *localDB) LastPosition(context.Context) (uint64, error) { return db.seq.Published(), nil }

// StorageStats is DB.StorageStats on the local engine.
func (db *localDB) StorageStats() (storage.Stats, error) {
	s, err := db.store.Stats()
	return s, closedErr(err)
}

// recoverLog returns the last log position after filling any gap a crash left above
// the dense watermark; without fill (a read-only open) it returns the position below
// the first gap and writes nothing.
func recoverLog(st *storage.DB, log *storage.Family, truncated uint64, fill bool) (uint64, error) {
	dense := uint64(0)
	if truncated > 0 {
		dense = truncated - 1
	}
	if v, err := st.Get(log, validators.DenseKey, nil); err == nil {
		if d, n := binary.Uvarint(v); n > 0 {
			dense = max(dense, d)
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return 0, err
	}
	it, err := st.NewIterator(log, storage.IterOptions{Lower: logentry.Key(dense + 1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	last := dense
	fillers := storage.NewBatch()
	for it.First(); it.Valid(); it.Next() {
		p, err := logentry.ParseKey(it.Key())
		if err != nil {
			return 0, fmt.Errorf("rockline: recover log: %w", err)
		}
		if p > last+1 && !fill {
			break // a read-only view ends at the first gap
		}
		for q := last + 1; q < p; q++ {
			if err := fillers.Put(log, logentry.Key(q), appendFiller(nil, q)); err != nil {
				return 0, err
			}
		}
		last = p
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	if fillers.Count() > 0 {
		if err := st.Write(fillers); err != nil {
			return 0, fmt.Errorf("rockline: fill log gaps: %w", err)
		}
	}
	return last, nil
}

func appendFiller(dst []byte, pos uint64) []byte {
	return logentry.Append(dst, &logentry.Entry{Position: pos, Filler: true})
}
