package validators

import (
	"fmt"
	"sync"
	"testing"
)

// fakePositions is the tests' Positions: the contract in its simplest form, which
// also checks that a validator keeps its side of it. It records every Assign,
// Publish and Stop in its trace, and reports (t.Errorf) an Assign while another
// assignment is open and a Publish of anything but the open assignment: the in-order
// completion the pipeline's sequencer relies on.
type fakePositions struct {
	t     *testing.T
	trace *trace // "assign 1+3", "publish 1..3", "stop 2"

	mu                  sync.Mutex
	assigned, published uint64
	err                 error
	readers             map[uint64]int
}

func newFakePositions(t *testing.T) *fakePositions {
	return &fakePositions{t: t, trace: &trace{}, readers: make(map[uint64]int)}
}

// trace is an ordered record of calls, safe for concurrent use.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	tr.events = append(tr.events, fmt.Sprintf(format, args...))
	tr.mu.Unlock()
}

// take returns the events recorded since the last take.
func (tr *trace) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ev := tr.events
	tr.events = nil
	return ev
}

func (p *fakePositions) Published() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published
}

func (p *fakePositions) Oldest() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldest := p.published
	for r := range p.readers {
		oldest = min(oldest, r)
	}
	return oldest
}

func (p *fakePositions) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *fakePositions) Assign(n int) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, p.err
	}
	if p.assigned != p.published {
		p.t.Errorf("Assign(%d) while %d..%d are open", n, p.published+1, p.assigned)
	}
	if n < 1 {
		p.t.Errorf("Assign(%d)", n)
	}
	first := p.assigned + 1
	p.assigned += uint64(n)
	p.trace.add("assign %d+%d", first, n)
	return first, nil
}

func (p *fakePositions) Publish(first, last uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trace.add("publish %d..%d", first, last)
	if p.err != nil {
		return p.err
	}
	if first != p.published+1 || last != p.assigned {
		p.t.Errorf("Publish(%d, %d) with %d..%d open", first, last, p.published+1, p.assigned)
	}
	p.published = last
	return nil
}

func (p *fakePositions) Stop(pos uint64, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trace.add("stop %d", pos)
	if p.err == nil {
		p.err = fmt.Errorf("%w: position %d: %w", ErrStopped, pos, cause)
	}
}

// acquire registers a reader at the published position, as a transaction's Begin
// does, and returns it; release ends it.
func (p *fakePositions) acquire() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readers[p.published]++
	return p.published
}

func (p *fakePositions) release(r uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readers[r]--; p.readers[r] <= 0 {
		delete(p.readers, r)
	}
}

func (p *fakePositions) lastAssigned() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.assigned
}
