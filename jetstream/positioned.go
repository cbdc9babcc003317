package jetstream

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/pipeline"
)

// Positioned writes: the engine side of pipeline.Txn.PutAtCommit, a write whose value
// is made from its commit's log position, which is known only once the commit is
// stored.
//
// The local engine calls the PositionedValue's Append once at commit and stores its
// result. A JetStream batch gets its sequences from the stream leader, so the engine
// stores the payload instead, with two headers: Rl-Enc names the codec (the Name of
// one of Config.PositionedValues) and Rl-At is the message's distance to its commit
// marker.
// A batch is stored at consecutive sequences, marker last, so the commit's position
// is the message's sequence plus Rl-At, known to every reader of the message without
// another request. Every read that returns the write's value (Get, Scan, an
// Iterator, Txn.Get and Txn.NewIterator, Entry, ReadLog and Subscribe) returns
//
//	codec.Append(nil, sequence+Rl-At, payload), codec named Rl-Enc
//
// and sets the Item's or LoggedWrite's AtCommit to that position: exactly the bytes
// the local engine would have stored for the same payload and position. Append runs
// on every read, so it must be as pipeline.PositionedValue says: fast, never failing,
// depending on nothing but its arguments; and since the name is stored, a name must
// keep meaning the same encoding for as long as the partition holds writes made with
// it.

// PositionedValue is pipeline.PositionedValue: a named codec whose Append appends to
// dst the value for the commit position pos and the payload given with the write.
type PositionedValue = pipeline.PositionedValue

// Header names of positioned writes.
const (
	hdrAt  = "Rl-At"  // distance, in messages, from a positioned write to its commit marker
	hdrEnc = "Rl-Enc" // the name of a positioned write's encoding
	// MaxEncodingLen bounds the Name of a codec in Config.PositionedValues.
	MaxEncodingLen = 32
)

var encodingRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// positionedCodecs checks Config.PositionedValues and returns them by name.
func positionedCodecs(list []PositionedValue) (map[string]PositionedValue, error) {
	m := make(map[string]PositionedValue, len(list))
	for i, c := range list {
		field := fmt.Sprintf("PositionedValues[%d]", i)
		if c == nil {
			return nil, &ConfigError{Field: field, Value: "nil", Expected: "a codec"}
		}
		name := c.Name()
		if !encodingRE.MatchString(name) {
			return nil, &ConfigError{Field: field, Value: strconv.Quote(name), Expected: fmt.Sprintf("a name of 1..%d of A-Z a-z 0-9 _ . -", MaxEncodingLen)}
		}
		if _, dup := m[name]; dup {
			return nil, &ConfigError{Field: field, Value: strconv.Quote(name), Expected: "a name no other codec of the list has"}
		}
		m[name] = c
	}
	return m, nil
}

// PositionedValueError reports a positioned write read back whose codec is not in this
// client's Config.PositionedValues (another client wrote it with a codec this one does
// not know), or whose Rl-At header does not parse. It matches
// pipeline.ErrCorrupt.
type PositionedValueError struct {
	Subject  string
	Sequence uint64
	Encoding string
	Reason   string
}

// Error names the message and what is wrong with it.
func (e *PositionedValueError) Error() string {
	return fmt.Sprintf("rockline/jetstream: positioned write %s at %d (encoding %q): %s", e.Subject, e.Sequence, e.Encoding, e.Reason)
}

// Is reports whether target is pipeline.ErrCorrupt.
func (e *PositionedValueError) Is(target error) bool { return target == pipeline.ErrCorrupt }

// value returns what a read of the key message (subject, seq, h, data) yields: data
// itself for an ordinary write; for a positioned write, the encoding's value for its
// commit position, and that position.
func (p *Partition) value(subject string, seq uint64, h nats.Header, data []byte) ([]byte, uint64, error) {
	enc := h.Get(hdrEnc)
	if enc == "" {
		return data, 0, nil
	}
	off, err := strconv.ParseUint(h.Get(hdrAt), 10, 16)
	if err != nil || off == 0 || off >= MaxBatchMessages {
		return nil, 0, &PositionedValueError{Subject: subject, Sequence: seq, Encoding: enc, Reason: fmt.Sprintf("header %s = %q is not a distance 1..%d", hdrAt, h.Get(hdrAt), MaxBatchMessages-1)}
	}
	codec := p.codecs[enc]
	if codec == nil {
		return nil, 0, &PositionedValueError{Subject: subject, Sequence: seq, Encoding: enc, Reason: "no codec of Config.PositionedValues has that name"}
	}
	pos := seq + off
	return codec.Append(nil, pos, data), pos, nil
}
