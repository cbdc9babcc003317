package storage

import (
	"errors"
	"fmt"
)

// ErrFamilyRetired is returned by Claim (and by batch writes) for a family that was
// dropped, and by reads through its *Family once its native handle was freed (see
// Family).
var ErrFamilyRetired = errors.New("rockline: column family dropped")

// Claim admits one commit that will write to f: until the matching Release, f is not
// dropped physically. It fails with an error matching ErrFamilyRetired (and
// ErrColumnFamilyNotFound) once f has been dropped. Claims are cheap: a mutex and a
// counter.
func (f *Family) Claim() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.retired.Load() {
		return fmt.Errorf("rockline: claim on family %q: %w", f.name, errRetired)
	}
	f.claims++
	return nil
}

// Release ends a claim taken with Claim. If f was dropped while claimed and this was
// the last claim, the physical drop runs now, on the caller's goroutine.
func (f *Family) Release() {
	f.mu.Lock()
	f.claims--
	if f.claims < 0 {
		f.mu.Unlock()
		panic("rockline: Family.Release without Claim") // a bug in the caller, never user input
	}
	run := f.readyToDropLocked()
	f.mu.Unlock()
	if run {
		f.db.physicalDrop(f)
	}
}

// readyToDropLocked reports whether the caller must start the physical drop now, and
// if so marks the attempt started. f.mu is held.
func (f *Family) readyToDropLocked() bool {
	if !f.retired.Load() || f.claims > 0 || f.dropping || f.dropped {
		return false
	}
	f.dropping = true
	return true
}

// errRetired matches both ErrFamilyRetired and ErrColumnFamilyNotFound, so callers
// that only know the older sentinel keep working.
var errRetired = fmt.Errorf("%w (%w)", ErrFamilyRetired, ErrColumnFamilyNotFound)
