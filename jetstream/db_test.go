package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/partitioned"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/tracing"
)

// openDB opens a *pipeline.DB on a fresh 3-replica partition and closes it at the end
// of the test.
func openDB(t *testing.T, cfg pipeline.Config) *pipeline.DB {
	t.Helper()
	n := streamSeq.Add(1)
	pc := jetstream.Config{Stream: fmt.Sprintf("RL_db_%d", n), Subject: fmt.Sprintf("rl.db.%d", n), Replicas: 3}
	db, err := jetstream.OpenDB(ctxT(t), connect(t, 0), pc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func put(t *testing.T, db *pipeline.DB, cf *pipeline.ColumnFamily, kv ...string) uint64 {
	t.Helper()
	pos, err := db.UpdatePosition(ctxT(t), func(tx *pipeline.Txn) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Put(cf, []byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// TestDBNotSupported: what the JetStream engine does not offer fails with a
// *pipeline.NotSupportedError naming the call, and changes nothing.
func TestDBNotSupported(t *testing.T) {
	db := openDB(t, pipeline.Config{})
	ctx := ctxT(t)
	calls := map[string]func() error{
		"DB.Checkpoint":           func() error { _, err := db.Checkpoint(t.TempDir()); return err },
		"DB.CompactRange":         func() error { return db.CompactRange(db.Default(), nil, nil) },
		"DB.CompactAll":           func() error { return db.CompactAll(nil) },
		"DB.Verify":               func() error { _, err := db.Verify(ctx, pipeline.VerifyOptions{}); return err },
		"DB.StorageStats":         func() error { _, err := db.StorageStats(); return err },
		"DB.Replay":               func() error { return db.Replay(ctx, nil) },
		"DB.Rebuild":              func() error { _, err := db.Rebuild(ctx, t.TempDir(), pipeline.Config{}); return err },
		"DB.CatchUp":              db.CatchUp,
		"DB.RecordedSettings":     func() error { _, _, err := db.RecordedSettings(); return err },
		"DB.CheckpointedPosition": func() error { _, err := db.CheckpointedPosition(); return err },
		"Txn.DeleteRange": func() error {
			return db.Update(ctx, func(tx *pipeline.Txn) error { return tx.DeleteRange(db.Default(), []byte("a"), []byte("z")) })
		},
		"Txn.PutKeyAtCommit": func() error {
			return db.Update(ctx, func(tx *pipeline.Txn) error {
				return tx.PutKeyAtCommit(db.Default(), pipeline.NewPositionedValue("test.key", func(dst []byte, _ uint64, p []byte) []byte { return append(dst, p...) }), []byte("k"), nil)
			})
		},
	}
	for op, call := range calls {
		err := call()
		var ns *pipeline.NotSupportedError
		if !errors.As(err, &ns) || ns.Op != op || ns.Engine != jetstream.EngineName || !errors.Is(err, pipeline.ErrNotSupported) {
			t.Errorf("%s = %v; want a *NotSupportedError naming it and the engine", op, err)
		}
	}
	// The event store's indexes need keys made at commit: a Config declaring one is
	// refused the same way, before the store writes anything.
	_, err := eventstore.NewWithConfig(ctx, db, eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex()}})
	var ns *pipeline.NotSupportedError
	if !errors.As(err, &ns) || ns.Op != "Txn.PutKeyAtCommit" {
		t.Errorf("eventstore.NewWithConfig with an index = %v; want a *NotSupportedError naming Txn.PutKeyAtCommit", err)
	}
	if p := db.LastPosition(); p != 0 {
		t.Errorf("LastPosition = %d after refused calls; want 0", p)
	}
}

// TestDBFamilies: the family calls on the JetStream engine behave as on the local
// one: create, list, look up, refuse a live name, drop (the keys go, the name is free
// again), and layer families stay hidden.
func TestDBFamilies(t *testing.T) {
	db := openDB(t, pipeline.Config{})
	cf, err := db.CreateColumnFamily("orders")
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, cf, "a", "1")
	if _, err := db.CreateColumnFamily("orders"); !errors.Is(err, pipeline.ErrColumnFamilyExists) {
		t.Errorf("second CreateColumnFamily = %v; want ErrColumnFamilyExists", err)
	}
	if _, err := db.ColumnFamily("nope"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Errorf("ColumnFamily(nope) = %v; want ErrColumnFamilyNotFound", err)
	}
	if _, err := db.LayerFamily("streams"); err != nil {
		t.Fatal(err)
	}
	names, err := db.ColumnFamilies()
	if err != nil || !cmp.Equal(names, []string{"default", "orders"}) {
		t.Errorf("ColumnFamilies = %v, %v; want [default orders]", names, err)
	}
	if err := db.DropColumnFamily("orders"); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctxT(t), func(tx *pipeline.Txn) error { return tx.Put(cf, []byte("b"), []byte("2")) }); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Errorf("a write through the dropped handle = %v; want ErrColumnFamilyDropped", err)
	}
	if err := db.DropColumnFamily("orders"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Errorf("second drop = %v; want ErrColumnFamilyNotFound", err)
	}
	cf2, err := db.CreateColumnFamily("orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *pipeline.Txn) error {
		_, err := tx.Get(cf2, []byte("a"))
		return err
	}); !errors.Is(err, pipeline.ErrNotFound) {
		t.Errorf("a key of the dropped generation read in the new one: %v; want ErrNotFound", err)
	}
}

// TestDBReadsAndLog: a transaction sees its own writes through Get and an iterator,
// untracked reads do not conflict, and the log readers (Entry, ReadLog, LogIterator)
// return every commit once, in order, with its writes and events.
func TestDBReadsAndLog(t *testing.T) {
	db := openDB(t, pipeline.Config{})
	ctx := ctxT(t)
	cf := db.Default()
	p1 := put(t, db, cf, "a", "1", "c", "3")
	var keys []string
	err := db.Update(ctx, func(tx *pipeline.Txn) error {
		if err := tx.Put(cf, []byte("b"), []byte("2")); err != nil {
			return err
		}
		if err := tx.Delete(cf, []byte("c")); err != nil {
			return err
		}
		it, err := tx.NewIterator(cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			keys = append(keys, string(it.Key())+"="+string(it.Value()))
		}
		if err := it.Err(); err != nil {
			return err
		}
		return tx.AddEvents(pipeline.Event{Type: "noted"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=1", "b=2"}; !cmp.Equal(keys, want) {
		t.Errorf("iterator saw %v; want %v", keys, want)
	}

	// An untracked read of a key another commit changes does not fail the commit.
	tx := db.Begin()
	if v, err := tx.GetUntracked(cf, []byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("GetUntracked = %q, %v", v, err)
	}
	put(t, db, cf, "a", "10")
	if err := tx.Put(cf, []byte("z"), []byte("26")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("commit after an untracked read of a changed key: %v", err)
	}

	entries, err := db.ReadLog(p1, 100)
	if err != nil {
		t.Fatal(err)
	}
	var positions []uint64
	it := db.LogIterator(p1)
	for it.Next() {
		positions = append(positions, it.Entry().Position)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 || len(positions) != 4 || !slices.IsSorted(positions) || positions[0] != p1 {
		t.Fatalf("ReadLog %d entries, LogIterator %v from %d; want 4 commits in order", len(entries), positions, p1)
	}
	e, err := db.Entry(entries[1].Position)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Events) != 1 || e.Events[0].Type != "noted" || len(e.Writes) != 2 || !e.Writes[1].Delete {
		t.Errorf("Entry = %+v; want the event and the put and delete", e)
	}
	if got := db.LastPosition(); got != positions[3] {
		t.Errorf("LastPosition = %d; want %d", got, positions[3])
	}
}

// TestDBSubscribeAndClose: a subscription through the DB delivers every commit in
// order, reports its position, and ends with ErrClosed when the DB closes; a
// WaitForPosition in progress returns ErrClosed too.
func TestDBSubscribeAndClose(t *testing.T) {
	db := openDB(t, pipeline.Config{})
	ctx := ctxT(t)
	got := make(chan uint64, 16)
	sub, err := db.Subscribe(ctx, 0, func(e pipeline.LogEntry) error {
		got <- e.Position
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for i := range 3 {
		want = append(want, put(t, db, db.Default(), fmt.Sprint("k", i), "v"))
	}
	for _, w := range want {
		if p := <-got; p != w {
			t.Fatalf("subscription delivered %d; want %d", p, w)
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- db.WaitForPosition(context.Background(), want[2]+1000) }()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Wait(); !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("subscription ended with %v; want ErrClosed", err)
	}
	if sub.Position() != want[2] {
		t.Errorf("subscription position %d; want %d", sub.Position(), want[2])
	}
	if err := <-waited; !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("WaitForPosition across Close = %v; want ErrClosed", err)
	}
	if _, err := db.Subscribe(ctx, 0, func(pipeline.LogEntry) error { return nil }); !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("Subscribe after Close = %v; want ErrClosed", err)
	}
}

// TestDBTruncate: TruncateLog removes the positions below its argument: FirstPosition
// moves there and reading below fails with ErrLogTruncated.
func TestDBTruncate(t *testing.T) {
	db := openDB(t, pipeline.Config{})
	var pos []uint64
	for i := range 3 {
		pos = append(pos, put(t, db, db.Default(), fmt.Sprint("k", i), "v"))
	}
	if err := db.TruncateLog(pos[2]); err != nil {
		t.Fatal(err)
	}
	if got := db.FirstPosition(); got != pos[2] {
		t.Errorf("FirstPosition = %d; want %d", got, pos[2])
	}
	if _, err := db.ReadLog(pos[0], 10); !errors.Is(err, pipeline.ErrLogTruncated) {
		t.Errorf("ReadLog below the cut = %v; want ErrLogTruncated", err)
	}
	es, err := db.ReadLog(pos[2], 10)
	if err != nil || len(es) != 1 || es[0].Position != pos[2] {
		t.Errorf("ReadLog at the cut = %+v, %v; want the entry at %d", es, err, pos[2])
	}
}

// TestDBMetrics: the commit metrics count JetStream commits by outcome, with the
// engine's name as the policy.
func TestDBMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	db := openDB(t, pipeline.Config{MeterProvider: mp})
	put(t, db, db.Default(), "a", "1")
	put(t, db, db.Default(), "b", "2")
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != tracing.MetricCommits {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				policy, _ := dp.Attributes.Value(tracing.AttrPolicy)
				outcome, _ := dp.Attributes.Value(tracing.AttrOutcome)
				if policy.AsString() == jetstream.EngineName && outcome.AsString() == tracing.OutcomeCommitted {
					committed += dp.Value
				}
			}
		}
	}
	if committed != 2 {
		t.Errorf("%s committed with policy %s = %d; want 2", tracing.MetricCommits, jetstream.EngineName, committed)
	}
}

// TestPartitionedOnJetStream: the partitioned store over two JetStream partitions
// routes appends by category, refuses a cross-partition transaction, and a
// subscription to all partitions resumes from its Positions vector without repeating
// or missing an event.
func TestPartitionedOnJetStream(t *testing.T) {
	dbs := []*pipeline.DB{openDB(t, pipeline.Config{}), openDB(t, pipeline.Config{})}
	byPrefix := func(stream string, n int) int {
		if stream[0] == 'a' {
			return 0
		}
		return 1 % n
	}
	s, err := partitioned.New(dbs, partitioned.Config{Partitions: 2, Partition: byPrefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	appendN := func(stream string, ids ...string) {
		for _, id := range ids {
			if _, err := s.Append(ctx, stream, eventstore.Any, eventstore.Event{ID: id, Type: "t"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN("a-1", "a1", "a2")
	appendN("b-1", "b1")
	_, err = s.Update(ctx, "a-1", func(tx *partitioned.Tx) error {
		return tx.Append("b-2", eventstore.Any, eventstore.Event{Type: "t"})
	})
	if !errors.Is(err, partitioned.ErrCrossPartition) {
		t.Fatalf("cross-partition Update = %v; want ErrCrossPartition", err)
	}
	seen := map[string]int{}
	collect := func(from partitioned.Positions, n int) partitioned.Positions {
		got := make(chan string, 16)
		sub, err := s.SubscribeToAll(ctx, from, func(e partitioned.Event) error {
			got <- e.ID
			return nil
		}, partitioned.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			seen[<-got]++
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		return sub.Positions()
	}
	resume := collect(nil, 3)
	appendN("b-1", "b2")
	appendN("a-1", "a3")
	collect(resume, 2)
	want := map[string]int{"a1": 1, "a2": 1, "a3": 1, "b1": 1, "b2": 1}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("events seen across the resume (-want +got):\n%s", diff)
	}
}
