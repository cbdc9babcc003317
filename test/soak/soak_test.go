// Package soak runs rockline under a steady mixed load (transfers, stream appends, two
// subscriptions of which one reads slowly, periodic family create and drop) and checks
// that memory and goroutines stay flat once warmed up, and that Close leaves no
// goroutine behind.
//
// Short form: go test -race -count=1 ./test/soak/ (30 s). Long form: ROCKLINE_SOAK=10m
// (make soak).
package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Bounds on growth from the end of warm-up (the first third) to any later sample.
//
// Anonymous memory is the whole process: Go heap, RocksDB's block cache, table readers
// and memtables. Memtables grow by design up to their configured budget (rockline's
// log and system families always use RocksDB's 64 MiB x 2; the soak's FamilyDefaults
// give its own families and the event store's 4 MiB), and memory freed by a flush
// stays with the allocator for the next memtable, so anon follows the memtables'
// high-water mark, not their current size.
// The anon bound therefore applies to anon growth less the growth of that high-water
// mark (reported as "anon beyond memtables").
//
// Dropped families get no allowance: the storage layer frees a dropped family's native
// memory once nothing reads through it (TestFamilyChurn measures that alone).
const (
	maxHeapGrowth      = 64 << 20 // Go heap in use, after a GC
	maxAnonGrowth      = 64 << 20 // anonymous memory beyond the memtables' high-water mark
	maxGoroutineGrowth = 8
)

const (
	numAccounts    = 20
	initialBalance = 1000
	numStreams     = 2
)

// sample is one reading of the process.
type sample struct {
	at                   time.Duration
	heap, anon, memtable uint64
	memHigh              uint64 // the memtables' high-water mark so far
	goroutines           int
	drops                int64 // families dropped so far
}

// beyond is the anonymous memory beyond the memtables' high-water mark.
func (s sample) beyond() uint64 { return s.anon - min(s.anon, s.memHigh) }

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// anonBytes reads the process's anonymous memory from /proc/self/smaps_rollup.
func anonBytes() (uint64, error) {
	raw, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Anonymous:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("smaps_rollup has no Anonymous line")
}

func takeSample(start time.Time, db *pipeline.DB) (sample, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := sample{at: time.Since(start), heap: ms.HeapInuse, goroutines: runtime.NumGoroutine()}
	var err error
	if s.anon, err = anonBytes(); err != nil {
		return s, err
	}
	st, err := db.StorageStats()
	for _, f := range st.Families {
		s.memtable += f.MemtableBytes
	}
	return s, err
}

// counters are what the load did.
type counters struct {
	transfers, appends, families, familyWrites, dropRaces atomic.Int64
	fastSeen, slowSeen                                    atomic.Uint64
}

func TestSoak(t *testing.T) {
	d := 30 * time.Second
	if s := os.Getenv("ROCKLINE_SOAK"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 3*time.Second {
			t.Fatalf("ROCKLINE_SOAK=%q: want a duration of at least 3s", s)
		}
	}
	interval := min(10*time.Second, max(time.Second, d/15))
	warmup := d / 3
	t.Logf("soak: %v under load, sampling every %v, warm-up %v; bounds after warm-up: heap +%s MiB, anon beyond memtables +%s MiB, goroutines +%d",
		d, interval, warmup, mib(maxHeapGrowth), mib(maxAnonGrowth), maxGoroutineGrowth)

	db, err := pipeline.Open(filepath.Join(t.TempDir(), "db"), pipeline.Config{
		Lanes:          4,
		FamilyDefaults: storage.FamilyOptions{WriteBufferSize: 4 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			db.Close()
		}
	}()
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	acc, err := db.CreateColumnFamily("accounts")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx *pipeline.Txn) error {
		for i := range numAccounts {
			if err := tx.Put(acc, accountKey(i), []byte(strconv.Itoa(initialBalance))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// ROCKLINE_SOAK_SKIP (comma-separated: transfers, appends, families, slow) leaves
	// parts of the load out, to tell which one a growth comes from.
	skip := make(map[string]bool)
	if env := os.Getenv("ROCKLINE_SOAK_SKIP"); env != "" {
		for _, s := range strings.Split(env, ",") {
			skip[strings.TrimSpace(s)] = true
		}
		t.Logf("soak: leaving out %v (ROCKLINE_SOAK_SKIP)", os.Getenv("ROCKLINE_SOAK_SKIP"))
	}
	var n counters
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	run := func(name string, fn func() error) {
		if part, _, _ := strings.Cut(name, " "); skip[part] {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	// Subscriptions: a fast one and a deliberately slow one (a ticker paces each entry
	// at 1 ms, a quarter of the write rate, so it only ever catches up from the log).
	// Writers never wait for it. Both check order and density.
	var fastTarget atomic.Uint64
	fastDone := make(chan struct{})
	var fastDoneOnce sync.Once
	follow := func(seen *atomic.Uint64, pace <-chan time.Time, target *atomic.Uint64) func(pipeline.LogEntry) error {
		return func(e pipeline.LogEntry) error {
			if want := seen.Load() + 1; e.Position != want {
				return fmt.Errorf("subscription got position %d, want %d", e.Position, want)
			}
			seen.Store(e.Position)
			if pace != nil {
				select {
				case <-pace:
				case <-ctx.Done():
				}
			}
			if target != nil && target.Load() != 0 && e.Position >= target.Load() {
				fastDoneOnce.Do(func() { close(fastDone) })
			}
			return nil
		}
	}
	n.fastSeen.Store(0)
	fast, err := db.Subscribe(context.Background(), 0, follow(&n.fastSeen, nil, &fastTarget))
	if err != nil {
		t.Fatal(err)
	}
	slowTick := time.NewTicker(time.Millisecond)
	defer slowTick.Stop()
	var pace <-chan time.Time = slowTick.C
	if skip["slow"] {
		pace = nil
	}
	slow, err := db.Subscribe(context.Background(), 0, follow(&n.slowSeen, pace, nil))
	if err != nil {
		t.Fatal(err)
	}

	// Transfers: 4 workers, each paced at one commit per millisecond at most.
	for w := range 4 {
		run(fmt.Sprintf("transfers %d", w), func() error {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return nil
				}
				a := rng.IntN(numAccounts)
				b := (a + 1 + rng.IntN(numAccounts-1)) % numAccounts
				err := db.Update(ctx, func(tx *pipeline.Txn) error { return transfer(tx, acc, a, b, 1+rng.IntN(50)) })
				if err != nil && !errors.Is(err, pipeline.ErrConflict) && !errors.Is(err, context.Canceled) {
					return err
				}
				if err == nil {
					n.transfers.Add(1)
				}
			}
			return nil
		})
	}
	// Appends: one writer per stream, exact expected revisions.
	for s := range numStreams {
		run(fmt.Sprintf("appends %d", s), func() error {
			stream := fmt.Sprintf("soak-%d", s)
			expect := eventstore.NoStream
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return nil
				}
				res, err := es.Append(ctx, stream, expect, pipeline.Event{ID: fmt.Sprintf("%s-%d", stream, i), Type: "tick", Data: []byte(strconv.Itoa(i))})
				if errors.Is(err, context.Canceled) {
					return nil
				}
				if err != nil {
					return err
				}
				expect = eventstore.Revision(res.NextExpectedRevision)
				n.appends.Add(1)
			}
			return nil
		})
	}
	// Families: create, write, drop every familyPeriod (1 s for 30 s, 10 s for 10
	// minutes); a writer races with the drops.
	familyPeriod := min(10*time.Second, max(time.Second, d/60))
	var current atomic.Pointer[pipeline.ColumnFamily]
	run("families", func() error {
		tick := time.NewTicker(familyPeriod)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("tmp-%d", i)
			cf, err := db.CreateColumnFamily(name)
			if err != nil {
				return err
			}
			current.Store(cf)
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
			if err := db.DropColumnFamily(name); err != nil {
				return err
			}
			n.families.Add(1)
		}
		return nil
	})
	run("families writer", func() error {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil
			}
			cf := current.Load()
			if cf == nil {
				continue
			}
			err := db.Update(ctx, func(tx *pipeline.Txn) error {
				return tx.Put(cf, []byte(fmt.Sprintf("k%d", i%100)), bytes.Repeat([]byte{byte(i)}, 256))
			})
			switch {
			case errors.Is(err, pipeline.ErrColumnFamilyDropped):
				n.dropRaces.Add(1)
			case err != nil && !errors.Is(err, context.Canceled):
				return err
			case err == nil:
				n.familyWrites.Add(1)
			}
		}
		return nil
	})

	// Sample until the time is up, checking the bank on the way.
	start := time.Now()
	var samples []sample
	tick := time.NewTicker(interval)
	defer tick.Stop()
	end := time.After(d)
	for loop := true; loop; {
		select {
		case err := <-errs:
			stop()
			wg.Wait()
			t.Fatalf("load failed: %v", err)
		case <-end:
			loop = false
		case <-tick.C:
		}
		s, err := takeSample(start, db)
		if err != nil {
			t.Fatal(err)
		}
		s.memHigh, s.drops = s.memtable, n.families.Load()
		if len(samples) > 0 {
			s.memHigh = max(s.memHigh, samples[len(samples)-1].memHigh)
		}
		samples = append(samples, s)
		if err := checkBank(db, acc); err != nil {
			t.Fatal(err)
		}
		t.Logf("t=%v heap=%s MiB anon=%s MiB (memtables %s) goroutines=%d log=%d transfers=%d appends=%d families=%d fast=%d slow=%d",
			s.at.Round(time.Second), mib(s.heap), mib(s.anon), mib(s.memtable), s.goroutines, db.LastPosition(), n.transfers.Load(), n.appends.Load(), n.families.Load(), n.fastSeen.Load(), n.slowSeen.Load())
	}
	stop()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("load failed: %v", err)
	default:
	}

	// The fast subscription catches up with everything published.
	last := db.LastPosition()
	fastTarget.Store(last)
	if n.fastSeen.Load() < last {
		select {
		case <-fastDone:
		case <-fast.Done():
			t.Fatalf("fast subscription ended: %v", fast.Wait())
		case <-time.After(time.Minute):
			t.Fatalf("fast subscription stuck at %d of %d", n.fastSeen.Load(), last)
		}
	}
	slowAt := n.slowSeen.Load()
	if err := fast.Close(); err != nil {
		t.Fatalf("fast subscription: %v", err)
	}
	if err := slow.Close(); err != nil {
		t.Fatalf("slow subscription: %v", err)
	}
	if err := checkBank(db, acc); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReadLog(1, 1); err != nil {
		t.Fatal(err)
	}

	// Flat after warm-up.
	var base sample
	for _, s := range samples {
		if s.at >= warmup {
			base = s
			break
		}
	}
	var peak sample
	var peakAdj uint64
	for _, s := range samples {
		if s.at < base.at {
			continue
		}
		peak.heap, peak.anon, peak.goroutines = max(peak.heap, s.heap), max(peak.anon, s.anon), max(peak.goroutines, s.goroutines)
		peakAdj = max(peakAdj, s.beyond())
	}
	final := samples[len(samples)-1]
	var heaps, anons, mems, gs []string
	for _, s := range samples {
		heaps, anons, gs = append(heaps, mib(s.heap)), append(anons, mib(s.anon)), append(gs, strconv.Itoa(s.goroutines))
		mems = append(mems, mib(s.memtable))
	}
	t.Logf("soak: duration=%v samples=%d commits=%d (transfers=%d appends=%d family_writes=%d drop_races=%d) families_dropped=%d slow_reader=%d/%d heap_MiB=[%s] anon_MiB=[%s] memtables_MiB=[%s] goroutines=[%s]",
		d, len(samples), last, n.transfers.Load(), n.appends.Load(), n.familyWrites.Load(), n.dropRaces.Load(), n.families.Load(), slowAt, last,
		strings.Join(heaps, " "), strings.Join(anons, " "), strings.Join(mems, " "), strings.Join(gs, " "))
	t.Logf("soak: after warm-up (t=%v): heap %s -> peak %s, end %s MiB; anon %s -> peak %s, end %s MiB; anon beyond memtables %s -> peak %s, end %s MiB; goroutines %d -> peak %d, end %d",
		base.at.Round(time.Second), mib(base.heap), mib(peak.heap), mib(final.heap), mib(base.anon), mib(peak.anon), mib(final.anon),
		mib(base.beyond()), mib(peakAdj), mib(final.beyond()), base.goroutines, peak.goroutines, final.goroutines)
	if g := growth(base.heap, peak.heap); g > maxHeapGrowth {
		t.Errorf("heap in use grew by %s MiB after warm-up (bound %s MiB)", mib(g), mib(maxHeapGrowth))
	}
	t.Logf("soak: %d families dropped after warm-up", final.drops-base.drops)
	if g := growth(base.beyond(), peakAdj); g > maxAnonGrowth {
		t.Errorf("anonymous memory beyond the memtables' high-water mark grew by %s MiB after warm-up (bound %s MiB)", mib(g), mib(maxAnonGrowth))
	}
	if peak.goroutines > base.goroutines+maxGoroutineGrowth {
		t.Errorf("goroutines grew from %d to %d after warm-up (bound +%d)", base.goroutines, peak.goroutines, maxGoroutineGrowth)
	}
	if (n.transfers.Load() == 0 && !skip["transfers"]) || (n.appends.Load() == 0 && !skip["appends"]) || (n.families.Load() == 0 && !skip["families"]) || slowAt == 0 {
		t.Errorf("some load never ran: %+v", &n)
	}

	// Close leaves no goroutine behind.
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	slowTick.Stop()
	goleak.VerifyNone(t)
}

func growth(from, to uint64) uint64 {
	if to < from {
		return 0
	}
	return to - from
}

func accountKey(i int) []byte { return []byte(fmt.Sprintf("a%02d", i)) }

func transfer(tx *pipeline.Txn, acc *pipeline.ColumnFamily, a, b, amount int) error {
	va, err := tx.Get(acc, accountKey(a))
	if err != nil {
		return err
	}
	vb, err := tx.Get(acc, accountKey(b))
	if err != nil {
		return err
	}
	ba, _ := strconv.Atoi(string(va))
	bb, _ := strconv.Atoi(string(vb))
	if ba < amount {
		return nil
	}
	if err := tx.Put(acc, accountKey(a), []byte(strconv.Itoa(ba-amount))); err != nil {
		return err
	}
	return tx.Put(acc, accountKey(b), []byte(strconv.Itoa(bb+amount)))
}

// checkBank fails unless the accounts add up, read in one snapshot.
func checkBank(db *pipeline.DB, acc *pipeline.ColumnFamily) error {
	sum := 0
	err := db.View(func(tx *pipeline.Txn) error {
		for i := range numAccounts {
			v, err := tx.Get(acc, accountKey(i))
			if err != nil {
				return err
			}
			b, err := strconv.Atoi(string(v))
			if err != nil || b < 0 {
				return fmt.Errorf("account %d = %q", i, v)
			}
			sum += b
		}
		return nil
	})
	if err == nil && sum != numAccounts*initialBalance {
		err = fmt.Errorf("bank total %d, want %d", sum, numAccounts*initialBalance)
	}
	return err
}
