package eventstore

import (
	"regexp"
	"strings"
)

// Filter selects events for ReadAll, SubscribeToAll and projections; it is evaluated
// inside rockline, so a subscriber is handed only what matches. Every condition set
// must hold (a zero Filter matches every event). The stream conditions never match an
// event of no stream (one added with pipeline.Txn.AddEvents).
type Filter struct {
	// StreamPrefix keeps events of streams whose name starts with it.
	StreamPrefix string
	// StreamRegexp keeps events of streams whose name it matches.
	StreamRegexp *regexp.Regexp
	// TypePrefix keeps events whose type starts with it.
	TypePrefix string
	// TypeRegexp keeps events whose type it matches.
	TypeRegexp *regexp.Regexp

	stream string // SubscribeToStream: exactly this stream
}

// Match reports whether e passes every condition of f.
func (f *Filter) Match(e *RecordedEvent) bool {
	streamed := f.stream != "" || f.StreamPrefix != "" || f.StreamRegexp != nil
	switch {
	case streamed && e.Stream == "":
		return false
	case f.stream != "" && e.Stream != f.stream:
		return false
	case f.StreamPrefix != "" && !strings.HasPrefix(e.Stream, f.StreamPrefix):
		return false
	case f.StreamRegexp != nil && !f.StreamRegexp.MatchString(e.Stream):
		return false
	case f.TypePrefix != "" && !strings.HasPrefix(e.Type, f.TypePrefix):
		return false
	case f.TypeRegexp != nil && !f.TypeRegexp.MatchString(e.Type):
		return false
	}
	return true
}
