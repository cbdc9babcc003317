package pipeline

import "github.com/rockline/rockline/storage"

// view is a RocksDB snapshot shared by every transaction begun while it is the
// newest, under Config.Sync. The sequencer takes one after reading the written
// position a sync is to cover and before the fsync starts, and installs it when the
// fsync succeeds, together with the published position: every write it holds had
// reached the WAL before the fsync began, so it holds only durable commits (those
// published, and perhaps a group written just after the position was read, durable
// but not yet published, as a per-transaction snapshot may hold the group being
// published without Sync). A transaction thus never reads a commit that a power loss
// could remove. Without Sync each transaction takes its own snapshot (Begin).
//
// Invariants:
//   - refs counts the sequencer's hold, while the view is the current one, plus one
//     per transaction that acquired it; it changes only under the sequencer's mu.
//   - snap is released exactly once, by whoever takes refs to 0; a view whose refs
//     is 0 is never handed out again.
//   - The current view holds every position up to the published one.
type view struct {
	snap *storage.Snapshot
	refs int
}

// AcquireView is Acquire that also hands out the current view (a reference the
// caller returns with ReleaseView). It returns a nil view when the sequencer has none
// (no sync function): the caller takes its own snapshot.
func (s *sequencer) AcquireView() (uint64, *view, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.acquireLocked()
	if err != nil {
		return 0, nil, err
	}
	v := s.view
	if v != nil {
		v.refs++
	}
	return p, v, nil
}

// ReleaseView ends a transaction registered with AcquireView at read position p
// holding v (nil: none).
func (s *sequencer) ReleaseView(p uint64, v *view) {
	s.mu.Lock()
	s.releaseLocked(p)
	free := v != nil && v.unrefLocked()
	s.mu.Unlock()
	if free {
		v.snap.Release()
	}
}

// installViewLocked makes snap the current view, dropping the sequencer's hold on the
// previous one; it returns the snapshot to release (outside mu), or nil.
func (s *sequencer) installViewLocked(snap *storage.Snapshot) *storage.Snapshot {
	old := s.view
	s.view = &view{snap: snap, refs: 1}
	if old != nil && old.unrefLocked() {
		return old.snap
	}
	return nil
}

// unrefLocked drops one reference and reports whether it was the last.
func (v *view) unrefLocked() bool {
	v.refs--
	return v.refs == 0
}

// CloseView drops the sequencer's hold on the current view (Close, after Drain);
// transactions still open keep theirs, and storage's Close frees what is left.
func (s *sequencer) CloseView() {
	s.mu.Lock()
	v := s.view
	s.view = nil
	free := v != nil && v.unrefLocked()
	s.mu.Unlock()
	if free {
		v.snap.Release()
	}
}
