package eventstore_test

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// recordKey is the event store's key of a stream's record for rev.
func recordKey(stream string, rev uint64) []byte {
	k := append([]byte{'r'}, stream...)
	return binary.BigEndian.AppendUint64(append(k, 0), rev)
}

// TestVerifyStreams: Verify passes a store whose streams went through the lifecycle
// (plain, MaxCount with reclaimed records, soft-deleted and appended again,
// tombstoned), and finds an index changed behind the store's back: a record removed,
// a record naming another event, a record past the head.
func TestVerifyStreams(t *testing.T) {
	cases := []struct {
		name   string
		damage func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error
		want   string // a problem containing this; "" for none
	}{
		{"intact", nil, ""},
		{"record removed", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			return tx.Delete(cf, recordKey("plain", 2))
		}, `"plain": records jump from revision 1 to 3`},
		{"record names another event", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			v, err := tx.GetUntracked(cf, recordKey("plain", 0))
			if err != nil {
				return err
			}
			return tx.Put(cf, recordKey("plain", 1), v)
		}, `"plain" revision 1`},
		{"record past the head", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			v, err := tx.GetUntracked(cf, recordKey("plain", 4))
			if err != nil {
				return err
			}
			return tx.Put(cf, recordKey("plain", 5), v)
		}, `"plain": head at revision 4, last record at 5`},
		{"tag marker behind the log", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			return tx.Put(cf, []byte("tx"), revision.AppendMark(nil, 1, nil))
		}, `tag "x": its marker holds position 1`},
		{"tag marker removed", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			return tx.Delete(cf, []byte("ty"))
		}, `tag "y": events at positions up to`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, es, dir := openStore(t, pipeline.Config{})
			seedStream(t, es, "plain", 5)
			seedStream(t, es, "capped", 6)
			if _, err := es.SetStreamMetadata(ctx, "capped", eventstore.StreamMetadata{MaxCount: 2}); err != nil {
				t.Fatal(err)
			}
			if _, err := es.Reclaim(ctx); err != nil {
				t.Fatal(err)
			}
			seedStream(t, es, "again", 2)
			if _, err := es.DeleteStream(ctx, "again", eventstore.Any); err != nil {
				t.Fatal(err)
			}
			if _, err := es.Append(ctx, "again", eventstore.Any, eventstore.Event{Type: "back"}); err != nil {
				t.Fatal(err)
			}
			seedStream(t, es, "gone", 2)
			if _, err := es.TombstoneStream(ctx, "gone", eventstore.Any); err != nil {
				t.Fatal(err)
			}
			for _, tags := range [][]string{{"x", "y"}, {"x"}} {
				if _, err := es.Append(ctx, "tagged", eventstore.Any, eventstore.Event{Type: "t", Tags: tags}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.damage != nil {
				cf, err := db.LayerFamily("streams")
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tc.damage(tx, cf) }); err != nil {
					t.Fatal(err)
				}
			}
			ro, err := pipeline.OpenSecondary(dir, filepath.Join(t.TempDir(), "secondary"), pipeline.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			res, err := eventstore.New(ro)
			if err != nil {
				t.Fatal(err)
			}
			r, err := res.Verify(ctx, nil)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if r.Streams != 5 || r.EventsChecked != 18 {
				t.Errorf("report %+v, want 5 streams and 18 events checked", r)
			}
			if tc.want == "" {
				if !r.OK() || r.Records != 5+2+3+2+2 || r.Tags != 2 {
					t.Errorf("report %+v, want OK with 14 records and 2 tags", r)
				}
				return
			}
			if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
				t.Errorf("problems %q, want one containing %q", r.Problems, tc.want)
			}
		})
	}
}
