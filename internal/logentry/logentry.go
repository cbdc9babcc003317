package logentry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
)

const (
	formatVersion = 1

	flagFiller   = 1 << 0
	flagFamilies = 1 << 1
	flagStreams  = 1 << 2
	flagTags     = 1 << 3

	kindPut    = 0
	kindDelete = 1
	kindRange  = 2

	familyCreate = 0
	familyDrop   = 1

	checksumSize = 4

	// minSize is the size of the smallest valid entry: version, flags,
	// position, time, nEvents, nWrites (one byte each) and the checksum.
	minSize = 6 + checksumSize
	// minEventSize is the smallest encoding of an event: four zero lengths;
	// minStreamEventSize with a stream name and revision too.
	minEventSize       = 4
	minStreamEventSize = 6
	// minTagSize is the smallest encoding of a tag: a length and one byte.
	minTagSize = 2
	// minWriteSize is the smallest encoding of a write: a delete with a
	// one-byte family and an empty key (kind, family length, family, key
	// length).
	minWriteSize = 4
	// minFamilyOpSize is the smallest encoding of a family operation: kind,
	// family length and a one-byte family.
	minFamilyOpSize = 3
)

// KeySize is the size in bytes of a log key as returned by [Key].
const KeySize = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Event is one event appended by a commit. ID and Type are UTF-8 strings;
// Data and Metadata are opaque. Empty and nil Data or Metadata are encoded
// identically and decode as nil. Stream names the stream the event was
// appended to, at Revision; an event of no stream has an empty Stream and
// Revision 0. Tags are the event's tags, each a non-empty UTF-8 string, in the
// order given; an event without tags has a nil Tags.
type Event struct {
	ID, Type       string
	Data, Metadata []byte
	Stream         string
	Revision       uint64
	Tags           []string
}

// Write is one RocksDB write applied by a commit: a put of Value under Key in the
// column family Family; when Delete is true, a tombstone for Key (the Value of a delete
// is not encoded and decodes as nil); when Range is true, a range tombstone for every
// key in [Key, Value) (Delete is then false). Family must not be empty. An empty Value
// or Key decodes as nil.
type Write struct {
	Family     string
	Key, Value []byte
	Delete     bool
	Range      bool
}

// FamilyOp is the creation or drop of one generation of a column family,
// recorded in the log so that a replay reproduces it. Family is the
// family's qualified name (name, or name#generation), never empty.
type FamilyOp struct {
	Family string
	Drop   bool
}

// Entry is one commit-log entry.
type Entry struct {
	// Position is the entry's log position; it is also encoded in the
	// entry's key (see [Key]).
	Position uint64
	// Time is the commit time in Unix nanoseconds.
	Time int64
	// Filler marks a void entry written to fill a position whose commit
	// failed after its position was assigned. A filler has no events and
	// no writes.
	Filler bool
	// Events are the events appended by the commit, in order. A decoded
	// entry without events has a nil Events.
	Events []Event
	// Writes are the writes applied by the commit, in order. A decoded
	// entry without writes has a nil Writes.
	Writes []Write
	// Families are the family creations and drops the entry records, in
	// order. A decoded entry without any has a nil Families.
	Families []FamilyOp
}

// ErrCorrupt matches, with errors.Is, every error reporting an undecodable
// log entry or log key.
var ErrCorrupt = errors.New("corrupt log entry")

// CorruptEntryError reports that the value stored at a log position could
// not be decoded: bad checksum, unsupported version, unknown flags,
// truncation, trailing bytes, lengths or counts past the end, a position
// that does not match the key, or otherwise invalid content. It matches
// [ErrCorrupt] with errors.Is.
type CorruptEntryError struct {
	// Position is the position the entry was read from (the pos argument
	// of [Decode]), not the one recorded inside the entry.
	Position uint64
	// Reason describes what is wrong, for humans.
	Reason string
}

// Error returns "rockline: corrupt log entry at position N: reason".
func (e *CorruptEntryError) Error() string {
	return fmt.Sprintf("rockline: corrupt log entry at position %d: %s", e.Position, e.Reason)
}

// Is reports whether target is [ErrCorrupt].
func (e *CorruptEntryError) Is(target error) bool { return target == ErrCorrupt }

// Key returns the 8-byte big-endian log key of position pos. Keys sort in
// position order.
func Key(pos uint64) []byte {
	return AppendKey(make([]byte, 0, KeySize), pos)
}

// AppendKey appends the 8-byte big-endian log key of position pos to dst and
// returns the extended slice.
func AppendKey(dst []byte, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, pos)
}

// ParseKey returns the position encoded in the log key k. It fails, with an
// error matching [ErrCorrupt], unless k is exactly [KeySize] bytes long.
func ParseKey(k []byte) (uint64, error) {
	if len(k) != KeySize {
		return 0, fmt.Errorf("rockline: log key has %d bytes, want %d: %w", len(k), KeySize, ErrCorrupt)
	}
	return binary.BigEndian.Uint64(k), nil
}

// uvarintLen returns the length of the uvarint encoding of x.
func uvarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// bytesLen returns the length of the encoding of a bytes field of n bytes.
func bytesLen(n int) int {
	return uvarintLen(uint64(n)) + n
}

// Size returns the exact number of bytes [Append] appends for e. It does not
// validate e.
func Size(e *Entry) int {
	n := 2 + uvarintLen(e.Position) + uvarintLen(zigzag(e.Time)) +
		uvarintLen(uint64(len(e.Events))) + uvarintLen(uint64(len(e.Writes))) + checksumSize
	streams, tags := hasStreams(e.Events), hasTags(e.Events)
	for i := range e.Events {
		ev := &e.Events[i]
		n += bytesLen(len(ev.ID)) + bytesLen(len(ev.Type)) + bytesLen(len(ev.Data)) + bytesLen(len(ev.Metadata))
		if streams {
			n += bytesLen(len(ev.Stream)) + uvarintLen(ev.Revision)
		}
		if tags {
			n += uvarintLen(uint64(len(ev.Tags)))
			for _, t := range ev.Tags {
				n += bytesLen(len(t))
			}
		}
	}
	for i := range e.Writes {
		w := &e.Writes[i]
		n += 1 + bytesLen(len(w.Family)) + bytesLen(len(w.Key))
		if !w.Delete {
			n += bytesLen(len(w.Value))
		}
	}
	if len(e.Families) > 0 {
		n += uvarintLen(uint64(len(e.Families)))
		for _, f := range e.Families {
			n += 1 + bytesLen(len(f.Family))
		}
	}
	return n
}

func zigzag(x int64) uint64 {
	return uint64(x<<1) ^ uint64(x>>63)
}

// Append appends the encoding of e to dst and returns the extended slice. It
// grows dst at most once, to exactly [Size](e) spare bytes, and allocates
// nothing else; with enough spare capacity in dst it does not allocate.
//
// Append panics if e cannot be encoded as a valid entry, which is a
// programming error: a filler with events, writes or family operations, a
// write or family operation with an empty family, an event with a revision
// but no stream, or an empty tag.
func Append(dst []byte, e *Entry) []byte {
	if e.Filler && (len(e.Events) != 0 || len(e.Writes) != 0 || len(e.Families) != 0) {
		panic(fmt.Sprintf("logentry: filler entry at position %d has %d events, %d writes and %d family operations", e.Position, len(e.Events), len(e.Writes), len(e.Families)))
	}
	dst = slices.Grow(dst, Size(e))
	start := len(dst)
	var flags byte
	if e.Filler {
		flags |= flagFiller
	}
	if len(e.Families) > 0 {
		flags |= flagFamilies
	}
	streams, tags := hasStreams(e.Events), hasTags(e.Events)
	if streams {
		flags |= flagStreams
	}
	if tags {
		flags |= flagTags
	}
	dst = appendHeader(dst, e.Position, e.Time, flags, len(e.Events))
	for i := range e.Events {
		ev := &e.Events[i]
		if ev.Stream == "" && ev.Revision != 0 {
			panic(fmt.Sprintf("logentry: event %d has revision %d but no stream", i, ev.Revision))
		}
		dst = appendEvent(dst, ev.ID, ev.Type, ev.Data, ev.Metadata)
		if streams {
			dst = appendStream(dst, ev.Stream, ev.Revision)
		}
		if tags {
			dst = appendTags(dst, ev.Tags)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Writes)))
	for i := range e.Writes {
		w := &e.Writes[i]
		if w.Range {
			if w.Delete {
				panic("logentry: a write is both a delete and a range delete")
			}
			dst = appendRange(dst, w.Family, w.Key, w.Value)
			continue
		}
		dst = appendWrite(dst, w.Family, w.Key, w.Value, w.Delete)
	}
	if len(e.Families) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(e.Families)))
		for _, f := range e.Families {
			if f.Family == "" {
				panic("logentry: family operation with an empty column family")
			}
			kind := byte(familyCreate)
			if f.Drop {
				kind = familyDrop
			}
			dst = append(dst, kind)
			dst = appendString(dst, f.Family)
		}
	}
	return appendChecksum(dst, start)
}

// hasStreams reports whether any event names a stream: the entry then carries a
// stream name and revision for every event (flagStreams).
func hasStreams(events []Event) bool {
	for i := range events {
		if events[i].Stream != "" {
			return true
		}
	}
	return false
}

// hasTags reports whether any event has a tag: the entry then carries a tag list
// for every event (flagTags).
func hasTags(events []Event) bool {
	for i := range events {
		if len(events[i].Tags) > 0 {
			return true
		}
	}
	return false
}

// appendTags appends an event's tag count and tags. It panics on an empty tag.
func appendTags(dst []byte, tags []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(tags)))
	for _, t := range tags {
		if t == "" {
			panic("logentry: an event with an empty tag")
		}
		dst = appendString(dst, t)
	}
	return dst
}

// appendStream appends an event's stream name and revision.
func appendStream(dst []byte, stream string, rev uint64) []byte {
	return binary.AppendUvarint(appendString(dst, stream), rev)
}

// appendHeader appends everything up to and including the event count.
func appendHeader(dst []byte, position uint64, unixNano int64, flags byte, nEvents int) []byte {
	dst = append(dst, formatVersion, flags)
	dst = binary.AppendUvarint(dst, position)
	dst = binary.AppendVarint(dst, unixNano)
	return binary.AppendUvarint(dst, uint64(nEvents))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendEvent(dst []byte, id, typ string, data, meta []byte) []byte {
	dst = appendString(dst, id)
	dst = appendString(dst, typ)
	dst = appendBytes(dst, data)
	return appendBytes(dst, meta)
}

func appendWrite(dst []byte, family string, key, value []byte, del bool) []byte {
	if family == "" {
		panic("logentry: write with an empty column family")
	}
	if del {
		dst = append(dst, kindDelete)
		dst = appendString(dst, family)
		return appendBytes(dst, key)
	}
	dst = append(dst, kindPut)
	dst = appendString(dst, family)
	dst = appendBytes(dst, key)
	return appendBytes(dst, value)
}

// appendRange appends a range deletion of [start, end) in family.
func appendRange(dst []byte, family string, start, end []byte) []byte {
	if family == "" {
		panic("logentry: range delete with an empty column family")
	}
	dst = append(dst, kindRange)
	dst = appendString(dst, family)
	dst = appendBytes(dst, start)
	return appendBytes(dst, end)
}

// appendChecksum appends the CRC-32C of dst[start:].
func appendChecksum(dst []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}
