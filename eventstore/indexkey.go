package eventstore

import (
	"encoding/binary"
	"math"

	"github.com/rockline/rockline/pipeline"
)

// An index entry's key: the prefix of its index and value, then the event's place in
// the log.
//
//	'x' uvarint(len(name)) name uvarint(len(value)) value BE64(position) BE32(index)
//
// Entries of one value sort by position, then by index in the entry: log order. The
// position is known only at commit, so an append writes the entry with
// pipeline.Txn.PutKeyAtCommit: the payload is the prefix and BE32(index), and
// indexKeyCodec puts the position between them. The value is empty.

// indexPlace is the size of the position and index that end an entry's key.
const indexPlace = 12

// indexKeyName names the key codec of index entries.
const indexKeyName = "rockline.index"

// indexKeyCodec makes an entry's key at commit (appendIndexKey).
var indexKeyCodec = pipeline.NewPositionedValue(indexKeyName, appendIndexKey)

// indexPrefix appends the prefix of the entries of value in the index name.
func indexPrefix(dst []byte, name, value string) []byte {
	dst = append(dst, 'x')
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// indexPayload appends the payload of an entry: prefix, then the event's index in its
// commit's entry.
func indexPayload(dst, prefix []byte, idx int) []byte {
	dst = append(dst, prefix...)
	return binary.BigEndian.AppendUint32(dst, uint32(idx))
}

// appendIndexKey is the key codec: payload (prefix, BE32 index) with the position
// between. A payload too short to hold an index makes an empty key, which the commit
// refuses.
func appendIndexKey(dst []byte, pos uint64, payload []byte) []byte {
	if len(payload) < 4 {
		return dst
	}
	n := len(payload) - 4
	dst = append(dst, payload[:n]...)
	dst = binary.BigEndian.AppendUint64(dst, pos)
	return append(dst, payload[n:]...)
}

// indexKey appends the key of the entry of prefix at position pos, index idx (capped
// at the largest index a key holds).
func indexKey(dst, prefix []byte, pos uint64, idx int) []byte {
	dst = append(dst, prefix...)
	dst = binary.BigEndian.AppendUint64(dst, pos)
	return binary.BigEndian.AppendUint32(dst, uint32(min(max(idx, 0), math.MaxUint32)))
}

// parseIndexKey parses an entry's key; ok is false when it does not decode (a prefix
// other than 'x', lengths that overrun the key or leave other than indexPlace bytes,
// or non-minimal varints: a key has one encoding).
func parseIndexKey(k []byte) (name, value string, pos uint64, idx int, ok bool) {
	if len(k) < 1 || k[0] != 'x' {
		return "", "", 0, 0, false
	}
	rest := k[1:]
	var parts [2]string
	for i := range parts {
		n, m := binary.Uvarint(rest)
		if m <= 0 || m != uvarintLen(n) || n > uint64(len(rest)-m) {
			return "", "", 0, 0, false
		}
		parts[i] = string(rest[m : m+int(n)])
		rest = rest[m+int(n):]
	}
	if len(rest) != indexPlace {
		return "", "", 0, 0, false
	}
	return parts[0], parts[1], binary.BigEndian.Uint64(rest), int(binary.BigEndian.Uint32(rest[8:])), true
}

// uvarintLen is the length of n's minimal uvarint.
func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(b[:0], n))
}
