package esmodel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// deleteStream: a soft delete with a drawn expectation. The stream then reads as
// absent; a stream with no events, or deleted already, is left as it is (position 0).
func (m *machine) deleteStream(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	st := m.model.streams[s]
	exp := drawExpectation(t, st, "delete")
	what := fmt.Sprintf("DeleteStream(%s, %v)", s, exp)
	pos, err := m.es.DeleteStream(context.Background(), s, exp.api())
	switch {
	case st.tombstoned:
		expectDeleted(t, what+" of a tombstoned stream", err, s)
	case !st.matches(exp):
		expectWrongVersion(t, what, err, s, exp, st.actual())
	case err != nil:
		fatalf(t, "%s: %v", what, err)
	case !m.model.softDelete(s):
		if pos != 0 {
			fatalf(t, "%s of a stream with no events, or deleted already: position %d, want 0 (nothing changed)", what, pos)
		}
	default:
		m.learnCommit(t, what, pos)
	}
}

// learnCommit checks the position of a sequential commit that changed something: above
// every earlier one, and published.
func (m *machine) learnCommit(t *rapid.T, what string, pos uint64) {
	t.Helper()
	if pos <= m.model.maxPos {
		fatalf(t, "%s: position %d, not above %d, which an earlier call returned", what, pos, m.model.maxPos)
	}
	m.published(t, what, pos)
	m.model.saw(pos)
}

// tombstone: a stream deleted for good, if it meets the drawn expectation; a second
// tombstone fails with a *StreamDeletedError.
func (m *machine) tombstone(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	st := m.model.streams[s]
	exp := drawExpectation(t, st, "tombstone")
	what := fmt.Sprintf("TombstoneStream(%s, %v)", s, exp)
	pos, err := m.es.TombstoneStream(context.Background(), s, exp.api())
	switch {
	case st.tombstoned:
		expectDeleted(t, what+" of a tombstoned stream", err, s)
	case !st.matches(exp):
		expectWrongVersion(t, what, err, s, exp, st.actual())
	case err != nil:
		fatalf(t, "%s: %v", what, err)
	default:
		m.learnCommit(t, what, pos)
		st.tombstoned = true
	}
}

// setMetadata: new bounds for a stream's readers (MaxCount, TruncateBefore, and a
// MaxAge of an hour, which hides none of a test's events), replacing the old ones.
func (m *machine) setMetadata(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	st := m.model.streams[s]
	md := eventstore.StreamMetadata{
		MaxCount:       uint64(rapid.IntRange(0, 3).Draw(t, "MaxCount")),
		TruncateBefore: uint64(rapid.IntRange(0, int(st.nextRev())+1).Draw(t, "TruncateBefore")),
	}
	if rapid.IntRange(0, 3).Draw(t, "MaxAge") == 0 {
		md.MaxAge = time.Hour
	}
	what := fmt.Sprintf("SetStreamMetadata(%s, %+v)", s, md)
	pos, err := m.es.SetStreamMetadata(context.Background(), s, md)
	if st.tombstoned {
		expectDeleted(t, what+" of a tombstoned stream", err, s)
		return
	}
	if err != nil {
		fatalf(t, "%s: %v", what, err)
	}
	m.learnCommit(t, what, pos)
	st.md = md
}

// reclaim: Reclaim deletes exactly the records of the revisions hidden now, and of
// tombstoned streams, and says how many.
func (m *machine) reclaim(t *rapid.T) {
	n, err := m.es.Reclaim(context.Background())
	if err != nil {
		fatalf(t, "Reclaim: %v", err)
	}
	if want := m.model.reclaim(); n != want {
		fatalf(t, "Reclaim deleted %d records, want %d (the hidden revisions' not reclaimed before)", n, want)
	}
}

// checkpointLog: a checkpoint of the database (removed at once: only the position it
// covers matters), which lets TruncateLog remove the log up to that position.
func (m *machine) checkpointLog(t *rapid.T) {
	m.cps++
	dir := filepath.Join(m.dir+"-cp", strconv.Itoa(m.cps))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	last := m.db.LastPosition()
	covered, err := m.db.Checkpoint(dir)
	if err != nil {
		fatalf(t, "Checkpoint: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if covered < last {
		fatalf(t, "Checkpoint covers %d, below the published position %d before it", covered, last)
	}
	m.model.checkpointed = max(m.model.checkpointed, covered)
}

// truncateLog: TruncateLog(before) past the checkpoint fails with ErrNotCheckpointed;
// otherwise the log starts at before (the largest before wins). before never passes a
// subscriber's or the projection's stored position, as an application's retention
// would not: they resume from there.
func (m *machine) truncateLog(t *rapid.T) {
	// before is drawn as an event (the log then starts at its entry), the position
	// after every one a call returned, or one past the published log, so a replay
	// means the same cut whatever positions the projection's commits took.
	evs := m.model.sorted(0, func(*event) bool { return true })
	var before uint64
	switch k := rapid.IntRange(0, len(evs)+1).Draw(t, "truncate at event"); {
	case k < len(evs):
		before = evs[k].pos
	case k == len(evs):
		before = m.model.maxPos + 1
	default:
		before = m.db.LastPosition() + 2
	}
	if before-1 <= m.model.checkpointed {
		before = min(before, m.truncationBound(t))
	}
	err := m.db.TruncateLog(before)
	if before-1 > m.model.checkpointed {
		expectIs(t, fmt.Sprintf("TruncateLog(%d) past the checkpoint %d", before, m.model.checkpointed), err, pipeline.ErrNotCheckpointed)
		return
	}
	if err != nil {
		fatalf(t, "TruncateLog(%d): %v", before, err)
	}
	m.model.first = max(m.model.first, before)
}

// truncationBound is the highest before TruncateLog may take without removing an
// entry a subscriber or the projection would read again after a restart.
func (m *machine) truncationBound(t *rapid.T) uint64 {
	bound := uint64(1<<63 - 1)
	for _, s := range m.subs {
		s.mu.Lock()
		bound = min(bound, s.stored+1)
		s.mu.Unlock()
	}
	if p, ok := m.projectionStored(t); ok {
		bound = min(bound, p+1)
	}
	return bound
}
