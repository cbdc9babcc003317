package main

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// ---- badger-v4: Badger's own optimistic transactions (an LSM with a value log, in Go) ----
//
// Options are Badger's defaults (64 MiB memtables, like RocksDB's default write buffer)
// except the block cache, set to the 8 MiB the RocksDB engines get, and no logger.
// Badger has no column families: data keys and log records live under the prefixes
// 'd' and 'l' of one keyspace. Badger cannot run without its write-ahead log, so it
// is left out of the WAL-off scenario. SyncWrites follows --sync.

const kindBadger = "badger-v4"

type badgerEngine struct {
	db *badger.DB
	logRecords
}

func openBadger(dir string, o openOpts) (*badgerEngine, error) {
	if o.DisableWAL {
		return nil, errors.New("badger-v4 cannot disable its write-ahead log")
	}
	opts := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithBlockCacheSize(8 << 20).
		WithSyncWrites(o.Sync)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, err
	}
	return &badgerEngine{db: db}, nil
}

func (e *badgerEngine) begin() txn {
	return &badgerTxn{e: e, tx: e.db.NewTransaction(true), log: e.newLog()}
}

func (e *badgerEngine) validates() bool             { return true }
func (e *badgerEngine) spansExported() int64        { return -1 }
func (e *badgerEngine) stats() (engineStats, error) { return engineStats{}, nil } // not RocksDB
func (e *badgerEngine) close() error                { return e.db.Close() }

type badgerTxn struct {
	e   *badgerEngine
	tx  *badger.Txn
	log *logBuffer
}

func dataKey(key []byte) []byte { return append([]byte{'d'}, key...) }

func (t *badgerTxn) get(key []byte) ([]byte, error) {
	item, err := t.tx.Get(dataKey(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// put hands Badger its own copies: a Badger transaction keeps the slices until commit.
func (t *badgerTxn) put(key, value []byte) error {
	t.log.add(key, value)
	return t.tx.Set(dataKey(key), append([]byte(nil), value...))
}

func (t *badgerTxn) commit(bool) error {
	defer t.discard()
	if t.log.n > 0 {
		k, v := t.e.record(t.log)
		if err := t.tx.Set(append([]byte{'l'}, k...), v); err != nil {
			return err
		}
	}
	err := t.tx.Commit()
	if errors.Is(err, badger.ErrConflict) {
		return fmt.Errorf("%w: %w", errConflict, err)
	}
	return err
}

func (t *badgerTxn) discard() {
	if t.tx == nil {
		return
	}
	t.tx.Discard()
	t.e.bufs.Put(t.log)
	t.tx, t.log = nil, nil
}
