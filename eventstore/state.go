package eventstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// StreamMetadata bounds what a stream's readers see. Reads honour it at once; the
// index records it hides are deleted later, by Reclaim. The log entries themselves are
// untouched: ReadAll and subscriptions still hand out the events until
// pipeline.DB.TruncateLog removes them.
type StreamMetadata struct {
	// MaxCount keeps the last MaxCount events visible (0: no bound).
	MaxCount uint64
	// MaxAge keeps events younger than MaxAge visible, by commit time (0: no bound).
	MaxAge time.Duration
	// TruncateBefore hides the revisions below it (0: none).
	TruncateBefore uint64
}

// streamState is a stream's metadata and deletion, kept in its head record after the
// last revision (see Store), so the one read an append makes of the head gives both:
//
//	state = version 1, flags (bit 0 soft-deleted, bit 1 tombstoned, bit 2 no events:
//	        the head's revision means nothing), uvarint(truncate before),
//	        uvarint(max count), uvarint(max age in ns), uvarint(deleted before)
//
// A head without state bytes has none (every head written before states existed). A
// soft delete sets deletedBefore to the next revision and the deleted flag; the next
// append clears the flag and its revisions continue from there, the deleted ones
// staying hidden whatever the metadata says. A tombstone is final.
type streamState struct {
	StreamMetadata
	deletedBefore                 uint64
	deleted, tombstoned, noEvents bool
}

const (
	stateVersion    = 1
	stateDeleted    = 1 << 0
	stateTombstoned = 1 << 1
	stateNoEvents   = 1 << 2
)

// stateKey is the key of a stream's entry in the index of streams with a state, which
// Reclaim walks; its value is empty, and nothing on the append path reads it.
func stateKey(stream string) []byte { return append([]byte{'s'}, stream...) }

// zero reports whether st holds nothing, so the head needs no state bytes.
func (st streamState) zero() bool { return st == streamState{} }

func (st streamState) encode() []byte {
	var flags byte
	if st.deleted {
		flags |= stateDeleted
	}
	if st.tombstoned {
		flags |= stateTombstoned
	}
	if st.noEvents {
		flags |= stateNoEvents
	}
	b := []byte{stateVersion, flags}
	b = binary.AppendUvarint(b, st.TruncateBefore)
	b = binary.AppendUvarint(b, st.MaxCount)
	b = binary.AppendUvarint(b, uint64(st.MaxAge))
	return binary.AppendUvarint(b, st.deletedBefore)
}

// decodeState parses an 's' record; anything it cannot read is pipeline.ErrCorrupt.
func decodeState(stream string, v []byte) (streamState, error) {
	bad := func(why string) (streamState, error) {
		return streamState{}, fmt.Errorf("%w: state of stream %q (%x): %s", pipeline.ErrCorrupt, stream, v, why)
	}
	if len(v) < 2 {
		return bad("truncated")
	}
	if v[0] != stateVersion {
		return bad(fmt.Sprintf("version %d", v[0]))
	}
	if v[1]&^(stateDeleted|stateTombstoned|stateNoEvents) != 0 {
		return bad(fmt.Sprintf("unknown flags %#x", v[1]))
	}
	st := streamState{deleted: v[1]&stateDeleted != 0, tombstoned: v[1]&stateTombstoned != 0, noEvents: v[1]&stateNoEvents != 0}
	rest := v[2:]
	var fields [4]uint64
	for i := range fields {
		x, n := binary.Uvarint(rest)
		if n <= 0 {
			return bad("truncated field")
		}
		fields[i], rest = x, rest[n:]
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	if fields[2] > uint64(1<<63-1) {
		return bad("max age overflows")
	}
	st.TruncateBefore, st.MaxCount, st.MaxAge, st.deletedBefore = fields[0], fields[1], time.Duration(fields[2]), fields[3]
	return st, nil
}

// lowest returns the lowest revision readers may see of a stream whose last revision
// is head (maxAge is applied to the events once their times are known).
func (st streamState) lowest(head uint64) uint64 {
	low := max(st.TruncateBefore, st.deletedBefore)
	if st.MaxCount > 0 && head+1 > st.MaxCount {
		low = max(low, head+1-st.MaxCount)
	}
	return low
}
