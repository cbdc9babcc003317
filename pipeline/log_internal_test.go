package pipeline

// This file is an internal test: no public API writes a log entry's bytes, so it
// corrupts one through db.local().store directly.

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// TestCorruptLogEntry overwrites the entry of an already published position with bytes
// that do not decode. Every reader of that position (ReadLog, Entry, LogIterator,
// a subscription) then fails with a *CorruptEntryError carrying the
// position and matching ErrCorruptEntry, without panicking; positions around it still
// read.
func TestCorruptLogEntry(t *testing.T) {
	const bad = 2
	cases := []struct {
		name    string
		corrupt func(good []byte) []byte
	}{
		{"garbage", func([]byte) []byte { return []byte("this is not a log entry") }},
		{"empty", func([]byte) []byte { return []byte{} }},
		{"truncated", func(good []byte) []byte { return slices.Clone(good[:len(good)-3]) }},
		{"flipped bit", func(good []byte) []byte {
			b := slices.Clone(good)
			b[len(b)/2] ^= 0x10
			return b
		}},
		{"entry of another position", func([]byte) []byte {
			return logentry.Append(nil, &logentry.Entry{Position: bad + 1, Time: time.Now().UnixNano()})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := Open(filepath.Join(t.TempDir(), "db"), Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := db.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			for i, ev := range []Event{{ID: "a", Type: "t"}, {ID: "b", Type: "t"}, {ID: "c", Type: "t"}} {
				if err := db.Update(ctx, func(tx *Txn) error { return tx.AddEvents(ev) }); err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
			}
			good, err := db.local().store.Get(db.local().log, logentry.Key(bad), nil)
			if err != nil {
				t.Fatal(err)
			}
			b := storage.NewBatch()
			if err := b.Put(db.local().log, logentry.Key(bad), tc.corrupt(good)); err != nil {
				t.Fatal(err)
			}
			if err := db.local().store.Write(b); err != nil {
				t.Fatal(err)
			}

			checkCorrupt := func(what string, err error) {
				t.Helper()
				var ce *CorruptEntryError
				if !errors.As(err, &ce) {
					t.Fatalf("%s: error %v, want a *CorruptEntryError", what, err)
				}
				if ce.Position != bad {
					t.Errorf("%s: CorruptEntryError.Position = %d, want %d", what, ce.Position, bad)
				}
				if !errors.Is(err, ErrCorruptEntry) {
					t.Errorf("%s: %v does not match ErrCorruptEntry", what, err)
				}
			}
			page, err := db.ReadLog(1, 10)
			checkCorrupt("ReadLog(1, 10)", err)
			if len(page) != 1 || page[0].Position != 1 {
				t.Errorf("ReadLog(1, 10) returned %d entries with the error, want the intact entry 1", len(page))
			}
			_, err = db.Entry(bad)
			checkCorrupt("Entry", err)
			it := db.LogIterator(1)
			n := 0
			for it.Next() {
				n++
			}
			checkCorrupt("LogIterator", it.Err())
			if n != 1 {
				t.Errorf("LogIterator yielded %d entries before failing, want 1 (the intact entry before the corrupt one)", n)
			}

			for _, pos := range []uint64{1, 3} {
				es, err := db.ReadLog(pos, 1)
				if err != nil || len(es) != 1 || es[0].Position != pos || len(es[0].Events) != 1 {
					t.Errorf("ReadLog(%d, 1) = %+v, %v; want the intact entry", pos, es, err)
				}
			}

			var handled []uint64
			sub, err := db.Subscribe(ctx, 0, func(e LogEntry) error {
				handled = append(handled, e.Position)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-sub.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("subscription did not end on the corrupt entry")
			}
			checkCorrupt("Subscription.Wait", sub.Wait())
			if !slices.Equal(handled, []uint64{1}) || sub.Position() != 1 {
				t.Errorf("subscription handled %v (position %d); want [1], the intact entry before the corrupt one", handled, sub.Position())
			}
		})
	}
}
