// Package logentry defines the binary encoding of one commit-log entry of
// the rockline write pipeline.
//
// Every commit appends exactly one entry to the log. The entry is stored as
// the value under an 8-byte big-endian key holding its position (see [Key]),
// so the log iterates in position order. An entry records the commit time,
// the events appended by the commit and the RocksDB writes (puts and
// tombstones) it applied, and the column-family creations and drops it
// records (a family's creation or drop is an entry of its own, so a replay
// of the log reproduces the family set). A filler entry is a void entry written to fill a
// position whose commit failed after the position had been assigned; it has
// no events and no writes, so the log never has holes.
//
// The encoding is compact (varint lengths, no padding), versioned (a leading
// version byte) and checksummed (a trailing CRC-32C). Encoding never
// allocates beyond growing the destination slice: use [Append] with an
// [Entry], or an [Encoder] to stream events and writes straight from the
// commit without building an Entry. [Size] returns the exact encoded size so
// callers can preallocate. [Decode] validates everything it reads and
// reports any problem as a [*CorruptEntryError] (which matches [ErrCorrupt]
// with errors.Is); it never panics and never returns a partially decoded
// entry.
//
// # Format, version 1
//
// Integers written "uvarint" and "varint" use the encoding of
// [encoding/binary.AppendUvarint] and [encoding/binary.AppendVarint]
// (zig-zag); they must be in minimal form (a non-final zero byte is
// rejected), so every valid entry has exactly one encoding and decoding then
// re-encoding reproduces the input byte for byte. A "bytes" field is a
// uvarint length followed by that many bytes; empty and nil are not
// distinguished (both encode as length 0 and decode as nil, or "" for
// strings).
//
//	offset  field      encoding
//	0       version    1 byte, always 0x01
//	1       flags      1 byte: bit 0 = filler; bit 1 = family operations
//	                   follow the writes (never with bit 0); bit 2 = events
//	                   carry a stream and revision (set exactly when one
//	                   event names a stream); bit 3 = events carry tags
//	                   (set exactly when one event has a tag); bits 4-7 zero
//	2       position   uvarint, must equal the position in the key
//	        time       varint, commit time in Unix nanoseconds
//	        nEvents    uvarint (0 for fillers)
//	        events     nEvents times:
//	                     id        bytes (UTF-8 string)
//	                     type      bytes (UTF-8 string)
//	                     data      bytes
//	                     metadata  bytes
//	                     stream    bytes (UTF-8 string; empty: no stream),
//	                               only when flags bit 2 is set
//	                     revision  uvarint, 0 when stream is empty; only
//	                               when flags bit 2 is set
//	                     nTags     uvarint, only when flags bit 3 is set
//	                     tags      nTags times: bytes (UTF-8 string,
//	                               non-empty)
//	        nWrites    uvarint (0 for fillers)
//	        writes     nWrites times:
//	                     kind      1 byte: 0 = put, 1 = delete (tombstone),
//	                               2 = range delete (every key in [key, value))
//	                     family    bytes, column family name, non-empty
//	                     key       bytes
//	                     value     bytes, present only when kind = 0 or 2
//	        nFamilies  uvarint, >= 1, present only when flags bit 1 is set
//	        families   nFamilies times:
//	                     kind      1 byte: 0 = create, 1 = drop
//	                     family    bytes, qualified family name, non-empty
//	len-4   checksum   4 bytes, little-endian CRC-32C (Castagnoli) of all
//	                   preceding bytes
//
// The smallest entry is 10 bytes (an entry at position 0, time 0, with no
// events and no writes). For example, a filler at position 300 committed at
// Unix time 0 encodes as
//
//	01 01 ac 02 00 00 00 <crc32c: 4 bytes>
//
// Decode checks, in order: the minimal length, the checksum, the version,
// the flags, then every field: the position must match, counts must be
// plausible against the bytes that remain (an event takes at least 4 bytes,
// 6 with a stream, one more with tags; a tag 2; a write 4) before anything is
// allocated for them, every length must stay within the entry, write kinds must
// be 0, 1 or 2 and family operation kinds 0 or 1, families non-empty, fillers
// must have no events and no writes, the stream flag needs an event that names
// a stream and an event without a stream has revision 0, the tag flag needs an
// event with a tag and tags are non-empty, and no bytes may follow the last
// write.
//
// Strings (event ids, types, streams and tags, family names) are copied out of the input;
// byte slices (event data and metadata, write keys and values) alias the
// input, so the caller must not modify the input while the entry is in use,
// or must copy the slices it keeps.
package logentry
