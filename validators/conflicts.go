package validators

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// MaxTableKeys bounds the conflict table. When more distinct keys than this have been
// written since the oldest open transaction began, the table drops everything older
// than the published position and those transactions get ErrTxnTooOld at commit.
const MaxTableKeys = 1 << 22

const tableShards = 64

// Fingerprinter maps (column family, key) to a 64-bit fingerprint. Its seed is random
// per database, so fingerprints never cross databases or processes, and the family id
// is hashed in, so equal keys in different families get unrelated fingerprints.
type Fingerprinter struct{ seed maphash.Seed }

// NewFingerprinter returns a fingerprinter with a fresh random seed.
func NewFingerprinter() Fingerprinter { return Fingerprinter{seed: maphash.MakeSeed()} }

// Of returns the fingerprint of key in the family with the given id.
func (f Fingerprinter) Of(family uint32, key []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(f.seed)
	var id [4]byte
	binary.LittleEndian.PutUint32(id[:], family)
	h.Write(id[:])
	h.Write(key)
	return h.Sum64()
}

// table maps fingerprints to the position of their last write.
//
// Invariants:
//   - An entry (fp, p) is removed only when p <= floor, and floor is raised before any
//     entry is removed, so a validator that checks entries first and floor second never
//     misses a conflict: it either sees the entry or sees its read position below floor.
//   - Writers of fp hold fp's bucket (parallel) or lead the group (serial), so the
//     positions recorded for one fingerprint increase.
type table struct {
	floor   atomic.Uint64
	size    atomic.Int64
	records atomic.Int64 // since the last prune
	pruneMu sync.Mutex
	shards  [tableShards]struct {
		mu sync.Mutex
		m  map[uint64]uint64
		_  [48]byte // keep shards on separate cache lines
	}
}

func newTable(floor uint64) *table {
	t := &table{}
	t.floor.Store(floor)
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]uint64)
	}
	return t
}

// check fails with ErrConflict when any fingerprint was written after readPos, or
// ErrTxnTooOld when the table no longer covers readPos.
func (t *table) check(fps []uint64, readPos uint64) error {
	for _, fp := range fps {
		s := &t.shards[fp%tableShards]
		s.mu.Lock()
		p, ok := s.m[fp]
		s.mu.Unlock()
		if ok && p > readPos {
			return ErrConflict
		}
	}
	if readPos < t.floor.Load() {
		return ErrTxnTooOld
	}
	return nil
}

// record notes that every fingerprint in fps was written at position pos.
func (t *table) record(fps []uint64, pos uint64) {
	added := int64(0)
	for _, fp := range fps {
		s := &t.shards[fp%tableShards]
		s.mu.Lock()
		old, ok := s.m[fp]
		if !ok {
			added++
		}
		if pos > old {
			s.m[fp] = pos
		}
		s.mu.Unlock()
	}
	t.size.Add(added)
	t.records.Add(int64(len(fps)))
}

// maybePrune drops entries no open transaction can conflict with. It runs on the
// committing goroutine, outside any bucket lock, once enough writes were recorded
// since the last prune to pay for the sweep.
func (t *table) maybePrune(seq Positions) {
	size := t.size.Load()
	if r := t.records.Load(); r < 4096 || r < size/2 {
		return
	}
	if !t.pruneMu.TryLock() {
		return // another goroutine is pruning
	}
	defer t.pruneMu.Unlock()
	t.records.Store(0)
	floor := seq.Oldest()
	if t.size.Load() > MaxTableKeys {
		floor = seq.Published()
	}
	if floor <= t.floor.Load() {
		return
	}
	t.floor.Store(floor)
	removed := int64(0)
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for fp, p := range s.m {
			if p <= floor {
				delete(s.m, fp)
				removed++
			}
		}
		s.mu.Unlock()
	}
	t.size.Add(-removed)
}

// len returns the number of fingerprints held.
func (t *table) len() int { return int(t.size.Load()) }
