package history

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// Classifier maps a Commit error to what it says of the commit: an outcome and a short
// class name for the figures. An error it does not recognise must come back as
// (Unknown, UntypedError): the checker reports it, because every Commit error has to
// say, through a documented sentinel, whether the commit landed.
type Classifier func(err error) (Outcome, string)

// Workload configures the list-append clients. Zero values take the defaults shown.
type Workload struct {
	// Clients is how many clients run transactions concurrently (default 4).
	Clients int
	// ActiveKeys is how many keys are written at a time (default 4); a key that
	// took MaxAppends appends is retired for a new one, so lists stay short.
	ActiveKeys int
	// MaxAppends per key before it is retired (default 24).
	MaxAppends int
	// MaxOps is the most micro-operations per transaction (default 4, at least 1).
	MaxOps int
	// Seed seeds the generator.
	Seed uint64
	// FirstID is the first transaction ID, FirstValue the first appended element and
	// FirstKey the first key: a history continued by another process starts past
	// the previous one's.
	FirstID    int
	FirstValue int64
	FirstKey   int
	// CommitTimeout bounds each Commit (default 10s). With MinCommitTimeout set,
	// each transaction draws its bound from MinCommitTimeout..CommitTimeout, so that
	// faults meet commits whose ctx ends at every stage.
	CommitTimeout    time.Duration
	MinCommitTimeout time.Duration
	// Pause is how long a client waits after a transaction that did not succeed,
	// as a client backs off (default 10ms).
	Pause time.Duration
	// Classify maps Commit errors (required).
	Classify Classifier
}

func (w *Workload) defaults() {
	if w.Clients == 0 {
		w.Clients = 4
	}
	if w.ActiveKeys == 0 {
		w.ActiveKeys = 4
	}
	if w.MaxAppends == 0 {
		w.MaxAppends = 24
	}
	if w.MaxOps == 0 {
		w.MaxOps = 4
	}
	if w.CommitTimeout == 0 {
		w.CommitTimeout = 10 * time.Second
	}
	if w.Pause == 0 {
		w.Pause = 10 * time.Millisecond
	}
}

// generator draws transactions: reads and appends of unique elements over a window of
// active keys.
type generator struct {
	mu      sync.Mutex
	rng     *rand.Rand
	w       Workload
	nextID  int
	nextVal int64
	active  []int
	appends map[int]int
	nextKey int
}

func newGenerator(w Workload) *generator {
	g := &generator{rng: rand.New(rand.NewPCG(w.Seed, w.Seed^0x9e3779b97f4a7c15)), w: w, nextID: w.FirstID, nextVal: w.FirstValue, appends: map[int]int{}, nextKey: w.FirstKey}
	for range w.ActiveKeys {
		g.active = append(g.active, g.nextKey)
		g.nextKey++
	}
	return g
}

// next draws a transaction for client and the bound of its commit.
func (g *generator) next(client int) (*Txn, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := &Txn{ID: g.nextID, Client: client}
	timeout := g.w.CommitTimeout
	if lo := g.w.MinCommitTimeout; lo > 0 && lo < timeout {
		timeout = lo + time.Duration(g.rng.Int64N(int64(timeout-lo)))
	}
	g.nextID++
	n := 1 + g.rng.IntN(g.w.MaxOps)
	for range n {
		i := g.rng.IntN(len(g.active))
		k := g.active[i]
		if g.rng.IntN(2) == 0 {
			t.Ops = append(t.Ops, Op{F: FRead, K: k})
			continue
		}
		t.Ops = append(t.Ops, Op{F: FAppend, K: k, V: g.nextVal})
		g.nextVal++
		if g.appends[k]++; g.appends[k] >= g.w.MaxAppends {
			g.active[i] = g.nextKey
			g.nextKey++
		}
	}
	return t, timeout
}

// Run runs w.Clients clients until stop is closed, each drawing transactions and
// running them on db(client) (Begin, Get, Put, CommitPosition), recording each with r.
// A transaction in flight when stop closes finishes first.
func Run(stop <-chan struct{}, w Workload, r *Recorder, db func(client int) *pipeline.DB) {
	w.defaults()
	g := newGenerator(w)
	var wg sync.WaitGroup
	for c := range w.Clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t, timeout := g.next(c)
				r.Invoke(t)
				runTxn(db(c), w.Classify, timeout, t)
				r.Complete(t)
				if t.Outcome != OK {
					pause := time.NewTimer(w.Pause)
					select {
					case <-stop:
					case <-pause.C:
					}
					pause.Stop()
				}
			}
		})
	}
	wg.Wait()
}

// runTxn runs t's operations in one transaction and sets its outcome, reads,
// position and error.
func runTxn(db *pipeline.DB, classify Classifier, timeout time.Duration, t *Txn) {
	tx := db.Begin()
	cf := db.Default()
	for i := range t.Ops {
		o := &t.Ops[i]
		cur, err := readList(tx, cf, o.K)
		if err != nil {
			tx.Discard()
			t.Outcome, t.Err, t.ErrClass = Failed, err.Error(), "read"
			var ge *garbageError
			if errors.As(err, &ge) {
				t.ErrClass = GarbageRead
			}
			return
		}
		if o.F == FRead {
			o.Read = cur
			continue
		}
		if err := tx.Put(cf, KeyName(o.K), EncodeList(append(cur, o.V))); err != nil {
			tx.Discard()
			t.Outcome, t.Err, t.ErrClass = Failed, err.Error(), "put"
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pos, err := tx.CommitPosition(ctx)
	t.Pos = pos
	if err != nil {
		t.Err = err.Error()
		t.Outcome, t.ErrClass = classify(err)
		return
	}
	t.Outcome = OK
}

// garbageError is a stored value that is not a list.
type garbageError struct {
	key int
	err error
}

func (e *garbageError) Error() string { return fmt.Sprintf("key %d: %v", e.key, e.err) }
func (e *garbageError) Unwrap() error { return e.err }

// readList reads key k's list with a tracked read (a missing key is the empty list).
func readList(tx *pipeline.Txn, cf *pipeline.ColumnFamily, k int) ([]int64, error) {
	v, err := tx.Get(cf, KeyName(k))
	if errors.Is(err, pipeline.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := DecodeList(v)
	if err != nil {
		return nil, &garbageError{key: k, err: err}
	}
	return l, nil
}

// FinalRead reads every key in keys in one transaction on db, retrying until one
// succeeds or ctx ends, and records it (Final) with r under id.
func FinalRead(ctx context.Context, db *pipeline.DB, r *Recorder, keys []int, id int) error {
	var last error
	for {
		t := &Txn{ID: id, Client: -1, Final: true}
		for _, k := range keys {
			t.Ops = append(t.Ops, Op{F: FRead, K: k})
		}
		t.Invoke = time.Now().UnixNano()
		tx := db.Begin()
		cf := db.Default()
		ok := true
		for i := range t.Ops {
			l, err := readList(tx, cf, t.Ops[i].K)
			if err != nil {
				last, ok = err, false
				break
			}
			t.Ops[i].Read = l
		}
		tx.Discard()
		if ok {
			t.Complete, t.Outcome = time.Now().UnixNano(), OK
			r.Add(t)
			return nil
		}
		retry := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			retry.Stop()
			return fmt.Errorf("history: the final read: %w (last error: %w)", ctx.Err(), last)
		case <-retry.C:
		}
	}
}

// Keys returns every key the history's transactions touched, sorted.
func (h History) Keys() []int {
	seen := map[int]bool{}
	var out []int
	for _, t := range h {
		for _, o := range t.Ops {
			if !seen[o.K] {
				seen[o.K] = true
				out = append(out, o.K)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Next returns the first transaction ID, element and key past every one in h, for a
// workload that continues the history.
func (h History) Next() (id int, value int64, key int) {
	for _, t := range h {
		id = max(id, t.ID+1)
		for _, o := range t.Ops {
			value = max(value, o.V+1)
			key = max(key, o.K+1)
		}
	}
	return id, value, key
}
