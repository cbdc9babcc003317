package pipeline

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Event is one application event recorded in a commit's log entry. Type must be 1..256
// bytes of valid UTF-8; ID (optional, at most 256 bytes) identifies the event for
// idempotent appends; Data and Metadata are opaque, may be nil, and are copied. Tags
// (optional, at most MaxEventTags, each 1..MaxTagLen bytes of valid UTF-8, no two
// equal) label the event beyond its stream and type, for the event store's tag
// queries and conditions (a course and a student: "course:7", "student:ada"); they
// are recorded in order and copied.
type Event struct {
	ID       string
	Type     string
	Data     []byte
	Metadata []byte
	Tags     []string `json:",omitempty"`
}

// RecordedEvent is an event as the log holds it, the one form every reader hands out
// (the log readers, subscriptions, the event store's stream reads): the stream it was
// appended to and its revision there (an empty Stream and revision 0 for an event
// added with AddEvents), the log position of its commit, its index among the commit's
// events, and the commit's time.
type RecordedEvent struct {
	Stream   string
	Revision uint64
	Position uint64
	Index    int
	Time     time.Time
	Event
}

// Limits on events.
const (
	MaxEventTypeLen = 256
	MaxEventIDLen   = 256
	MaxEventDataLen = 64 << 20
	MaxEventTags    = 32
	MaxTagLen       = 256
)

// CheckEvents returns the *ArgumentError AddEvents would return for events, naming op
// as the operation, or nil. A layer that writes more than the events (the event store
// writes a stream head) calls it first, so a bad event leaves the transaction
// unchanged.
func CheckEvents(op string, events []Event) error {
	for i, e := range events {
		if err := checkEvent(op, i, e); err != nil {
			return err
		}
	}
	return nil
}

func checkEvent(op string, i int, e Event) error {
	arg := fmt.Sprintf("events[%d]", i)
	switch {
	case e.Type == "":
		return &ArgumentError{Op: op, Arg: arg + ".Type", Reason: "must not be empty"}
	case len(e.Type) > MaxEventTypeLen:
		return &ArgumentError{Op: op, Arg: arg + ".Type", Reason: fmt.Sprintf("%d bytes exceeds %d", len(e.Type), MaxEventTypeLen)}
	case !utf8.ValidString(e.Type):
		return &ArgumentError{Op: op, Arg: arg + ".Type", Reason: "must be valid UTF-8"}
	case len(e.ID) > MaxEventIDLen:
		return &ArgumentError{Op: op, Arg: arg + ".ID", Reason: fmt.Sprintf("%d bytes exceeds %d", len(e.ID), MaxEventIDLen)}
	case !utf8.ValidString(e.ID):
		return &ArgumentError{Op: op, Arg: arg + ".ID", Reason: "must be valid UTF-8"}
	case len(e.Data)+len(e.Metadata) > MaxEventDataLen:
		return &ArgumentError{Op: op, Arg: arg + ".Data", Reason: fmt.Sprintf("data and metadata of %d bytes exceed %d", len(e.Data)+len(e.Metadata), MaxEventDataLen)}
	case len(e.Tags) > MaxEventTags:
		return &ArgumentError{Op: op, Arg: arg + ".Tags", Reason: fmt.Sprintf("%d tags exceed %d", len(e.Tags), MaxEventTags)}
	}
	return checkTags(op, arg, e.Tags)
}

// checkTags checks an event's tags (arg names the event).
func checkTags(op, arg string, tags []string) error {
	for j, tag := range tags {
		targ := fmt.Sprintf("%s.Tags[%d]", arg, j)
		switch {
		case tag == "":
			return &ArgumentError{Op: op, Arg: targ, Reason: "must not be empty"}
		case len(tag) > MaxTagLen:
			return &ArgumentError{Op: op, Arg: targ, Reason: fmt.Sprintf("%d bytes exceeds %d", len(tag), MaxTagLen)}
		case !utf8.ValidString(tag):
			return &ArgumentError{Op: op, Arg: targ, Reason: "must be valid UTF-8"}
		}
		for k := range j {
			if tags[k] == tag {
				return &ArgumentError{Op: op, Arg: targ, Reason: fmt.Sprintf("%q repeats tags[%d]", tag, k)}
			}
		}
	}
	return nil
}
