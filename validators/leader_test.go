package validators

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/storage"
)

// queueRig runs a leaderQueue whose process records each group it is given before
// its handoff, and yields after it, so that the leaders' parts (which must not
// overlap) run beside earlier groups' writing parts (which may).
type queueRig struct {
	q       leaderQueue
	mu      sync.Mutex
	groups  [][]*Request
	running atomic.Int32
	overlap atomic.Bool
}

func newQueueRig() *queueRig {
	r := &queueRig{}
	r.q = leaderQueue{process: func(reqs []*Request, _ *groupScratch, handoff func()) {
		if r.running.Add(1) != 1 {
			r.overlap.Store(true)
		}
		r.mu.Lock()
		r.groups = append(r.groups, append([]*Request(nil), reqs...))
		r.mu.Unlock()
		r.running.Add(-1)
		handoff()
		runtime.Gosched() // the writing part: the next leader may run meanwhile
	}}
	return r
}

func smallRequest(tag int) *Request {
	return &Request{Commit: &Commit{Batch: storage.NewBatch()}, Pos: uint64(tag)}
}

// TestLeaderQueueProcessesEachOnceInOrder: requests from many goroutines are each
// processed exactly once, one group at a time, every caller's requests in the order it
// gave them, and every do returns.
func TestLeaderQueueProcessesEachOnceInOrder(t *testing.T) {
	r := newQueueRig()
	const callers, calls, perCall = 8, 200, 3
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				reqs := make([]*Request, perCall)
				for j := range reqs {
					reqs[j] = smallRequest((c*calls+i)*perCall + j)
				}
				r.q.do(reqs)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("do did not return for every caller")
	}
	if r.overlap.Load() {
		t.Fatal("two groups were processed at once")
	}
	seen := make(map[uint64]bool)
	last := make(map[int]int) // caller -> last tag seen, to check each caller's order
	for c := range callers {
		last[c] = -1
	}
	for _, g := range r.groups {
		for _, req := range g {
			tag := int(req.Pos)
			if seen[req.Pos] {
				t.Fatalf("request %d processed twice", tag)
			}
			seen[req.Pos] = true
			c := tag / (calls * perCall)
			if tag <= last[c] {
				t.Fatalf("caller %d: request %d processed after %d", c, tag, last[c])
			}
			last[c] = tag
		}
	}
	if len(seen) != callers*calls*perCall {
		t.Fatalf("%d requests processed, want %d", len(seen), callers*calls*perCall)
	}
}

// TestLeaderQueueCutsGroupsBySize: a group stops before the member whose batch would
// take it past maxGroupBytes, so one leader never writes an unbounded batch; a single
// member larger than the cap still forms a group of its own.
func TestLeaderQueueCutsGroupsBySize(t *testing.T) {
	st, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	big := bytes.Repeat([]byte{'x'}, maxGroupBytes/2+1)
	reqs := make([]*Request, 4)
	for i := range reqs {
		b := storage.NewBatch()
		value := []byte("small")
		if i < 3 {
			value = big
		}
		if err := b.Put(st.Default(), fmt.Appendf(nil, "k%d", i), value); err != nil {
			t.Fatal(err)
		}
		reqs[i] = &Request{Commit: &Commit{Batch: b}, Pos: uint64(i)}
	}
	r := newQueueRig()
	r.q.do(reqs)
	var sizes []int
	for _, g := range r.groups {
		sizes = append(sizes, len(g))
	}
	// Three batches just over half the cap: each pair is past it, so each big one
	// leads alone; the small one fits behind the last big one.
	if fmt.Sprint(sizes) != "[1 1 2]" {
		t.Fatalf("group sizes %v, want [1 1 2]", sizes)
	}
}
