package pipeline

import (
	"sync"
	"sync/atomic"
)

// closeGate admits the calls that must not overlap a Close: the front's family
// changes, and the local engine's CommitInline calls and family changes.
//
// Invariants:
//   - closing goes false->true once, set by Close before it takes gate for writing;
//     after that no enter succeeds.
//   - enter holds gate for reading until leave, so Close, which takes gate for
//     writing, waits for every call admitted before closing was set.
type closeGate struct {
	closing atomic.Bool
	gate    sync.RWMutex
}

// enter admits a call that must not overlap Close, or fails with ErrClosed.
func (g *closeGate) enter() error {
	g.gate.RLock()
	if g.closing.Load() {
		g.gate.RUnlock()
		return ErrClosed
	}
	return nil
}

func (g *closeGate) leave() { g.gate.RUnlock() }
