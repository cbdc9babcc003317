// Package lanes provides N commit lanes for a database write pipeline.
//
// A Lanes value owns a fixed number of lanes. Each lane is a bounded FIFO
// queue (a buffered channel of capacity depth) drained by exactly one
// goroutine, which calls the caller-supplied run function for every task in
// queue order. The package is generic over the task type and knows nothing
// about validation or storage: what a task means is entirely up to run.
//
// # Routing
//
// Submit routes tasks round-robin over the lanes using an atomic counter.
// Routing carries no semantic weight: lanes exist to bound the amount of
// in-flight work (each queue holds at most depth tasks, and Submit blocks
// when the chosen queue is full, giving backpressure) and to give the
// validator parallelism (up to N tasks run at once). Conflict detection
// does not depend on which lane a task lands in, so a cheap, fair,
// contention-free round-robin is sufficient. With a single lane, tasks run
// strictly in the order their Submit calls queued them.
//
// # Batches
//
// NewBatched gives the run function every task already queued behind the one the
// lane takes (up to a bound), in order. A lane never waits to fill a batch: under
// light load batches hold one task, under load the runner amortises its work, which
// is how rockline writes several queued commits with one RocksDB write.
//
// # Goroutine ownership and shutdown
//
// NewBatched starts one goroutine per lane; those goroutines are owned by the Lanes
// value and by nothing else. Callers of Submit own their own goroutines and
// never have work run on them. SubmitOrRun is the exception a caller opts into:
// when the lane it picks is idle (nothing queued, nothing running) it runs the
// task on the caller's goroutine instead of waking the lane's, keeping the lane's
// order and its one-batch-at-a-time rule (a per-lane mutex and a count of
// accepted, unfinished tasks decide it). Under load lanes are busy and tasks
// queue as with Submit, so batching is unchanged; under light load a task skips
// two goroutine hand-offs.
//
// Close shuts down in a fixed order. It first closes an internal closing
// channel, which wakes every Submit blocked on a full queue (they return
// ErrClosed). It then takes the write side of an RWMutex admission gate —
// Submit holds the read side for the whole of its send — so once Close holds
// the lock no Submit is mid-send and no new one can start sending. It marks
// the value closed, closes every queue channel and releases the lock. Each
// lane goroutine then drains its remaining queued tasks and exits when its
// channel is empty. Close waits for all of them, so when Close returns every
// task that Submit accepted has been run and no goroutine started by this
// package is left alive.
//
// A Submit that races Close therefore has exactly two outcomes: it queued the
// task (returned a nil error), and the drain will run it; or it returned
// ErrClosed, and the task was never queued. It never panics and never hangs.
package lanes
