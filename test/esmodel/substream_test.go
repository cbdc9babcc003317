package esmodel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// subscribeStream: SubscribeToStream from a drawn revision (below, at or above
// reclaimed and hidden ones), caught up, then live for an append, then, when drawn,
// closed and subscribed again after the last revision handed out, as an application
// storing its stream position would. The revisions a read from there returns when it
// subscribes must all come, each once, in order, and so must the live one; revisions
// hidden but still in the log may come too (the log still holds them, and the
// documentation says subscriptions hand them out), none below from.
func (m *machine) subscribeStream(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	st := m.model.streams[s]
	if rapid.Bool().Draw(t, "reclaim first") {
		m.reclaim(t)
	}
	from := uint64(rapid.IntRange(0, int(st.nextRev())+1).Draw(t, "from"))
	if gone := st.reclaimed(); len(gone) > 0 && rapid.Bool().Draw(t, "from a reclaimed revision") {
		from = rapid.SampledFrom(gone).Draw(t, "reclaimed revision")
	}
	k := &streamSink{stream: s, from: from, must: make(map[uint64]bool)}
	what := fmt.Sprintf("SubscribeToStream(%s, %d)", s, from)
	sub, ok := k.subscribe(t, m, what, from)
	if !ok {
		return
	}
	if !st.tombstoned {
		evs := m.drawEvents(t, "live")
		res, err := m.es.Append(context.Background(), s, eventstore.Any, apiEvents(evs)...)
		m.expectAppend(t, what+": live Append", s, expectation{kind: expAny}, evs, res, err, true)
		for r := res.NextExpectedRevision + 1 - uint64(len(evs)); r <= res.NextExpectedRevision; r++ {
			// A revision the stream's state hides as it is appended (below a
			// TruncateBefore set earlier) is no more handed out than read.
			if r >= from && st.readable(r) {
				k.must[r] = true
			}
		}
		if !waitPosition(t, what, sub, res.Position) {
			fatalf(t, "%s: ended before the live append at %d: %v", what, res.Position, sub.Wait())
		}
	}
	if err := sub.Close(); err != nil {
		fatalf(t, "%s: %v", what, err)
	}
	if rapid.Bool().Draw(t, "resume") {
		next := k.next()
		if sub, ok = k.subscribe(t, m, fmt.Sprintf("%s, resumed at %d", what, next), next); ok {
			if err := sub.Close(); err != nil {
				fatalf(t, "%s: resumed: %v", what, err)
			}
		}
	}
	k.verify(t, m, what)
}

// streamSink is what an application following one stream keeps: the events it was
// handed, and the revisions it must be handed.
type streamSink struct {
	stream string
	from   uint64
	mu     sync.Mutex
	got    []seen
	must   map[uint64]bool
}

// next is where the application resumes: after the last revision it was handed.
func (k *streamSink) next() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.got) == 0 {
		return k.from
	}
	return k.got[len(k.got)-1].Revision + 1
}

// subscribe subscribes from revision from, notes the revisions a read from there
// returns now, and waits until the subscription has caught up with the log. It
// returns false, having checked why, when the subscription may not go on: the stream
// is tombstoned, or its events are in removed log entries.
func (k *streamSink) subscribe(t *rapid.T, m *machine, what string, from uint64) (*pipeline.Subscription, bool) {
	st := m.model.streams[k.stream]
	for r := from; r < st.nextRev() && !st.tombstoned; r++ {
		if st.readable(r) {
			k.must[r] = true
		}
	}
	last := m.db.LastPosition()
	sub, err := m.es.SubscribeToStream(context.Background(), k.stream, from, func(e eventstore.RecordedEvent) error {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.got = append(k.got, seenOf(e))
		return nil
	})
	switch {
	case err != nil && st.tombstoned:
		expectDeleted(t, what+" of a tombstoned stream", err, k.stream)
		return nil, false
	case err != nil:
		fatalf(t, "%s: %v", what, err)
	}
	if waitPosition(t, what, sub, last) {
		return sub, true
	}
	err = sub.Wait()
	if errors.Is(err, pipeline.ErrLogTruncated) && m.model.streamTruncated(k.stream, from) {
		k.must = nil // the log no longer holds what the subscription was to hand out
		return nil, false
	}
	fatalf(t, "%s: ended at %d before catching up with %d: %v", what, sub.Position(), last, err)
	return nil, false
}

// streamTruncated reports whether an event of s at or above revision from is in a
// log entry TruncateLog removed.
func (m *model) streamTruncated(s string, from uint64) bool {
	for _, e := range m.streams[s].revs {
		if e.rev >= from && e.pos < m.first {
			return true
		}
	}
	return false
}

// verify checks what the application was handed: revisions rising, none below from,
// each the stream's event at that revision, every one it must have among them.
func (k *streamSink) verify(t *rapid.T, m *machine, what string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := m.model.streams[k.stream]
	handed := make(map[uint64]bool)
	for i, g := range k.got {
		if g.Revision < k.from || (i > 0 && g.Revision <= k.got[i-1].Revision) {
			fatalf(t, "%s: handed out revisions %v: want them rising from %d, each once", what, revisions(k.got), k.from)
		}
		if g.Revision >= st.nextRev() || g != seenModel(st.revs[g.Revision]) {
			fatalf(t, "%s: handed out %+v, which is not the stream's event at revision %d", what, g, g.Revision)
		}
		handed[g.Revision] = true
	}
	for r := range k.must {
		if !handed[r] && st.revs[r].pos >= m.model.first {
			fatalf(t, "%s: revision %d (a read returned it, or it was appended live) never handed out; handed out %v; stream %v", what, r, revisions(k.got), st)
		}
	}
}

func revisions(evs []seen) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Revision
	}
	return out
}
