package esmodel_test

import (
	"fmt"
	"regexp"
	"strings"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
)

// Small pools keep collisions (two appends to one stream, a filter that matches some
// events and not others) frequent.
var (
	streamNames = []string{"s-0", "s-1", "t-0"}
	eventTypes  = []string{"a.1", "a.2", "b.1"}
	// tagSets are the drawn events' tags: none, one, or two in either order.
	tagSets = []string{"", "", "course:1", "student:a", "course:1,student:a", "student:a,course:2"}
)

// eventSpec is an event a call appends: its ID (unique unless retried) and type; its
// data is its ID.
// eventSpec is an event the model knows: its ID, type and tags (comma-separated,
// "" for none; a string keeps the spec comparable).
type eventSpec struct{ id, typ, tags string }

func (e eventSpec) api() eventstore.Event {
	return eventstore.Event{ID: e.id, Type: e.typ, Data: []byte(e.id), Tags: e.tagList()}
}

// tagList returns the spec's tags as the API takes them (nil for none).
func (e eventSpec) tagList() []string {
	if e.tags == "" {
		return nil
	}
	return strings.Split(e.tags, ",")
}

func apiEvents(evs []eventSpec) []eventstore.Event {
	out := make([]eventstore.Event, len(evs))
	for i, e := range evs {
		out[i] = e.api()
	}
	return out
}

// filterSpec is an eventstore.Filter the model evaluates on its own, from the
// documentation: every condition set must hold, and a stream condition never matches
// an event of no stream.
type filterSpec struct {
	streamPrefix, streamRegexp, typePrefix, typeRegexp string
}

// filters are the ones drawn: none, each kind of condition, and two together.
var filters = []filterSpec{
	{},
	{streamPrefix: "s"},
	{typePrefix: "a."},
	{streamRegexp: "0$"},
	{typeRegexp: `\.1$`},
	{streamPrefix: "s", typeRegexp: "2$"},
}

func drawFilter(t *rapid.T, label string) filterSpec {
	return filters[rapid.IntRange(0, len(filters)-1).Draw(t, label)]
}

func (f filterSpec) String() string {
	return fmt.Sprintf("{stream prefix %q, stream regexp %q, type prefix %q, type regexp %q}", f.streamPrefix, f.streamRegexp, f.typePrefix, f.typeRegexp)
}

func (f filterSpec) api() eventstore.Filter {
	out := eventstore.Filter{StreamPrefix: f.streamPrefix, TypePrefix: f.typePrefix}
	if f.streamRegexp != "" {
		out.StreamRegexp = regexp.MustCompile(f.streamRegexp)
	}
	if f.typeRegexp != "" {
		out.TypeRegexp = regexp.MustCompile(f.typeRegexp)
	}
	return out
}

func (f filterSpec) match(e *event) bool {
	if f.streamPrefix != "" || f.streamRegexp != "" {
		if e.stream == "" {
			return false
		}
	}
	switch {
	case !strings.HasPrefix(e.stream, f.streamPrefix), !strings.HasPrefix(e.typ, f.typePrefix):
		return false
	case f.streamRegexp != "" && !regexp.MustCompile(f.streamRegexp).MatchString(e.stream):
		return false
	case f.typeRegexp != "" && !regexp.MustCompile(f.typeRegexp).MatchString(e.typ):
		return false
	}
	return true
}
