package logentry

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type namedEntry struct {
	name string
	e    Entry
}

func sampleEntries() []namedEntry {
	large := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	many := make([]Write, 64)
	for i := range many {
		many[i] = Write{Family: "state", Key: []byte{byte(i)}, Value: []byte("value"), Delete: i%5 == 0}
		if many[i].Delete {
			many[i].Value = nil
		}
	}
	return []namedEntry{
		{"zero", Entry{}},
		{"empty", Entry{Position: 1, Time: 1_700_000_000_123_456_789}},
		{"negative time", Entry{Position: 2, Time: -1}},
		{"extreme", Entry{Position: math.MaxUint64, Time: math.MinInt64}},
		{"max time", Entry{Position: 1 << 63, Time: math.MaxInt64}},
		{"filler", Entry{Position: 300, Time: 1_700_000_000_000_000_000, Filler: true}},
		{"family create", Entry{Position: 44, Time: 7, Families: []FamilyOp{{Family: "orders"}}}},
		{"family drop and create", Entry{Position: 45, Time: 8, Families: []FamilyOp{{Family: "orders", Drop: true}, {Family: "orders#2"}}}},
		{"events only", Entry{Position: 42, Time: 5, Events: []Event{
			{ID: "evt-1", Type: "OrderPlaced", Data: []byte(`{"id":1}`), Metadata: []byte(`{"user":"a"}`)},
			{ID: "evt-2", Type: "OrderShipped", Data: []byte(`{}`)},
			{ID: "", Type: ""},
		}}},
		{"writes only", Entry{Position: 43, Time: 6, Writes: []Write{
			{Family: "default", Key: []byte("k1"), Value: []byte("v1")},
			{Family: "default", Key: []byte("k2"), Delete: true},
			{Family: "index", Key: []byte("k3"), Value: nil},
			{Family: "index", Key: nil, Delete: true},
			{Family: "default", Key: []byte{0, 0xff}, Value: []byte{0}},
			{Family: "index", Key: []byte("a"), Value: []byte("m"), Range: true},
		}}},
		{"events and writes", Entry{Position: 1 << 40, Time: 123, Events: []Event{
			{ID: "a", Type: "T", Data: []byte{1, 2, 3}, Metadata: []byte{4}},
		}, Writes: []Write{
			{Family: "streams", Key: []byte("stream/a"), Value: []byte{0, 0, 0, 1}},
			{Family: "events", Key: []byte("evt/a"), Delete: true},
		}}},
		{"large values", Entry{Position: 7, Time: 8, Events: []Event{
			{ID: strings.Repeat("i", 300), Type: strings.Repeat("t", 200), Data: large, Metadata: large[:70000]},
		}, Writes: []Write{
			{Family: strings.Repeat("f", 130), Key: large[:129], Value: large},
		}}},
		{"unicode", Entry{Position: 9, Time: 10, Events: []Event{
			{ID: "événement-①", Type: "注文が作成されました", Data: []byte("données 🚀"), Metadata: []byte("ключ")},
		}, Writes: []Write{
			{Family: "famille-é", Key: []byte("clé-😀"), Value: []byte("valeur-ü")},
			{Family: "семья", Key: []byte("ключ"), Delete: true},
		}}},
		{"64 writes", Entry{Position: 1000, Time: 1000, Writes: many}},
		{"stream events", Entry{Position: 50, Time: 11, Events: []Event{
			{ID: "e1", Type: "placed", Data: []byte("{}"), Stream: "order-42", Revision: 0},
			{ID: "e2", Type: "noted"}, // of no stream, in the same commit
			{ID: "e3", Type: "paid", Stream: "order-42", Revision: 1},
			{ID: "e4", Type: "opened", Stream: "ünïcødé/stream", Revision: math.MaxUint64},
		}, Writes: []Write{{Family: "rockline.streams", Key: []byte("horder-42"), Value: []byte{1}}}}},
		{"tagged events", Entry{Position: 51, Time: 12, Events: []Event{
			{ID: "e1", Type: "enrolled", Stream: "course-7", Tags: []string{"course:7", "student:ada"}},
			{ID: "e2", Type: "noted"}, // no stream, no tags, in the same commit
			{ID: "e3", Type: "audited", Tags: []string{"ünïcødé:tag"}},
		}}},
		{"tags without streams", Entry{Position: 52, Time: 13, Events: []Event{
			{ID: "e1", Type: "t", Tags: []string{"a"}},
		}}},
	}
}

// normalize returns the entry that decoding the encoding of e yields: empty
// slices become nil and delete values are dropped.
func normalize(e *Entry) *Entry {
	nilIfEmpty := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	out := &Entry{Position: e.Position, Time: e.Time, Filler: e.Filler}
	for _, ev := range e.Events {
		var tags []string
		if len(ev.Tags) > 0 {
			tags = ev.Tags
		}
		out.Events = append(out.Events, Event{ID: ev.ID, Type: ev.Type, Data: nilIfEmpty(ev.Data), Metadata: nilIfEmpty(ev.Metadata), Stream: ev.Stream, Revision: ev.Revision, Tags: tags})
	}
	for _, w := range e.Writes {
		nw := Write{Family: w.Family, Key: nilIfEmpty(w.Key), Delete: w.Delete, Range: w.Range}
		if !w.Delete {
			nw.Value = nilIfEmpty(w.Value)
		}
		out.Writes = append(out.Writes, nw)
	}
	out.Families = append(out.Families, e.Families...)
	return out
}

// encodeWithEncoder encodes e through an Encoder appending to dst. The Encoder
// streams commits, which carry no family operations; an entry that records them is
// encoded with Append, the only encoder for it.
func encodeWithEncoder(dst []byte, e *Entry) []byte {
	if len(e.Families) > 0 {
		return Append(dst, e)
	}
	var enc Encoder
	switch {
	case hasTags(e.Events):
		enc = NewTaggedEncoder(dst, e.Position, e.Time, hasStreams(e.Events), len(e.Events), len(e.Writes))
	case hasStreams(e.Events):
		enc = NewStreamEncoder(dst, e.Position, e.Time, len(e.Events), len(e.Writes))
	default:
		enc = NewEncoder(dst, e.Position, e.Time, e.Filler, len(e.Events), len(e.Writes))
	}
	for _, ev := range e.Events {
		if len(ev.Tags) > 0 {
			enc.TaggedEvent(ev.Stream, ev.Revision, ev.ID, ev.Type, ev.Data, ev.Metadata, ev.Tags)
		} else if ev.Stream != "" {
			enc.StreamEvent(ev.Stream, ev.Revision, ev.ID, ev.Type, ev.Data, ev.Metadata)
		} else {
			enc.Event(ev.ID, ev.Type, ev.Data, ev.Metadata)
		}
	}
	for _, w := range e.Writes {
		if w.Range {
			enc.DeleteRange(w.Family, w.Key, w.Value)
			continue
		}
		enc.Write(w.Family, w.Key, w.Value, w.Delete)
	}
	return enc.Finish()
}

// seal appends a valid checksum to body.
func seal(body []byte) []byte {
	out := append([]byte(nil), body...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

// checkCorrupt fails unless err is a *CorruptEntryError at pos matching
// ErrCorrupt, and e is nil.
func checkCorrupt(t *testing.T, e *Entry, err error, pos uint64) *CorruptEntryError {
	t.Helper()
	if err == nil {
		t.Fatalf("Decode succeeded, want a corruption error; got %+v", e)
	}
	if e != nil {
		t.Fatalf("Decode returned an entry with error %v", err)
	}
	var ce *CorruptEntryError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *CorruptEntryError", err, err)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v does not match ErrCorrupt", err)
	}
	if ce.Position != pos {
		t.Fatalf("error position = %d, want %d", ce.Position, pos)
	}
	return ce
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range sampleEntries() {
		t.Run(tc.name, func(t *testing.T) {
			b := Append(nil, &tc.e)
			if got, want := len(b), Size(&tc.e); got != want {
				t.Errorf("len(Append) = %d, Size = %d", got, want)
			}
			if enc := encodeWithEncoder(nil, &tc.e); !bytes.Equal(enc, b) {
				t.Errorf("Encoder and Append differ:\nEncoder %x\nAppend  %x", enc, b)
			}

			// Appending after existing bytes leaves them alone and yields
			// the same encoding.
			prefix := []byte("prefix")
			withPrefix := Append(bytes.Clone(prefix), &tc.e)
			if !bytes.Equal(withPrefix[:len(prefix)], prefix) || !bytes.Equal(withPrefix[len(prefix):], b) {
				t.Errorf("Append after a prefix produced %x", withPrefix)
			}
			encPrefix := encodeWithEncoder(bytes.Clone(prefix), &tc.e)
			if !bytes.Equal(encPrefix, withPrefix) {
				t.Errorf("Encoder after a prefix produced %x", encPrefix)
			}

			got, err := Decode(tc.e.Position, b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(normalize(&tc.e), got); diff != "" {
				t.Errorf("Decode mismatch (-want +got):\n%s", diff)
			}
			if re := Append(nil, got); !bytes.Equal(re, b) {
				t.Errorf("re-encoding the decoded entry differs")
			}
		})
	}
}

func TestEmptyAndNilEncodeTheSame(t *testing.T) {
	a := Entry{Position: 3, Events: []Event{{ID: "x", Data: []byte{}, Metadata: []byte{}}}, Writes: []Write{
		{Family: "f", Key: []byte{}, Value: []byte{}},
		{Family: "f", Key: []byte("k"), Value: []byte("ignored for deletes"), Delete: true},
	}}
	b := Entry{Position: 3, Events: []Event{{ID: "x"}}, Writes: []Write{
		{Family: "f"},
		{Family: "f", Key: []byte("k"), Delete: true},
	}}
	ea, eb := Append(nil, &a), Append(nil, &b)
	if !bytes.Equal(ea, eb) {
		t.Fatalf("encodings differ:\n%x\n%x", ea, eb)
	}
	if Size(&a) != len(ea) {
		t.Errorf("Size = %d, want %d", Size(&a), len(ea))
	}
	got, err := Decode(3, ea)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&b, got); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
	if got := (&Entry{Events: []Event{}, Writes: []Write{}}); !bytes.Equal(Append(nil, got), Append(nil, &Entry{})) {
		t.Errorf("empty and nil Events/Writes encode differently")
	}
}

// TestDocumentedExample pins the filler example of the package documentation.
func TestDocumentedExample(t *testing.T) {
	b := Append(nil, &Entry{Position: 300, Filler: true})
	want := []byte{0x01, 0x01, 0xac, 0x02, 0x00, 0x00, 0x00}
	if !bytes.Equal(b[:len(b)-4], want) || len(b) != len(want)+4 {
		t.Fatalf("filler at 300 encodes as %x, want %x + checksum", b, want)
	}
	if got := len(Append(nil, &Entry{})); got != minSize {
		t.Errorf("smallest entry is %d bytes, want %d", got, minSize)
	}
}

func TestUvarintLen(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if got, want := uvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", x, got, want)
		}
	}
	for _, x := range []int64{0, -1, 1, -64, 63, 64, -65, math.MinInt64, math.MaxInt64} {
		if got, want := uvarintLen(zigzag(x)), len(binary.AppendVarint(nil, x)); got != want {
			t.Errorf("varint length of %d = %d, want %d", x, got, want)
		}
	}
}

func corruptSample() (uint64, []byte) {
	e := Entry{Position: 77, Time: 1_700_000_000_000_000_000, Events: []Event{
		{ID: "e1", Type: "Created", Data: []byte("data"), Metadata: []byte("m")},
	}, Writes: []Write{
		{Family: "default", Key: []byte("key"), Value: []byte("value")},
		{Family: "default", Key: []byte("old"), Delete: true},
	}}
	return e.Position, Append(nil, &e)
}

func TestCorruptBitFlips(t *testing.T) {
	pos, b := corruptSample()
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			e, err := Decode(pos, c)
			checkCorrupt(t, e, err, pos)
		}
	}
}

func TestCorruptTruncation(t *testing.T) {
	pos, b := corruptSample()
	for n := range len(b) {
		e, err := Decode(pos, b[:n])
		checkCorrupt(t, e, err, pos)
	}
	// Truncated bodies with a valid checksum must fail too.
	body := b[:len(b)-4]
	for n := range len(body) {
		e, err := Decode(pos, seal(body[:n]))
		checkCorrupt(t, e, err, pos)
	}
}

// body builds an entry body (without checksum) from raw parts.
func body(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case byte:
			b = append(b, p)
		case int:
			b = binary.AppendUvarint(b, uint64(p))
		case uint64:
			b = binary.AppendUvarint(b, p)
		case string:
			b = binary.AppendUvarint(b, uint64(len(p)))
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		default:
			panic("bad part")
		}
	}
	return b
}

func TestCorruptCases(t *testing.T) {
	pos, sample := corruptSample()
	sampleBody := sample[:len(sample)-4]
	with := func(i int, v byte) []byte {
		c := bytes.Clone(sampleBody)
		c[i] = v
		return seal(c)
	}
	const v, put, del = byte(1), byte(0), byte(1)
	tests := []struct {
		name   string
		pos    uint64
		in     []byte
		reason string
	}{
		{"nil", 5, nil, "truncated"},
		{"empty", 5, []byte{}, "truncated"},
		{"nine bytes", 0, seal([]byte{1, 0, 0, 0, 0})[:9], "truncated"},
		{"trailing byte", pos, append(bytes.Clone(sample), 0), "checksum"},
		{"trailing byte resealed", pos, seal(append(bytes.Clone(sampleBody), 0)), "trailing"},
		{"trailing bytes after empty", 5, seal(body(v, byte(0), 5, 0, 0, 0, 0)), "trailing"},
		{"wrong position", pos + 1, sample, "records position 77"},
		{"wrong position zero", 0, sample, "records position 77"},
		{"bad version 0", pos, with(0, 0), "version 0"},
		{"bad version 2", pos, with(0, 2), "version 2"},
		{"bad version 255", pos, with(0, 255), "version 255"},
		{"unknown flag", pos, with(1, 16), "flag"},
		{"tag flag without events", 5, seal(body(v, byte(8), 5, 0, 0, 0)), "tag flag set with no events"},
		{"tag flag, no event has a tag", 5, seal(body(v, byte(8), 5, 0, 1, "", "t", "", "", 0, 0)), "no event has a tag"},
		{"empty tag", 5, seal(body(v, byte(8), 5, 0, 1, "", "t", "", "", 1, "", 0)), "event 0 tag 0 is empty"},
		{"tag count too large", 5, seal(body(v, byte(8), 5, 0, 1, "", "t", "", "", 9, "a", 0)), "event 0 tag count 9 exceeds"},
		{"tag truncated", 5, seal(body(v, byte(8), 5, 0, 1, "", "t", "", "", 2, "a", 5, byte('b'))), "event 0 tag 1"},
		{"stream and tags, tag count missing", 5, seal(body(v, byte(12), 5, 0, 1, "", "t", "", "", "s", 0)), "event 0 tag count"},
		{"stream flag without events", 5, seal(body(v, byte(4), 5, 0, 0, 0)), "stream flag set with no events"},
		{"stream flag, no event names a stream", 5, seal(body(v, byte(4), 5, 0, 1, "", "t", "", "", "", 0, 0)), "no event names a stream"},
		{"revision without a stream", 5, seal(body(v, byte(4), 5, 0, 2, "", "t", "", "", "s", 0, "", "t", "", "", "", 3, 0)), "revision 3 but no stream"},
		{"stream event truncated", 5, seal(body(v, byte(4), 5, 0, 1, "", "t", "", "", "s")), "event 0 revision"},
		{"filler with family flag", 5, seal(body(v, byte(3), 5, 0, 0, 0, 1, byte(0), "f")), "filler entry has family operations"},
		{"family flag without operations", 5, seal(body(v, byte(2), 5, 0, 0, 0, 0)), "no family operations"},
		{"family operation of unknown kind", 5, seal(body(v, byte(2), 5, 0, 0, 0, 1, byte(2), "f")), "unknown kind 2"},
		{"family operation with empty family", 5, seal(body(v, byte(2), 5, 0, 0, 0, 1, byte(0), "", byte(0))), "empty family"},
		{"family operation count too large", 5, seal(body(v, byte(2), 5, 0, 0, 0, 9, byte(0), "f")), "family operation count"},
		{"family operation truncated", 5, seal(body(v, byte(2), 5, 0, 0, 0, 1, byte(1), byte(5), byte('a'), byte('b'))), "family operation 0 family"},
		{"unknown high flag", pos, with(1, 0x81), "flag"},
		{"bad checksum", pos, append(bytes.Clone(sampleBody), 0, 0, 0, 0), "checksum"},
		{"filler with events", 5, seal(body(v, byte(1), 5, 0, 1, "a", "b", "", "", 0)), "filler entry has 1 events"},
		{"filler with writes", 5, seal(body(v, byte(1), 5, 0, 0, 1, put, "f", "k", "v")), "filler entry has 1 writes"},
		{"huge event count", 5, seal(body(v, byte(0), 5, 0, uint64(1)<<60, 0)), "event count"},
		{"max event count", 5, seal(body(v, byte(0), 5, 0, uint64(math.MaxUint64), 0)), "event count"},
		{"event count one too many", 5, seal(body(v, byte(0), 5, 0, 2, "", "", "", "", 0)), "event count"},
		{"huge write count", 5, seal(body(v, byte(0), 5, 0, 0, uint64(1)<<62)), "write count"},
		{"write count past end", 5, seal(body(v, byte(0), 5, 0, 0, 2, del, "f", "k", del, "f")), "write 1 key: truncated"},
		{"missing write count", 5, seal(body(v, byte(0), 5, 0, 0, byte(0x80), byte(0x80), byte(0x80), byte(0x80))), "write count"},
		{"id length past end", 5, seal(body(v, byte(0), 5, 0, 1, 100, byte('x'), byte('x'), byte('x'), 0)), "event 0 id: length 100 exceeds"},
		{"metadata length past end", 5, seal(body(v, byte(0), 5, 0, 1, "a", "b", "c", 9, 0)), "event 0 metadata"},
		{"huge length", 5, seal(body(v, byte(0), 5, 0, 1, uint64(math.MaxUint64), 0, 0, 0, 0)), "event 0 id"},
		{"key length past end", 5, seal(body(v, byte(0), 5, 0, 0, 1, put, "f", 50, 0, 0)), "write 0 key"},
		{"value past end", 5, seal(body(v, byte(0), 5, 0, 0, 1, put, "f", "k", 3, 0)), "write 0 value"},
		{"delete with value", 5, seal(body(v, byte(0), 5, 0, 0, 1, del, "f", "k", "v")), "trailing"},
		{"empty family", 5, seal(body(v, byte(0), 5, 0, 0, 1, put, "", "k", "v")), "empty family"},
		{"bad kind", 5, seal(body(v, byte(0), 5, 0, 0, 1, byte(3), "f", "k", "v")), "unknown kind 3"},
		{"range delete truncated", 5, seal(body(v, byte(0), 5, 0, 0, 1, byte(2), "f", "k")), "write 0 value"},
		{"bad kind 0x80", 5, seal(body(v, byte(0), 5, 0, 0, 1, byte(0x80), "f", "k", "v")), "unknown kind 128"},
		{"non-minimal position", 0, seal(body(v, byte(0), byte(0x80), byte(0), 0, 0, 0)), "non-minimal"},
		{"non-minimal time", 0, seal(body(v, byte(0), 0, byte(0x81), byte(0), 0, 0)), "non-minimal"},
		{"non-minimal length", 0, seal(body(v, byte(0), 0, 0, 1, byte(0x81), byte(0x00), byte('a'), "", "", "", 0)), "non-minimal"},
		{"varint overflow", 0, seal(body(v, byte(0), bytes.Repeat([]byte{0xff}, 9), byte(2), 0, 0, 0)), "overflows"},
		{"eleven-byte varint", 0, seal(body(v, byte(0), bytes.Repeat([]byte{0x80}, 10), byte(0), 0, 0, 0)), "overflows"},
		{"truncated position", 0, seal(body(v, byte(0), byte(0x80), byte(0x80), byte(0x80), byte(0x80))), "position: truncated"},
		{"truncated time", 0, seal(body(v, byte(0), 0, byte(0x80), byte(0x80), byte(0x80), byte(0x80))), "time: truncated"},
		{"truncated kind", 0, seal(body(v, byte(0), 0, 0, 0, 2, put, "f", "k", "vvvvvv")), "write 1 kind: truncated"},
		{"write count vs remaining", 0, seal(body(v, byte(0), 0, 0, 0, 1, byte(0x80), byte(0x80))), "write count 1 exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Decode(tc.pos, tc.in)
			ce := checkCorrupt(t, e, err, tc.pos)
			if !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", ce.Reason, tc.reason)
			}
		})
	}
}

func TestMaxPositionAndOverflowBoundary(t *testing.T) {
	// The largest 10-byte uvarint is accepted.
	b := seal(body(byte(1), byte(0), uint64(math.MaxUint64), 0, 0, 0))
	e, err := Decode(math.MaxUint64, b)
	if err != nil {
		t.Fatal(err)
	}
	if e.Position != math.MaxUint64 {
		t.Fatalf("position = %d", e.Position)
	}
}

func TestHugeCountDoesNotAllocate(t *testing.T) {
	inputs := [][]byte{
		seal(body(byte(1), byte(0), 5, 0, uint64(math.MaxUint64>>1), 0)),
		seal(body(byte(1), byte(0), 5, 0, 0, uint64(1)<<50, byte(1), "f", "k")),
	}
	for _, in := range inputs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		allocs := testing.AllocsPerRun(10, func() {
			if _, err := Decode(5, in); err == nil {
				t.Fatal("Decode succeeded")
			}
		})
		runtime.ReadMemStats(&after)
		if allocs > 8 {
			t.Errorf("Decode made %v allocations for a huge count", allocs)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("Decode allocated %d bytes for a huge count", d)
		}
	}
}

func TestDecodeAliasing(t *testing.T) {
	e := Entry{Position: 1, Events: []Event{{ID: "id", Type: "type", Data: []byte("data"), Metadata: []byte("meta")}},
		Writes: []Write{{Family: "f", Key: []byte("key"), Value: []byte("value")}}}
	b := Append(nil, &e)
	orig := bytes.Clone(b)
	got, err := Decode(1, b)
	if err != nil {
		t.Fatal(err)
	}
	// Appending to a decoded slice must not clobber the rest of the input.
	_ = append(got.Events[0].Data, "XXXXXXXX"...)
	_ = append(got.Writes[0].Key, "XXXXXXXX"...)
	if !bytes.Equal(b, orig) {
		t.Fatalf("appending to decoded slices modified the input")
	}
	// Byte slices alias the input; strings do not.
	for i := range b {
		b[i] = 'Z'
	}
	if string(got.Events[0].Data) != "ZZZZ" || string(got.Writes[0].Value) != "ZZZZZ" {
		t.Errorf("byte slices do not alias the input: %q %q", got.Events[0].Data, got.Writes[0].Value)
	}
	if got.Events[0].ID != "id" || got.Events[0].Type != "type" || got.Writes[0].Family != "f" {
		t.Errorf("strings were not copied: %+v", got)
	}
}

func TestDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	var e Entry
	for _, tc := range sampleEntries() {
		if tc.name == "64 writes" {
			e = tc.e
		}
	}
	b := Append(nil, &e)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Decode(e.Position, b); err != nil {
			t.Fatal(err)
		}
	})
	// The Entry, the Writes slice and one copy of the shared family name.
	if allocs > 3 {
		t.Errorf("Decode of 64 writes in one family made %v allocations, want at most 3", allocs)
	}
}

func TestEncodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	for _, tc := range sampleEntries() {
		e := tc.e
		buf := make([]byte, 0, Size(&e)+16)
		if n := testing.AllocsPerRun(20, func() { _ = Append(buf[:0], &e) }); n != 0 {
			t.Errorf("%s: Append into a large enough buffer made %v allocations", tc.name, n)
		}
		if n := testing.AllocsPerRun(20, func() { _ = encodeWithEncoder(buf[:0], &e) }); n != 0 {
			t.Errorf("%s: Encoder into a large enough buffer made %v allocations", tc.name, n)
		}
		if n := testing.AllocsPerRun(20, func() { _ = Append(nil, &e) }); n != 1 {
			t.Errorf("%s: Append into nil made %v allocations, want 1", tc.name, n)
		}
		if n := testing.AllocsPerRun(20, func() { _ = Append(make([]byte, 3, 4), &e) }); n > 2 {
			t.Errorf("%s: Append into a short buffer made %v allocations, want at most 2", tc.name, n)
		}
	}
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: did not panic", name)
		}
	}()
	f()
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"zero Encoder Event", func() { var e Encoder; e.Event("a", "b", nil, nil) }},
		{"zero Encoder Write", func() { var e Encoder; e.Write("f", nil, nil, false) }},
		{"zero Encoder Finish", func() { var e Encoder; e.Finish() }},
		{"negative events", func() { NewEncoder(nil, 1, 0, false, -1, 0) }},
		{"negative writes", func() { NewEncoder(nil, 1, 0, false, 0, -1) }},
		{"filler with events", func() { NewEncoder(nil, 1, 0, true, 1, 0) }},
		{"filler with writes", func() { NewEncoder(nil, 1, 0, true, 0, 1) }},
		{"too many events", func() {
			e := NewEncoder(nil, 1, 0, false, 1, 0)
			e.Event("a", "b", nil, nil)
			e.Event("a", "b", nil, nil)
		}},
		{"write before events", func() {
			e := NewEncoder(nil, 1, 0, false, 1, 1)
			e.Write("f", nil, nil, false)
		}},
		{"too many writes", func() {
			e := NewEncoder(nil, 1, 0, false, 0, 1)
			e.Write("f", nil, nil, false)
			e.Write("f", nil, nil, false)
		}},
		{"empty family", func() {
			e := NewEncoder(nil, 1, 0, false, 0, 1)
			e.Write("", nil, nil, false)
		}},
		{"tags on an untagged Encoder", func() {
			e := NewStreamEncoder(nil, 1, 0, 1, 0)
			e.TaggedEvent("s", 0, "a", "b", nil, nil, []string{"t"})
		}},
		{"empty tag", func() {
			e := NewTaggedEncoder(nil, 1, 0, false, 1, 0)
			e.TaggedEvent("", 0, "a", "b", nil, nil, []string{""})
		}},
		{"tagged Encoder without a tag", func() {
			e := NewTaggedEncoder(nil, 1, 0, false, 1, 0)
			e.Event("a", "b", nil, nil)
			e.Finish()
		}},
		{"missing event", func() {
			e := NewEncoder(nil, 1, 0, false, 2, 0)
			e.Event("a", "b", nil, nil)
			e.Finish()
		}},
		{"missing write", func() {
			e := NewEncoder(nil, 1, 0, false, 0, 2)
			e.Write("f", nil, nil, true)
			e.Finish()
		}},
		{"Finish twice", func() {
			e := NewEncoder(nil, 1, 0, false, 0, 0)
			e.Finish()
			e.Finish()
		}},
		{"Event after Finish", func() {
			e := NewEncoder(nil, 1, 0, false, 0, 0)
			e.Finish()
			e.Event("a", "b", nil, nil)
		}},
		{"Append filler with events", func() { Append(nil, &Entry{Filler: true, Events: []Event{{}}}) }},
		{"Append filler with writes", func() { Append(nil, &Entry{Filler: true, Writes: []Write{{Family: "f"}}}) }},
		{"Append empty family", func() { Append(nil, &Entry{Writes: []Write{{Key: []byte("k")}}}) }},
	}
	for _, tc := range tests {
		mustPanic(t, tc.name, tc.f)
	}
}

func TestKey(t *testing.T) {
	positions := []uint64{0, 1, 255, 256, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}
	var prev []byte
	for _, p := range positions {
		k := Key(p)
		if len(k) != KeySize {
			t.Fatalf("Key(%d) has %d bytes", p, len(k))
		}
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			t.Errorf("keys out of order: %x >= %x", prev, k)
		}
		prev = k
		if got := AppendKey([]byte("x"), p); !bytes.Equal(got, append([]byte("x"), k...)) {
			t.Errorf("AppendKey(%d) = %x", p, got)
		}
		got, err := ParseKey(k)
		if err != nil || got != p {
			t.Errorf("ParseKey(Key(%d)) = %d, %v", p, got, err)
		}
	}
	if !bytes.Equal(Key(0x0102030405060708), []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("Key is not big-endian: %x", Key(0x0102030405060708))
	}
	for _, k := range [][]byte{nil, {}, make([]byte, 7), make([]byte, 9)} {
		if _, err := ParseKey(k); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseKey(%x) error = %v, want ErrCorrupt", k, err)
		}
	}
}

func TestErrorString(t *testing.T) {
	err := error(&CorruptEntryError{Position: 12, Reason: "checksum mismatch"})
	if got, want := err.Error(), "rockline: corrupt log entry at position 12: checksum mismatch"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("CorruptEntryError does not match ErrCorrupt")
	}
	if errors.Is(err, errors.New("corrupt log entry")) {
		t.Errorf("CorruptEntryError matches an unrelated error")
	}
}
