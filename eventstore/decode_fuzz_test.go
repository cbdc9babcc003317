package eventstore

// Fuzz tests of the store's record decoders; internal, as the decoders are.

import (
	"errors"
	"testing"
	"time"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// FuzzDecodeState: any bytes decode into a state or an ErrCorrupt, never a panic; a
// state decoded survives encode and decode unchanged, and so does any state built from
// the fuzzer's numbers.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte{}, uint64(0), uint64(0), int64(0), uint64(0), byte(0))
	f.Add(streamState{StreamMetadata: StreamMetadata{MaxCount: 3, MaxAge: time.Hour, TruncateBefore: 2}, deletedBefore: 5, deleted: true}.encode(), uint64(1), uint64(2), int64(3), uint64(4), byte(3))
	f.Add([]byte{1, 0, 0, 0, 0}, uint64(1<<63), uint64(7), int64(-1), uint64(9), byte(2))
	f.Fuzz(func(t *testing.T, b []byte, tb, mc uint64, age int64, db uint64, flags byte) {
		st, err := decodeState("s", b)
		if err != nil {
			if !errors.Is(err, pipeline.ErrCorrupt) {
				t.Fatalf("decodeState(%x) = %v, not ErrCorrupt", b, err)
			}
		} else if again, err := decodeState("s", st.encode()); err != nil || again != st {
			t.Fatalf("decodeState(encode(%+v)) = %+v, %v", st, again, err)
		}
		if age < 0 {
			age = -(age + 1)
		}
		built := streamState{StreamMetadata: StreamMetadata{MaxCount: mc, MaxAge: time.Duration(age), TruncateBefore: tb},
			deletedBefore: db, deleted: flags&1 != 0, tombstoned: flags&2 != 0}
		if got, err := decodeState("s", built.encode()); err != nil || got != built {
			t.Fatalf("round trip of %+v = %+v, %v", built, got, err)
		}
	})
}

// FuzzParseEventValue: any bytes parse into an event record (or a head) or an
// ErrCorrupt; a record made by the event codec parses back to what made it, and a head
// parsed survives encodeHead.
func FuzzParseEventValue(f *testing.F) {
	f.Add([]byte{}, uint64(1), 0, "id")
	f.Add(eventCodec.Append(nil, 300, revision.AppendRecordPayload(nil, 2, "e-1")), uint64(1<<40), 7, "")
	f.Add(encodeHead(9, streamState{deleted: true, deletedBefore: 10}), uint64(0), 0, "x")
	f.Fuzz(func(t *testing.T, b []byte, pos uint64, idx int, id string) {
		if _, _, _, err := parseEventValue(b); err != nil && !errors.Is(err, pipeline.ErrCorrupt) {
			t.Fatalf("parseEventValue(%x) = %v, not ErrCorrupt", b, err)
		}
		if rev, st, err := parseHead("s", b); err != nil {
			if !errors.Is(err, pipeline.ErrCorrupt) {
				t.Fatalf("parseHead(%x) = %v, not ErrCorrupt", b, err)
			}
		} else if r2, st2, err := parseHead("s", encodeHead(rev, st)); err != nil || r2 != rev || st2 != st {
			t.Fatalf("parseHead(encodeHead(%d, %+v)) = %d, %+v, %v", rev, st, r2, st2, err)
		}
		if idx < 0 {
			idx = -(idx + 1)
		}
		p, i, gotID, err := parseEventValue(eventCodec.Append(nil, pos, revision.AppendRecordPayload(nil, idx, id)))
		if err != nil || p != pos || i != idx || gotID != id {
			t.Fatalf("round trip of (%d, %d, %q) = (%d, %d, %q), %v", pos, idx, id, p, i, gotID, err)
		}
	})
}

// FuzzDecodeMark: any bytes parse as a tag marker or are refused, never a panic; a
// marker made for any position parses back to it, and one that parses re-encodes to
// the same bytes (a marker has one encoding).
func FuzzDecodeMark(f *testing.F) {
	f.Add([]byte{}, uint64(0))
	f.Add(markCodec.Append(nil, 300, nil), uint64(1<<40))
	f.Add([]byte{0x80, 0x00}, uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, pos uint64) {
		if got, ok := revision.ParseMark(b); ok {
			if again := markCodec.Append(nil, got, nil); string(again) != string(b) {
				t.Fatalf("ParseMark(%x) = %d, which encodes as %x", b, got, again)
			}
		}
		if got, ok := revision.ParseMark(markCodec.Append(nil, pos, nil)); !ok || got != pos {
			t.Fatalf("round trip of %d = %d, %v", pos, got, ok)
		}
	})
}

// FuzzDecodeIndexKey: any bytes parse into an index entry's parts or not at all,
// never a panic; parts parsed make the same key again (one encoding per key), and so
// do any parts built from the fuzzer's values, through the codec an append uses.
func FuzzDecodeIndexKey(f *testing.F) {
	f.Add([]byte{}, "type", "placed", uint64(7), uint32(0))
	f.Add(indexKey(nil, indexPrefix(nil, "tag", "course:1"), 1<<40, 3), "t", "", uint64(0), uint32(1<<31))
	f.Add([]byte{'x', 0x80, 0x00, 1, 'a'}, "x", "y", uint64(1), uint32(2))
	f.Fuzz(func(t *testing.T, b []byte, name, value string, pos uint64, idx uint32) {
		if n, v, p, i, ok := parseIndexKey(b); ok {
			if again := indexKey(nil, indexPrefix(nil, n, v), p, i); string(again) != string(b) {
				t.Fatalf("parseIndexKey(%x) = %q %q %d %d, which encode as %x", b, n, v, p, i, again)
			}
		}
		k := appendIndexKey(nil, pos, indexPayload(nil, indexPrefix(nil, name, value), int(idx)))
		n, v, p, i, ok := parseIndexKey(k)
		if !ok || n != name || v != value || p != pos || i != int(idx) {
			t.Fatalf("round trip of %q %q %d %d = %q %q %d %d %v", name, value, pos, idx, n, v, p, i, ok)
		}
	})
}
