package validators

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// fakePositions is the tests' Positions: the contract in its simplest form, which
// also checks that a validator keeps its side of it. It records every Assign,
// Publish and Stop in its trace, reports (t.Errorf) a Publish of anything but an
// open assignment, and publishes in order: a Publish returns once every earlier
// assignment is closed too.
type fakePositions struct {
	t     *testing.T
	trace *trace // "assign 1+3", "publish 1..3", "stop 2"

	mu                  sync.Mutex
	closed              sync.Cond // on mu: published moved or err was set
	assigned, published uint64
	open                []openSpan // in assignment order
	err                 error
	readers             map[uint64]int
}

// openSpan is an open assignment; done once published, waiting for earlier ones.
type openSpan struct {
	first, last uint64
	done        bool
}

func newFakePositions(t *testing.T) *fakePositions {
	p := &fakePositions{t: t, trace: &trace{}, readers: make(map[uint64]int)}
	p.closed.L = &p.mu
	return p
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
	if n < 1 {
		p.t.Errorf("Assign(%d)", n)
	}
	first := p.assigned + 1
	p.assigned += uint64(n)
	p.open = append(p.open, openSpan{first: first, last: p.assigned})
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
	i := slices.IndexFunc(p.open, func(o openSpan) bool { return o.first == first && o.last == last })
	if i < 0 || p.open[i].done {
		p.t.Errorf("Publish(%d, %d) with %v open", first, last, p.open)
		return nil
	}
	p.open[i].done = true
	for len(p.open) > 0 && p.open[0].done {
		p.published = p.open[0].last
		p.open = p.open[1:]
	}
	p.closed.Broadcast()
	for p.published < last && p.err == nil {
		p.closed.Wait()
	}
	return p.err
}

func (p *fakePositions) Stop(pos uint64, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trace.add("stop %d", pos)
	if p.err == nil {
		p.err = fmt.Errorf("%w: position %d: %w", ErrStopped, pos, cause)
	}
	p.closed.Broadcast()
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
