package revision

import "encoding/binary"

// The record that places a revision in the log: "revision r of stream s is event i of
// the commit at log position p, with ID id". The event store writes one per event with
// pipeline.Txn.PutAtCommit, as the payload AppendRecordPayload makes (index and ID),
// whose value the commit completes with its position (AppendRecord). An engine that
// stores a positioned write's payload and makes its value on every read (the JetStream
// engine) registers AppendRecord under RecordName, the name the event store's
// positioned value has.

// RecordName is the name of the event store's positioned value, which an engine may
// store with each record: stable, never another encoding.
const RecordName = "rockline.event"

// AppendRecordPayload appends what a record holds besides its position, which the
// commit fills in: the event's index in the commit's entry and its ID.
func AppendRecordPayload(dst []byte, idx int, id string) []byte {
	return append(binary.AppendUvarint(dst, uint64(idx)), id...)
}

// AppendRecord appends the record for the commit position pos and payload (made by
// AppendRecordPayload): uvarint(pos), then the payload. It is the Append of the event
// store's positioned value, and depends only on its arguments.
func AppendRecord(dst []byte, pos uint64, payload []byte) []byte {
	return append(binary.AppendUvarint(dst, pos), payload...)
}

// ParseRecord parses a record made by AppendRecord; ok is false when it does not
// decode.
func ParseRecord(v []byte) (pos uint64, idx int, id string, ok bool) {
	pos, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, 0, "", false
	}
	i, m := binary.Uvarint(v[n:])
	if m <= 0 {
		return 0, 0, "", false
	}
	return pos, int(i), string(v[n+m:]), true
}

// MarkName is the name of the event store's tag marker value: a key per tag whose
// value is the position of the last commit that appended an event with the tag,
// written with pipeline.Txn.PutAtCommit by every such append. Stable, never another
// encoding; an engine that stores positioned writes by name registers AppendMark
// under it, as it registers AppendRecord under RecordName.
const MarkName = "rockline.mark"

// AppendMark appends the marker value for commit position pos: uvarint(pos). The
// payload is empty and ignored. It depends only on its arguments.
func AppendMark(dst []byte, pos uint64, _ []byte) []byte {
	return binary.AppendUvarint(dst, pos)
}

// ParseMark parses a value made by AppendMark; ok is false when it does not decode
// (empty, trailing bytes, or a varint not in its minimal form: a marker has one
// encoding).
func ParseMark(v []byte) (pos uint64, ok bool) {
	pos, n := binary.Uvarint(v)
	return pos, n > 0 && n == len(v) && (n == 1 || v[n-1] != 0)
}
