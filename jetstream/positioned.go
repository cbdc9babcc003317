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
// The local engine calls the PositionedValue once at commit and stores its result. A
// JetStream batch gets its sequences from the stream leader, so the engine stores the
// payload instead, with two headers: Rl-Enc names the encoding (a key of
// Config.PositionedValues) and Rl-At is the message's distance to its commit marker.
// A batch is stored at consecutive sequences, marker last, so the commit's position
// is the message's sequence plus Rl-At, known to every reader of the message without
// another request. Every read that returns the write's value (Get, Scan, an
// Iterator, Txn.Get and Txn.NewIterator, Entry, ReadLog and Subscribe) returns
//
//	Config.PositionedValues[Rl-Enc](nil, sequence+Rl-At, payload)
//
// and sets the Item's or LoggedWrite's AtCommit to that position: exactly the bytes
// the local engine would have stored for the same payload and position. The function
// runs on every read, so it must be as pipeline.PositionedValue says: fast, never
// failing, depending on nothing but its arguments.

// PositionedValue is pipeline.PositionedValue: it appends to dst the value for the
// commit position pos and the payload given with the write, and returns it.
type PositionedValue = pipeline.PositionedValue

// Header names of positioned writes.
const (
	hdrAt  = "Rl-At"  // distance, in messages, from a positioned write to its commit marker
	hdrEnc = "Rl-Enc" // the name of a positioned write's encoding
	// MaxEncodingLen bounds a name in Config.PositionedValues.
	MaxEncodingLen = 32
)

var encodingRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

func checkPositionedValues(m map[string]PositionedValue) error {
	for name, fn := range m {
		field := "PositionedValues[" + strconv.Quote(name) + "]"
		if !encodingRE.MatchString(name) {
			return &ConfigError{Field: field, Value: strconv.Quote(name), Expected: fmt.Sprintf("a name of 1..%d of A-Z a-z 0-9 _ . -", MaxEncodingLen)}
		}
		if fn == nil {
			return &ConfigError{Field: field, Value: "nil", Expected: "a function"}
		}
	}
	return nil
}

// PositionedValueError reports a positioned write read back whose encoding is not in
// this client's Config.PositionedValues (another client wrote it with an encoding this
// one does not know), or whose Rl-At header does not parse. It matches
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
	fn := p.cfg.PositionedValues[enc]
	if fn == nil {
		return nil, 0, &PositionedValueError{Subject: subject, Sequence: seq, Encoding: enc, Reason: "the encoding is not in Config.PositionedValues"}
	}
	pos := seq + off
	return fn(nil, pos, data), pos, nil
}
