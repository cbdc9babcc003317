package eventstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// overwrite closes db and writes key=value into family fam of its folder with the
// storage layer directly: no public API writes damaged records.
func overwrite(t testing.TB, db *pipeline.DB, dir, fam string, kv map[string][]byte) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := st.Family(fam)
	if err != nil {
		t.Fatal(err)
	}
	b := storage.NewBatch()
	for k, v := range kv {
		if err := b.Put(f, []byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptStreamIndex: a stream head or event record that does not decode is
// reported as pipeline.ErrCorrupt, naming what was damaged.
func TestCorruptStreamIndex(t *testing.T) {
	db, es, dir := openStore(t, pipeline.Config{})
	if _, err := es.Append(ctx, "s", eventstore.Any, eventstore.Event{ID: "a", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.Append(ctx, "r", eventstore.Any, eventstore.Event{ID: "a", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	overwrite(t, db, dir, "rockline.streams", map[string][]byte{
		"hs":                                     {0x80}, // head of s: a truncated uvarint
		"rr\x00\x00\x00\x00\x00\x00\x00\x00\x00": {0x80}, // record of r revision 0
	})
	_, es = openStoreAt(t, dir, pipeline.Config{})
	if _, err := es.Append(ctx, "s", eventstore.Any, eventstore.Event{ID: "b", Type: "t"}); !errors.Is(err, pipeline.ErrCorrupt) || !strings.Contains(err.Error(), `"s"`) {
		t.Errorf("Append over a corrupt head = %v, want ErrCorrupt naming the stream", err)
	}
	if _, err := es.ReadStream(ctx, "s", 0, 10); !errors.Is(err, pipeline.ErrCorrupt) {
		t.Errorf("ReadStream over a corrupt head = %v, want ErrCorrupt", err)
	}
	if _, err := es.ReadStream(ctx, "r", 0, 10); !errors.Is(err, pipeline.ErrCorrupt) {
		t.Errorf("ReadStream over a corrupt record = %v, want ErrCorrupt", err)
	}
}

// TestReadStreamCorruptEntry: a stream whose event lives in a log entry that does not
// decode fails with the *CorruptEntryError of that position.
func TestReadStreamCorruptEntry(t *testing.T) {
	db, es, dir := openStore(t, pipeline.Config{})
	for _, id := range []string{"a", "b", "c"} {
		if _, err := es.Append(ctx, "s", eventstore.Any, eventstore.Event{ID: id, Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	overwrite(t, db, dir, "rockline.log", map[string][]byte{string(logentry.Key(2)): []byte("not an entry")})
	_, es = openStoreAt(t, dir, pipeline.Config{})
	_, err := es.ReadStream(ctx, "s", 0, 10)
	var ce *pipeline.CorruptEntryError
	if !errors.As(err, &ce) || ce.Position != 2 || !errors.Is(err, pipeline.ErrCorruptEntry) {
		t.Fatalf("ReadStream over a corrupt entry = %v, want the *CorruptEntryError of position 2", err)
	}
	if evs, err := es.ReadStream(ctx, "s", 2, 1); err != nil || len(evs) != 1 || evs[0].ID != "c" {
		t.Errorf("ReadStream from revision 2 = %+v, %v; want the intact event c", evs, err)
	}
}
