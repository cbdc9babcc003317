package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestStreamsLogRetentionEndToEnd(t *testing.T) {
	ctx := context.Background()
	db, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := make(chan LogEntry, 100)
	sub, err := db.Subscribe(ctx, 0, func(e LogEntry) error { got <- e; return nil })
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Append(ctx, "order-1", NoStream, Event{ID: "e1", Type: "placed", Data: []byte("x")}, Event{ID: "e2", Type: "paid"})
	if err != nil || r.NextExpectedRevision != 1 || r.Position != 1 {
		t.Fatal(r, err)
	}
	r2, err := db.Append(ctx, "order-1", NoStream, Event{ID: "e1", Type: "placed", Data: []byte("x")}, Event{ID: "e2", Type: "paid"})
	if err != nil || r2 != r {
		t.Fatal("idempotent", r2, err)
	}
	_, err = db.Append(ctx, "order-1", Revision(0), Event{ID: "e3", Type: "shipped"})
	var we *WrongExpectedVersionError
	if !errors.As(err, &we) || we.Actual != Revision(1) {
		t.Fatal(err)
	}
	cf, _ := db.CreateColumnFamily("proj")
	if err := db.Update(ctx, func(tx *Txn) error { return tx.Put(cf, []byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	evs, err := db.ReadStream("order-1", 0, 10)
	if err != nil || len(evs) != 2 || evs[1].Type != "paid" || evs[0].Position != 1 {
		t.Fatal(evs, err)
	}
	back, err := db.ReadStreamBackward("order-1", 100, 10)
	if err != nil || len(back) != 2 || back[0].Revision != 1 {
		t.Fatal(back, err)
	}
	for i := 1; i <= 2; i++ {
		e := <-got
		if e.Position != uint64(i) {
			t.Fatal(e)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	dst, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	evs2, err := dst.ReadStream("order-1", 0, 10)
	if err != nil || len(evs2) != 2 {
		t.Fatal(evs2, err)
	}
	pos, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp"))
	if err != nil || pos != 2 {
		t.Fatal(pos, err)
	}
	if err := db.TruncateLog(2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReadLog(1, 1); !errors.Is(err, ErrLogTruncated) {
		t.Fatal(err)
	}
}
