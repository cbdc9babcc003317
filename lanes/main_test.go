package lanes

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait in these tests so a bug fails instead of hangs.
const deadline = 10 * time.Second

// recv waits for a value from ch or fails the test at the deadline.
func recv[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// notReady fails the test if ch can be received from right now.
func notReady[V any](t *testing.T, ch <-chan V, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s happened too early", what)
	default:
	}
}

// doneSpy is a context whose Done method reports (once) that it was called.
// Submit calls ctx.Done only when it is about to block in its send select, so
// a receive from called means the Submit is at, or about to enter, that select.
type doneSpy struct {
	context.Context
	once   sync.Once
	called chan struct{}
}

func newDoneSpy(parent context.Context) *doneSpy {
	return &doneSpy{Context: parent, called: make(chan struct{})}
}

func (c *doneSpy) Done() <-chan struct{} {
	c.once.Do(func() { close(c.called) })
	return c.Context.Done()
}

// result is the outcome of one Submit call.
type result struct {
	lane int
	err  error
}

// gatedRunner records which tasks ran; each run first announces itself on
// started and then waits for gate to be closed.
type gatedRunner struct {
	started chan int
	gate    chan struct{}
	mu      sync.Mutex
	ran     map[int]int // task -> run count
}

func newGatedRunner() *gatedRunner {
	return &gatedRunner{
		started: make(chan int, 1024),
		gate:    make(chan struct{}),
		ran:     map[int]int{},
	}
}

func (g *gatedRunner) run(_ int, task int) {
	g.started <- task
	<-g.gate
	g.mu.Lock()
	g.ran[task]++
	g.mu.Unlock()
}

func (g *gatedRunner) count(task int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ran[task]
}
