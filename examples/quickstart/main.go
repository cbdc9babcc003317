// Command quickstart opens a rockline database in a temporary folder, runs concurrent
// read-modify-write transactions through the commit lanes, shows a conflict being
// detected, and prints what it did and the storage statistics.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rockline/rockline/pipeline"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "rockline-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	counters, err := db.EnsureColumnFamily("counters")
	if err != nil {
		return err
	}
	fmt.Printf("opened %s (validation %s, bucket pool %d KiB)\n", dir, db.Policy(), db.BucketPoolBytes()>>10)

	// 8 workers increment one shared counter 250 times each; conflicts are retried.
	ctx := context.Background()
	var attempts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				err := db.Update(ctx, func(tx *pipeline.Txn) error {
					attempts.Add(1)
					n, err := readCounter(tx, counters)
					if err != nil {
						return err
					}
					return tx.Put(counters, []byte("hits"), binary.BigEndian.AppendUint64(nil, n+1))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	var hits uint64
	if err := db.View(func(tx *pipeline.Txn) (err error) { hits, err = readCounter(tx, counters); return err }); err != nil {
		return err
	}
	fmt.Printf("2000 increments from 8 goroutines: counter=%d, attempts=%d (%d retried after a conflict)\n",
		hits, attempts.Load(), attempts.Load()-2000)

	// Two transactions read the same key; the second to commit loses.
	a, b := db.Begin(), db.Begin()
	_, _ = readCounter(a, counters)
	_, _ = readCounter(b, counters)
	_ = a.Put(counters, []byte("hits"), binary.BigEndian.AppendUint64(nil, 0))
	_ = b.Put(counters, []byte("hits"), binary.BigEndian.AppendUint64(nil, 1))
	fmt.Println("first commit:", errString(a.Commit(ctx)))
	err = b.Commit(ctx)
	fmt.Println("second commit:", errString(err), "- is ErrConflict:", errors.Is(err, pipeline.ErrConflict))
	fmt.Println("last log position:", db.LastPosition())

	st, err := db.StorageStats()
	if err != nil {
		return err
	}
	fmt.Printf("storage: write stopped=%v, bytes written=%d, flushed=%d, compacted=%d\n",
		st.WriteStopped, st.BytesWritten, st.BytesFlushed, st.BytesCompacted)
	for _, f := range st.Families {
		fmt.Printf("  family %-14s memtable=%6d B  immutable=%d  L0 files=%d  buffer=%d MiB x %d\n",
			f.Name, f.MemtableBytes, f.ImmutableMemtables, f.L0Files, f.WriteBufferSize>>20, f.MaxWriteBufferNumber)
	}
	return db.Close()
}

func readCounter(tx *pipeline.Txn, cf *pipeline.ColumnFamily) (uint64, error) {
	v, err := tx.Get(cf, []byte("hits"))
	if errors.Is(err, pipeline.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("counter holds %d bytes, want 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
