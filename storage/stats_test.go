package storage_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/internal/storagefaults"
	"github.com/rockline/rockline/storage"
)

func familyStats(t testing.TB, s storage.Stats, name string) storage.FamilyStats {
	t.Helper()
	for _, fs := range s.Families {
		if fs.Name == name {
			return fs
		}
	}
	t.Fatalf("no stats for family %q in %+v", name, s.Families)
	return storage.FamilyStats{}
}

func TestStatsShowFlushes(t *testing.T) {
	hot := storage.FamilyOptions{WriteBufferSize: 1 << 20, MaxWriteBufferNumber: 2}
	db := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"hot": hot}})
	f := mustFamily(t, db, "hot")

	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		Name                 string
		WriteBufferSize      int64
		MaxWriteBufferNumber int
	}
	var got []config
	for _, fs := range s.Families {
		got = append(got, config{fs.Name, fs.WriteBufferSize, fs.MaxWriteBufferNumber})
	}
	want := []config{
		{"default", storage.DefaultWriteBufferSize, storage.DefaultMaxWriteBufferNumber},
		{"hot", 1 << 20, 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("configured sizes in Stats (-want +got):\n%s", diff)
	}
	if s.BytesFlushed != 0 || s.WriteStopped {
		t.Fatalf("fresh database: BytesFlushed %d, WriteStopped %v", s.BytesFlushed, s.WriteStopped)
	}

	// ~100 KiB of incompressible values per batch until a flush has happened and the
	// family has been seen holding an immutable memtable or an L0 file.
	rng := rand.NewChaCha8([32]byte{1})
	const (
		valuesPerBatch = 10
		valueSize      = 10 << 10
		maxBatches     = 2000 // 200 MiB
	)
	value := make([]byte, valueSize)
	key := make([]byte, 8)
	deadline := time.Now().Add(30 * time.Second)
	var sawPressure, sawMemtable bool
	var last storage.Stats
	for i := 0; ; i++ {
		if i == maxBatches || time.Now().After(deadline) {
			t.Fatalf("after %d batches: BytesFlushed %d, saw immutable memtable or L0 file: %v; last stats %+v",
				i, last.BytesFlushed, sawPressure, last)
		}
		b := storage.NewBatch()
		for j := range valuesPerBatch {
			binary.BigEndian.PutUint64(key, uint64(i*valuesPerBatch+j))
			rng.Read(value)
			if err := b.Put(f, key, value); err != nil {
				t.Fatal(err)
			}
		}
		mustWrite(t, db, b)
		last, err = db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		fs := familyStats(t, last, "hot")
		if fs.WriteBufferSize != 1<<20 || fs.MaxWriteBufferNumber != 2 {
			t.Fatalf("hot stats carry %d/%d, want 1 MiB/2", fs.WriteBufferSize, fs.MaxWriteBufferNumber)
		}
		if last.ImmutableMemtable < fs.ImmutableMemtables {
			t.Fatalf("database ImmutableMemtable %d < family's %d", last.ImmutableMemtable, fs.ImmutableMemtables)
		}
		sawMemtable = sawMemtable || fs.MemtableBytes > 0
		sawPressure = sawPressure || fs.ImmutableMemtables > 0 || fs.L0Files > 0
		if last.BytesFlushed > 0 && sawPressure {
			break
		}
	}
	if !sawMemtable {
		t.Error("MemtableBytes never above 0")
	}
	if last.BytesWritten < valuesPerBatch*valueSize {
		t.Errorf("BytesWritten = %d, want at least one batch's worth", last.BytesWritten)
	}

	// An explicit flush leaves nothing in the family's memtables but a file behind.
	if err := db.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	after, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if fs := familyStats(t, after, "hot"); fs.ImmutableMemtables != 0 {
		t.Errorf("after Flush: %d immutable memtables", fs.ImmutableMemtables)
	}
	if after.BytesFlushed < last.BytesFlushed {
		t.Errorf("BytesFlushed went down: %d -> %d", last.BytesFlushed, after.BytesFlushed)
	}
}

// TestStatsCountWALSyncs: with Options.Sync every write syncs the WAL and WALSyncs
// counts it; without, writes sync nothing.
func TestStatsCountWALSyncs(t *testing.T) {
	for _, sync := range []bool{false, true} {
		db := openDB(t, storage.Options{Sync: sync})
		f := mustFamily(t, db, storage.DefaultFamily)
		before, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			b := storage.NewBatch()
			if err := b.Put(f, []byte{byte(i)}, []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := db.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		after, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if sync {
			want = 5
		}
		if got := after.WALSyncs - before.WALSyncs; got != want {
			t.Errorf("Sync=%v: %d WAL syncs for 5 writes, want %d", sync, got, want)
		}
	}
}

// TestSyncWAL: with Options.Sync, WriteUnsynced syncs nothing and SyncWAL syncs once,
// covering it. A failed sync fails every later one with ErrWALFailed without trying
// again (after a failed fsync a retry proves nothing), and Close still succeeds: it
// skips its own WAL sync.
func TestSyncWAL(t *testing.T) {
	var failSync atomic.Bool
	var syncCalls atomic.Int64
	faults := &storagefaults.Faults{Sync: func() error {
		syncCalls.Add(1)
		if failSync.Load() {
			return errors.New("injected: fsync failed")
		}
		return nil
	}}
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storagefaults.With(storage.Options{Sync: true}, faults))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := mustFamily(t, db, storage.DefaultFamily)
	syncs := func() uint64 {
		s, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s.WALSyncs
	}
	before := syncs()
	for i := range 3 {
		b := storage.NewBatch()
		if err := b.Put(f, []byte{byte(i)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := db.WriteUnsynced(b); err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs() - before; got != 0 {
		t.Fatalf("WriteUnsynced synced the WAL %d times", got)
	}
	if err := db.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	if got := syncs() - before; got != 1 {
		t.Fatalf("SyncWAL: %d WAL syncs, want 1", got)
	}

	failSync.Store(true)
	if err := db.SyncWAL(); err == nil {
		t.Fatal("SyncWAL succeeded with a failing fsync")
	}
	failSync.Store(false)
	calls := syncCalls.Load()
	if err := db.SyncWAL(); !errors.Is(err, storage.ErrWALFailed) {
		t.Fatalf("SyncWAL after a failed one: err = %v, want ErrWALFailed", err)
	}
	if syncCalls.Load() != calls {
		t.Fatal("SyncWAL tried again after a failed fsync")
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close after a failed fsync: %v", err)
	}
}
