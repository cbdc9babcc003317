package logentry

import (
	"encoding/binary"
	"fmt"
)

// Encoder encodes one entry incrementally, straight from the commit, without
// building an [Entry]. Create it with [NewEncoder], call [Encoder.Event]
// exactly nEvents times, then [Encoder.Write] exactly nWrites times, then
// [Encoder.Finish] once. The bytes produced are identical to those of
// [Append] for the equivalent Entry. The Encoder allocates nothing beyond
// growing its destination slice; pass a dst with spare capacity (for
// instance a reused buffer) to avoid even that.
//
// The zero Encoder is unusable: its methods panic. Misuse of the call
// sequence (wrong number of events or writes, writes before all events, an
// empty family, use after Finish) is a programming error and panics; it
// never produces an invalid encoding.
type Encoder struct {
	buf        []byte
	start      int
	eventsLeft int
	writesLeft int
	nWrites    int
	state      uint8
	streams    bool // events carry a stream and revision (NewStreamEncoder)
	sawStream  bool // an event named a stream
	tags       bool // events carry tags (NewTaggedEncoder)
	sawTag     bool // an event had a tag
}

const (
	encoderZero uint8 = iota
	encoderOpen
	encoderFinished
)

// NewEncoder starts the encoding of the entry at position, committed at
// unixNano (Unix nanoseconds), with nEvents events and nWrites writes,
// appending to dst. It writes the header immediately.
//
// NewEncoder panics if a count is negative, or if filler is true and a count
// is not zero (a filler has no events and no writes).
func NewEncoder(dst []byte, position uint64, unixNano int64, filler bool, nEvents, nWrites int) Encoder {
	if nEvents < 0 || nWrites < 0 {
		panic(fmt.Sprintf("logentry: NewEncoder with negative counts (%d events, %d writes)", nEvents, nWrites))
	}
	if filler && (nEvents != 0 || nWrites != 0) {
		panic(fmt.Sprintf("logentry: filler entry at position %d with %d events and %d writes", position, nEvents, nWrites))
	}
	var flags byte
	if filler {
		flags = flagFiller
	}
	return newEncoder(dst, position, unixNano, flags, nEvents, nWrites)
}

// newEncoder writes the header with flags and returns the Encoder of the rest.
func newEncoder(dst []byte, position uint64, unixNano int64, flags byte, nEvents, nWrites int) Encoder {
	e := Encoder{
		start:      len(dst),
		eventsLeft: nEvents,
		writesLeft: nWrites,
		nWrites:    nWrites,
		state:      encoderOpen,
		streams:    flags&flagStreams != 0,
		tags:       flags&flagTags != 0,
	}
	e.buf = appendHeader(dst, position, unixNano, flags, nEvents)
	if nEvents == 0 {
		e.buf = binary.AppendUvarint(e.buf, uint64(nWrites))
	}
	return e
}

// NewStreamEncoder is NewEncoder for an entry whose events carry the stream and
// revision they were appended at: add them with [Encoder.StreamEvent] (or
// [Encoder.Event] for an event of no stream). At least one event must name a
// stream (see the format's flags bit 2); Finish panics otherwise.
func NewStreamEncoder(dst []byte, position uint64, unixNano int64, nEvents, nWrites int) Encoder {
	if nEvents < 1 || nWrites < 0 {
		panic(fmt.Sprintf("logentry: NewStreamEncoder with %d events and %d writes (at least one event needed)", nEvents, nWrites))
	}
	return newEncoder(dst, position, unixNano, flagStreams, nEvents, nWrites)
}

// NewTaggedEncoder is NewEncoder for an entry whose events carry tags, and, when
// streams is true, the stream and revision they were appended at too (as
// NewStreamEncoder's): add them with [Encoder.TaggedEvent]. At least one event must
// have a tag (the format's flags bit 3), and with streams at least one must name a
// stream; Finish panics otherwise.
func NewTaggedEncoder(dst []byte, position uint64, unixNano int64, streams bool, nEvents, nWrites int) Encoder {
	if nEvents < 1 || nWrites < 0 {
		panic(fmt.Sprintf("logentry: NewTaggedEncoder with %d events and %d writes (at least one event needed)", nEvents, nWrites))
	}
	flags := byte(flagTags)
	if streams {
		flags |= flagStreams
	}
	return newEncoder(dst, position, unixNano, flags, nEvents, nWrites)
}

func (e *Encoder) mustBeOpen(method string) {
	switch e.state {
	case encoderZero:
		panic("logentry: Encoder." + method + " on an Encoder not created by NewEncoder")
	case encoderFinished:
		panic("logentry: Encoder." + method + " after Finish")
	}
}

// Event appends the next event, of no stream. It panics if called more than
// nEvents times (see [NewEncoder]).
func (e *Encoder) Event(id, typ string, data, meta []byte) {
	e.StreamEvent("", 0, id, typ, data, meta)
}

// StreamEvent appends the next event, appended to stream at revision rev. It
// panics on an Encoder from NewEncoder when stream is not empty, for a
// revision without a stream, and if called more than nEvents times.
func (e *Encoder) StreamEvent(stream string, rev uint64, id, typ string, data, meta []byte) {
	e.TaggedEvent(stream, rev, id, typ, data, meta, nil)
}

// TaggedEvent appends the next event, appended to stream at revision rev (empty and 0
// for none), with tags. It panics as StreamEvent does, for tags on an Encoder not
// from NewTaggedEncoder, and for an empty tag.
func (e *Encoder) TaggedEvent(stream string, rev uint64, id, typ string, data, meta []byte, tags []string) {
	e.mustBeOpen("Event")
	if len(tags) > 0 && !e.tags {
		panic("logentry: Encoder.TaggedEvent with tags on an Encoder not from NewTaggedEncoder")
	}
	if e.eventsLeft == 0 {
		panic("logentry: Encoder.Event called more times than the event count given to NewEncoder")
	}
	if stream == "" && rev != 0 {
		panic(fmt.Sprintf("logentry: event with revision %d but no stream", rev))
	}
	if stream != "" && !e.streams {
		panic("logentry: Encoder.StreamEvent with a stream on an Encoder from NewEncoder")
	}
	e.buf = appendEvent(e.buf, id, typ, data, meta)
	if e.streams {
		e.buf = appendStream(e.buf, stream, rev)
		e.sawStream = e.sawStream || stream != ""
	}
	if e.tags {
		e.buf = appendTags(e.buf, tags)
		e.sawTag = e.sawTag || len(tags) > 0
	}
	e.eventsLeft--
	if e.eventsLeft == 0 {
		e.buf = binary.AppendUvarint(e.buf, uint64(e.nWrites))
	}
}

// Write appends the next write: a put of value under key in column family
// family, or a tombstone for key when del is true (value is then ignored).
// It panics if family is empty, if not all events have been added yet, or if
// called more than nWrites times (see [NewEncoder]).
func (e *Encoder) Write(family string, key, value []byte, del bool) {
	e.mustBeOpen("Write")
	if e.eventsLeft != 0 {
		panic(fmt.Sprintf("logentry: Encoder.Write called with %d events still to add", e.eventsLeft))
	}
	if e.writesLeft == 0 {
		panic("logentry: Encoder.Write called more times than the write count given to NewEncoder")
	}
	e.buf = appendWrite(e.buf, family, key, value, del)
	e.writesLeft--
}

// DeleteRange appends the next write: a range deletion of every key in [start, end)
// of family. It counts as one of the nWrites and panics as Write does.
func (e *Encoder) DeleteRange(family string, start, end []byte) {
	e.mustBeOpen("DeleteRange")
	if e.eventsLeft != 0 {
		panic(fmt.Sprintf("logentry: Encoder.DeleteRange called with %d events still to add", e.eventsLeft))
	}
	if e.writesLeft == 0 {
		panic("logentry: Encoder.DeleteRange called more times than the write count given to NewEncoder")
	}
	e.buf = appendRange(e.buf, family, start, end)
	e.writesLeft--
}

// Finish appends the checksum and returns dst (as given to [NewEncoder])
// extended by the entry's encoding. It panics, as programmer misuse, if fewer
// events or writes than announced were added, or if called twice. The
// Encoder is unusable afterwards.
func (e *Encoder) Finish() []byte {
	e.mustBeOpen("Finish")
	if e.eventsLeft != 0 || e.writesLeft != 0 {
		panic(fmt.Sprintf("logentry: Encoder.Finish with %d events and %d writes still to add", e.eventsLeft, e.writesLeft))
	}
	if e.streams && !e.sawStream {
		panic("logentry: Encoder.Finish on a stream Encoder whose events name no stream")
	}
	if e.tags && !e.sawTag {
		panic("logentry: Encoder.Finish on a tagged Encoder whose events have no tag")
	}
	b := appendChecksum(e.buf, e.start)
	e.buf = nil
	e.state = encoderFinished
	return b
}
