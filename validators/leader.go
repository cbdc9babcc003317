package validators

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// leaderQueue runs requests through process in groups: the first caller to arrive
// while nobody leads becomes the leader, takes everything queued (up to maxGroupBytes
// of batches) and processes it. Process hands leadership on (handoff) as soon as it
// is done with what must happen one group at a time (validating under the serial
// policy, assigning positions, recording writes), then writes its group while the
// next leader already assigns the next one, so several groups' writes can be in
// RocksDB at once and share its write group (one WAL write, memtable inserts on
// several threads). At most earlyWriters groups are written after an early handoff;
// beyond that a leader writes before it hands on, and the queue fills meanwhile. The members are woken when process returns. RocksDB groups
// writers the same way; doing it in Go as well lets one batch carry many commits.
//
// Invariants:
//   - leading is true from a leader's start until it hands off with an empty queue;
//     at most one goroutine leads, that is, runs process before its handoff.
//   - Every queued member is woken exactly once: with false when its request is done,
//     or with true to lead the group it heads (it is then done when lead returns).
//   - Groups are taken in queue order, and each group's handoff follows its
//     leader's part of process, so the leaders' parts run one at a time, in order.
//   - scratch is the leaders' and is touched only before the handoff.
type leaderQueue struct {
	mu      sync.Mutex
	leading bool
	queue   []*member
	scratch groupScratch // the leaders', reused; untouched after a handoff
	// process handles one group; it calls handoff once, when the next group may
	// start (lead hands on after process if process did not, or if earlyWriters
	// groups are being written after an early handoff already).
	process func(reqs []*Request, sc *groupScratch, handoff func())
	// early counts the groups being written after their leader handed on early.
	early atomic.Int32
}

// earlyWriters is how many groups may be written after an early handoff at once:
// one fewer than the processors, so that with the group its leader writes before
// handing on, as many groups are in RocksDB's write path as there are processors.
// More would only wait in RocksDB's write thread (which spins before it parks) on a
// processor the others need, and hand the queue on while it is nearly empty, so
// groups would stay small under load. Measured on 2 processors (harness, 10 cells of
// scenario a, 3 alternated rounds, ratio to a raw batch in the same run): geometric
// mean 0.92 writing before the handoff, 0.90 with every leader handing on early,
// 0.94 with one early group; within this machine's noise, but the 1-key cells with one
// commit in flight gained most (2 workers: 0.67 -> 0.94).
func earlyWriters() int32 { return int32(max(1, runtime.GOMAXPROCS(0)-1)) }

// member is one queued request. Members are pooled with their channel: a member is
// back in the pool only after do returned for it, by which time its one wake-up has
// been received and neither the queue nor a leader will touch it again.
type member struct {
	*Request
	wake chan bool // true: lead; false: done
}

var members = sync.Pool{New: func() any { return &member{wake: make(chan bool, 1)} }}

// do queues reqs in order and returns once every one of them is processed.
func (q *leaderQueue) do(reqs []*Request) {
	if len(reqs) == 0 {
		return
	}
	var buf [8]*member
	ms := buf[:0]
	for _, r := range reqs {
		m := members.Get().(*member)
		m.Request = r
		ms = append(ms, m)
	}
	defer func() {
		for _, m := range ms {
			m.Request = nil
			members.Put(m)
		}
	}()
	q.mu.Lock()
	q.queue = append(q.queue, ms...)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	for i, m := range ms {
		if i > 0 || !lead {
			if !m.await() {
				continue // done
			}
		}
		q.lead() // m heads the group it leads, so it is done afterwards
	}
}

// lead takes the queued members as one group, processes them (handing leadership to
// the next queued member, if any, when process says so) and wakes them.
func (q *leaderQueue) lead() {
	q.mu.Lock()
	group, size := q.queue, 0
	cut := len(group)
	for i, m := range group {
		size += m.Commit.Batch.Size()
		if i > 0 && size > maxGroupBytes {
			cut = i
			break
		}
	}
	group, q.queue = group[:cut], append([]*member(nil), group[cut:]...)
	q.mu.Unlock()

	reqs := make([]*Request, len(group))
	for i, m := range group {
		reqs[i] = m.Request
	}
	handed, early := false, false
	handoff := func() {
		// Only the leader runs this, before it hands on, so no other goroutine adds to
		// q.early meanwhile (writers only subtract).
		if handed || q.early.Load() >= earlyWriters() {
			return // hand on after the write
		}
		handed, early = true, true
		q.early.Add(1)
		q.handoff()
	}
	q.process(reqs, &q.scratch, handoff)
	if early {
		q.early.Add(-1)
	}
	if !handed {
		q.handoff()
	}
	// group[0] is the leader itself: the first arrival when nobody led, or the member
	// it was handed to. It reads its result directly.
	for _, m := range group[1:] {
		m.wake <- false
	}
}

// handoff makes the next queued member the leader, or ends leadership when none is
// queued.
func (q *leaderQueue) handoff() {
	q.mu.Lock()
	var next *member
	if len(q.queue) > 0 {
		next = q.queue[0]
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	if next != nil {
		next.wake <- true
	}
}

// spinYields is how many times a member yields its processor, checking for its
// wake-up in between, before it parks on its channel. A small commit's write takes a
// few microseconds, less than parking and being woken again costs (the leader's send
// has to wake an idle thread); RocksDB's own write group spins for the same reason.
// Measured here (2 cores, 1-key commits from 2 workers): 42k commits/s without
// spinning, 56-63k with 200 yields; 64- and 1,000-key commits unchanged. A member
// whose leader writes for longer (large groups) parks after the yields, so the spin
// costs at most a few tens of microseconds of a processor that nothing else wanted
// (Gosched runs any other runnable goroutine first).
const spinYields = 200

// await returns the member's wake-up value: true to lead, false when done.
func (m *member) await() bool {
	for range spinYields {
		select {
		case v := <-m.wake:
			return v
		default:
			runtime.Gosched()
		}
	}
	return <-m.wake
}
