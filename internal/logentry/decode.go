package logentry

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Decode parses b, the value stored under the log key of position pos, and
// returns the entry it encodes.
//
// Any problem (see the package documentation for the full list of checks)
// yields a nil entry and a [*CorruptEntryError] whose Position is pos.
// Decode never panics and never returns a partially decoded entry, whatever
// b holds. It allocates the Entry, its Events and Writes slices and the
// strings, and nothing proportional to counts that the input cannot back.
//
// Strings are copied. The byte slices of the returned entry (Event.Data,
// Event.Metadata, Write.Key, Write.Value) alias b, with their capacity
// capped at their length: the caller must not modify b while it uses them,
// and must copy any it keeps beyond the life of b. Empty byte slices and
// empty Events or Writes decode as nil.
func Decode(pos uint64, b []byte) (*Entry, error) {
	if len(b) < minSize {
		return nil, corruptf(pos, "truncated: %d bytes, an entry has at least %d", len(b), minSize)
	}
	body := b[:len(b)-checksumSize]
	stored := binary.LittleEndian.Uint32(b[len(body):])
	if sum := crc32.Checksum(body, castagnoli); sum != stored {
		return nil, corruptf(pos, "checksum mismatch: stored %#08x, computed %#08x", stored, sum)
	}
	if body[0] != formatVersion {
		return nil, corruptf(pos, "unsupported format version %d, want %d", body[0], formatVersion)
	}
	flags := body[1]
	if flags&^(flagFiller|flagFamilies|flagStreams|flagTags) != 0 {
		return nil, corruptf(pos, "unknown flag bits %#02x", flags&^(flagFiller|flagFamilies|flagStreams|flagTags))
	}
	streams, tags := flags&flagStreams != 0, flags&flagTags != 0
	if flags&flagFiller != 0 && flags&flagFamilies != 0 {
		return nil, corruptf(pos, "filler entry has family operations")
	}
	d := decoder{b: body, off: 2}

	recorded, ok := d.uvarint()
	if !ok {
		return nil, d.fail(pos, "position")
	}
	if recorded != pos {
		return nil, corruptf(pos, "entry records position %d", recorded)
	}
	zz, ok := d.uvarint()
	if !ok {
		return nil, d.fail(pos, "time")
	}
	e := &Entry{
		Position: pos,
		Time:     int64(zz>>1) ^ -int64(zz&1),
		Filler:   flags&flagFiller != 0,
	}

	nEvents, ok := d.uvarint()
	if !ok {
		return nil, d.fail(pos, "event count")
	}
	if e.Filler && nEvents != 0 {
		return nil, corruptf(pos, "filler entry has %d events", nEvents)
	}
	if streams && nEvents == 0 {
		return nil, corruptf(pos, "stream flag set with no events")
	}
	if tags && nEvents == 0 {
		return nil, corruptf(pos, "tag flag set with no events")
	}
	minEvent := minEventSize
	if streams {
		minEvent = minStreamEventSize
	}
	if tags {
		minEvent++ // the tag count
	}
	if nEvents > uint64(d.remaining()/minEvent) {
		return nil, corruptf(pos, "event count %d exceeds the %d bytes left", nEvents, d.remaining())
	}
	if nEvents > 0 {
		e.Events = make([]Event, nEvents)
	}
	for i := range e.Events {
		ev := &e.Events[i]
		id, ok := d.bytes()
		if !ok {
			return nil, d.fail(pos, fmt.Sprintf("event %d id", i))
		}
		typ, ok := d.bytes()
		if !ok {
			return nil, d.fail(pos, fmt.Sprintf("event %d type", i))
		}
		if ev.Data, ok = d.bytes(); !ok {
			return nil, d.fail(pos, fmt.Sprintf("event %d data", i))
		}
		if ev.Metadata, ok = d.bytes(); !ok {
			return nil, d.fail(pos, fmt.Sprintf("event %d metadata", i))
		}
		ev.ID = string(id)
		ev.Type = string(typ)
		if streams {
			if err := d.stream(pos, i, ev); err != nil {
				return nil, err
			}
		}
		if tags {
			if err := d.tags(pos, i, ev); err != nil {
				return nil, err
			}
		}
	}
	if streams && !hasStreams(e.Events) {
		return nil, corruptf(pos, "stream flag set but no event names a stream")
	}
	if tags && !hasTags(e.Events) {
		return nil, corruptf(pos, "tag flag set but no event has a tag")
	}

	nWrites, ok := d.uvarint()
	if !ok {
		return nil, d.fail(pos, "write count")
	}
	if e.Filler && nWrites != 0 {
		return nil, corruptf(pos, "filler entry has %d writes", nWrites)
	}
	if nWrites > uint64(d.remaining()/minWriteSize) {
		return nil, corruptf(pos, "write count %d exceeds the %d bytes left", nWrites, d.remaining())
	}
	if nWrites > 0 {
		e.Writes = make([]Write, nWrites)
	}
	family := "" // the previous family, reused to avoid an allocation per write
	for i := range e.Writes {
		w := &e.Writes[i]
		kind, ok := d.byte()
		if !ok {
			return nil, d.fail(pos, fmt.Sprintf("write %d kind", i))
		}
		if kind != kindPut && kind != kindDelete && kind != kindRange {
			return nil, corruptf(pos, "write %d has unknown kind %d", i, kind)
		}
		w.Delete, w.Range = kind == kindDelete, kind == kindRange
		fam, ok := d.bytes()
		if !ok {
			return nil, d.fail(pos, fmt.Sprintf("write %d family", i))
		}
		if len(fam) == 0 {
			return nil, corruptf(pos, "write %d has an empty family", i)
		}
		if string(fam) != family {
			family = string(fam)
		}
		w.Family = family
		if w.Key, ok = d.bytes(); !ok {
			return nil, d.fail(pos, fmt.Sprintf("write %d key", i))
		}
		if !w.Delete {
			if w.Value, ok = d.bytes(); !ok {
				return nil, d.fail(pos, fmt.Sprintf("write %d value", i))
			}
		}
	}
	if flags&flagFamilies != 0 {
		if err := d.familyOps(pos, e); err != nil {
			return nil, err
		}
	}
	if n := d.remaining(); n != 0 {
		return nil, corruptf(pos, "%d trailing bytes after the last write", n)
	}
	return e, nil
}

// stream decodes event i's stream name and revision, present when flagStreams is set.
func (d *decoder) stream(pos uint64, i int, ev *Event) error {
	name, ok := d.bytes()
	if !ok {
		return d.fail(pos, fmt.Sprintf("event %d stream", i))
	}
	if ev.Revision, ok = d.uvarint(); !ok {
		return d.fail(pos, fmt.Sprintf("event %d revision", i))
	}
	if len(name) == 0 && ev.Revision != 0 {
		return corruptf(pos, "event %d has revision %d but no stream", i, ev.Revision)
	}
	ev.Stream = string(name)
	return nil
}

// tags decodes event i's tags, present when flagTags is set.
func (d *decoder) tags(pos uint64, i int, ev *Event) error {
	n, ok := d.uvarint()
	if !ok {
		return d.fail(pos, fmt.Sprintf("event %d tag count", i))
	}
	if n > uint64(d.remaining()/minTagSize) {
		return corruptf(pos, "event %d tag count %d exceeds the %d bytes left", i, n, d.remaining())
	}
	if n == 0 {
		return nil
	}
	ev.Tags = make([]string, n)
	for j := range ev.Tags {
		t, ok := d.bytes()
		if !ok {
			return d.fail(pos, fmt.Sprintf("event %d tag %d", i, j))
		}
		if len(t) == 0 {
			return corruptf(pos, "event %d tag %d is empty", i, j)
		}
		ev.Tags[j] = string(t)
	}
	return nil
}

// familyOps decodes the family-operation section, present when flagFamilies is set.
func (d *decoder) familyOps(pos uint64, e *Entry) error {
	n, ok := d.uvarint()
	if !ok {
		return d.fail(pos, "family operation count")
	}
	if n == 0 {
		return corruptf(pos, "family flag set with no family operations")
	}
	if n > uint64(d.remaining()/minFamilyOpSize) {
		return corruptf(pos, "family operation count %d exceeds the %d bytes left", n, d.remaining())
	}
	e.Families = make([]FamilyOp, n)
	for i := range e.Families {
		kind, ok := d.byte()
		if !ok {
			return d.fail(pos, fmt.Sprintf("family operation %d kind", i))
		}
		if kind != familyCreate && kind != familyDrop {
			return corruptf(pos, "family operation %d has unknown kind %d", i, kind)
		}
		fam, ok := d.bytes()
		if !ok {
			return d.fail(pos, fmt.Sprintf("family operation %d family", i))
		}
		if len(fam) == 0 {
			return corruptf(pos, "family operation %d has an empty family", i)
		}
		e.Families[i] = FamilyOp{Family: string(fam), Drop: kind == familyDrop}
	}
	return nil
}

func corruptf(pos uint64, format string, args ...any) *CorruptEntryError {
	return &CorruptEntryError{Position: pos, Reason: fmt.Sprintf(format, args...)}
}

// decoder reads fields from the checksummed body of an entry. On failure a
// read method returns false and sets why.
type decoder struct {
	b   []byte
	off int
	why string
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

// fail reports the failure recorded by the last read of field.
func (d *decoder) fail(pos uint64, field string) *CorruptEntryError {
	return corruptf(pos, "%s: %s at offset %d", field, d.why, d.off)
}

func (d *decoder) byte() (byte, bool) {
	if d.off >= len(d.b) {
		d.why = "truncated"
		return 0, false
	}
	c := d.b[d.off]
	d.off++
	return c, true
}

// uvarint reads a uvarint in minimal form.
func (d *decoder) uvarint() (uint64, bool) {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if d.off+i >= len(d.b) {
			d.why = "truncated varint"
			return 0, false
		}
		c := d.b[d.off+i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				d.why = "varint overflows 64 bits"
				return 0, false
			}
			if i > 0 && c == 0 {
				d.why = "non-minimal varint"
				return 0, false
			}
			d.off += i + 1
			return x | uint64(c)<<s, true
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	d.why = "varint overflows 64 bits"
	return 0, false
}

// bytes reads a length-prefixed field. The result aliases the input with its
// capacity capped; an empty field is nil.
func (d *decoder) bytes() ([]byte, bool) {
	n, ok := d.uvarint()
	if !ok {
		return nil, false
	}
	if n > uint64(d.remaining()) {
		d.why = fmt.Sprintf("length %d exceeds the %d bytes left", n, d.remaining())
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	end := d.off + int(n)
	b := d.b[d.off:end:end]
	d.off = end
	return b, true
}
