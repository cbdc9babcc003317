package eventstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// VerifyReport is what Store.Verify found; an empty Problems list means the stream
// index agrees with the log.
type VerifyReport struct {
	Streams       uint64 // streams with a head
	Records       uint64 // event records of the index
	EventsChecked uint64 // events of a stream found in the log
	Tags          uint64 // tag markers checked against the log
	IndexEntries  uint64 // index entries checked against the log
	ProblemCount  uint64 // every problem found; Problems lists the first ones
	Problems      []string
}

// OK reports whether the index agrees with the log.
func (r *VerifyReport) OK() bool { return r.ProblemCount == 0 }

func (r *VerifyReport) problem(format string, a ...any) {
	r.ProblemCount++
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// verifiedStream is what Verify learns of one stream.
type verifiedStream struct {
	head           uint64
	state          streamState
	first, last    uint64 // the revisions of the first and last record
	records        bool   // first and last are set
	visibleRecords uint64 // records naming a position the log still holds
	logEvents      uint64 // events of the stream the log holds, in first..last
	logNext        uint64 // the revision the next event in the log must have
	logSeen        bool
}

// Verify checks the stream index against the log: every stream's records form one
// run of revisions ending at its head (revisions below it may have been reclaimed,
// none its state keeps visible); every record names an event of its stream and
// revision, with its ID, in the log entry it points to; and, walking the log, each
// stream's events have revisions that rise by one, none beyond its head, and each has
// its record (so no event is indexed twice or left out). Every tag marker must hold
// the position of the last entry with a stream event carrying the tag, and every tag
// of such an event must have a marker. Records and markers pointing below a
// truncated log's first position are counted but cannot be checked. Every index
// entry must name a stream event whose record exists and which the index keys by the
// entry's value, and each index must hold as many entries as the log's events with a
// record have values under it (so none is missing); an index whose Select this Store
// lacks is checked only entry by entry.
//
// Like pipeline.DB.Verify it expects a database that does not change meanwhile (a
// read-only or secondary open). Progress, when set, is called with the stage
// ("index" counting records with total 0 for unknown, then "log" counting positions
// to the last). Problems go into the report; the error is for a check that could not
// run.
func (s *Store) Verify(ctx context.Context, progress func(stage string, done, total uint64)) (VerifyReport, error) {
	if progress == nil {
		progress = func(string, uint64, uint64) {}
	}
	var r VerifyReport
	streams := map[string]*verifiedStream{}
	first := s.db.FirstPosition()
	err := s.db.View(func(tx *pipeline.Txn) error {
		if err := s.verifyHeads(tx, streams, &r); err != nil {
			return err
		}
		return s.verifyRecords(ctx, tx, streams, first, &r, progress)
	})
	if err != nil {
		return r, err
	}
	markers, err := s.readMarkers()
	if err != nil {
		return r, err
	}
	lastTagged := map[string]uint64{} // the log's last position of each tag
	expected := map[string]uint64{}   // index -> entries the log's live events need
	var vals []string
	last := s.db.LastPosition()
	for pos := first; pos <= last; {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		page, err := s.db.ReadLog(pos, 1024)
		for _, e := range page {
			for _, ev := range e.Events {
				if ev.Stream != "" {
					r.EventsChecked++
					checkLogEvent(streams, &ev, first, &r)
					for _, tag := range ev.Tags {
						lastTagged[tag] = e.Position
					}
					if live(streams, &ev) {
						vals = s.countEntries(&ev, expected, vals)
					}
				}
			}
			pos = e.Position + 1
		}
		if err != nil {
			return r, fmt.Errorf("verify streams: %w", err)
		}
		if len(page) == 0 {
			break
		}
		progress("log", pos-first, last-first+1)
	}
	checkMarkers(markers, lastTagged, first, &r)
	if err := s.verifyIndexes(ctx, streams, first, expected, &r); err != nil {
		return r, err
	}
	for _, name := range slices.Sorted(maps.Keys(streams)) {
		v := streams[name]
		if v.records && v.logEvents != v.visibleRecords {
			r.problem("stream %q: %d records name positions the log holds, the log holds %d of its events in revisions %d..%d", name, v.visibleRecords, v.logEvents, v.first, v.last)
		}
	}
	return r, nil
}

// verifyHeads reads every head record.
func (s *Store) verifyHeads(tx *pipeline.Txn, streams map[string]*verifiedStream, r *VerifyReport) error {
	it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'h'}, Upper: []byte{'i'}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[1:])
		head, st, err := parseHead(name, it.Value())
		if err != nil {
			r.problem("%v", err)
			continue
		}
		r.Streams++
		streams[name] = &verifiedStream{head: head, state: st}
	}
	return it.Err()
}

// verifyRecords walks every event record, checking runs and the events they name.
func (s *Store) verifyRecords(ctx context.Context, tx *pipeline.Txn, streams map[string]*verifiedStream, first uint64, r *VerifyReport, progress func(string, uint64, uint64)) error {
	it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'r'}, Upper: []byte{'s'}})
	if err != nil {
		return err
	}
	defer it.Close()
	var cached pipeline.LogEntry
	for it.First(); it.Valid(); it.Next() {
		r.Records++
		if r.Records%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			progress("index", r.Records, 0)
		}
		k := it.Key()
		sep := bytes.IndexByte(k, 0)
		if sep < 1 || len(k)-sep != 9 {
			r.problem("stream index: malformed record key %x", k)
			continue
		}
		name, rev := string(k[1:sep]), binary.BigEndian.Uint64(k[sep+1:])
		v := streams[name]
		if v == nil {
			r.problem("stream %q revision %d: a record without a head", name, rev)
			continue
		}
		switch {
		case !v.records:
			v.first, v.records = rev, true
		case rev != v.last+1:
			r.problem("stream %q: records jump from revision %d to %d", name, v.last, rev)
		}
		v.last = rev
		pos, idx, id, err := parseEventValue(it.Value())
		if err != nil {
			r.problem("stream %q revision %d: %v", name, rev, err)
			continue
		}
		if pos < first {
			continue // the log below pos was truncated
		}
		v.visibleRecords++
		if cached.Position != pos {
			if cached, err = s.db.Entry(pos); err != nil {
				if errors.Is(err, pipeline.ErrClosed) || errors.Is(err, ctx.Err()) {
					return err
				}
				r.problem("stream %q revision %d: log entry %d: %v", name, rev, pos, err)
				continue
			}
		}
		if idx >= len(cached.Events) {
			r.problem("stream %q revision %d: log entry %d has %d events, the record names index %d", name, rev, pos, len(cached.Events), idx)
			continue
		}
		if ev := cached.Events[idx]; ev.Stream != name || ev.Revision != rev || ev.ID != id {
			r.problem("stream %q revision %d (id %q): log entry %d event %d is %q revision %d (id %q)", name, rev, id, pos, idx, ev.Stream, ev.Revision, ev.ID)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for name, v := range streams {
		st := v.state
		switch {
		case v.records && v.last != v.head:
			r.problem("stream %q: head at revision %d, last record at %d", name, v.head, v.last)
		case st.tombstoned || st.deleted || st.noEvents || st.MaxAge > 0:
			// a soft delete or an age limit may have reclaimed any prefix
		case st.lowest(v.head) <= v.head && (!v.records || v.first > st.lowest(v.head)):
			r.problem("stream %q: revisions from %d are visible, the records start at %d", name, st.lowest(v.head), v.first)
		}
	}
	return nil
}

// checkLogEvent checks one event of the log against what the index said.
func checkLogEvent(streams map[string]*verifiedStream, ev *pipeline.RecordedEvent, first uint64, r *VerifyReport) {
	v := streams[ev.Stream]
	if v == nil {
		r.problem("log entry %d: event of stream %q revision %d, a stream without a head", ev.Position, ev.Stream, ev.Revision)
		return
	}
	switch {
	case v.logSeen && ev.Revision != v.logNext:
		r.problem("log entry %d: stream %q revision %d where %d was due", ev.Position, ev.Stream, ev.Revision, v.logNext)
	case !v.logSeen && first <= 1 && ev.Revision != 0:
		r.problem("log entry %d: stream %q starts at revision %d", ev.Position, ev.Stream, ev.Revision)
	case ev.Revision > v.head:
		r.problem("log entry %d: stream %q revision %d beyond its head %d", ev.Position, ev.Stream, ev.Revision, v.head)
	}
	v.logSeen, v.logNext = true, ev.Revision+1
	if v.records && ev.Revision >= v.first && ev.Revision <= v.last {
		v.logEvents++
	}
}

// readMarkers reads every tag marker: tag -> the position it holds.
func (s *Store) readMarkers() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'t'}, Upper: []byte{'u'}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			tag := string(it.Key()[1:])
			pos, ok := revision.ParseMark(it.Value())
			if !ok {
				return fmt.Errorf("verify streams: the marker of tag %q does not decode: %w", tag, pipeline.ErrCorrupt)
			}
			out[tag] = pos
		}
		return it.Err()
	})
	return out, err
}

// checkMarkers compares the markers with the last positions of the tags in the log
// from first on.
func checkMarkers(markers, lastTagged map[string]uint64, first uint64, r *VerifyReport) {
	for _, tag := range slices.Sorted(maps.Keys(markers)) {
		r.Tags++
		pos, want := markers[tag], lastTagged[tag]
		switch {
		case pos < first && want == 0:
			// the tagged entries were truncated away: nothing left to check against
		case pos != want:
			r.problem("tag %q: its marker holds position %d, the log's last event with the tag is at %d", tag, pos, want)
		}
	}
	for _, tag := range slices.Sorted(maps.Keys(lastTagged)) {
		if _, ok := markers[tag]; !ok {
			r.problem("tag %q: events at positions up to %d carry it, but it has no marker", tag, lastTagged[tag])
		}
	}
}
