package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/pipeline"
)

// TestLostUpdateCounter runs read-modify-write increments of one counter from several
// goroutines. Each transaction also reads and rewrites 64 shared keys, so with 16
// buckets every commit locks every bucket. A lost update would leave the counter below
// the number of successful commits; a torn commit would leave the 64 keys disagreeing.
func TestLostUpdateCounter(t *testing.T) {
	const workers, perWorker, others = 4, 30, 64
	for _, pol := range policies {
		for _, lanes := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/lanes=%d", pol, lanes), func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: lanes, Buckets: 16})
				cf := db.Default()
				increment := func(tag string, mode commitMode) error {
					tx := db.Begin()
					n := 0
					v, err := tx.Get(cf, []byte("counter"))
					switch {
					case errors.Is(err, pipeline.ErrNotFound):
					case err != nil:
						return err
					default:
						if n, err = strconv.Atoi(string(v)); err != nil {
							return err
						}
					}
					for j := range others {
						k := key("other/%02d", j)
						if _, err := tx.Get(cf, k); err != nil && !errors.Is(err, pipeline.ErrNotFound) {
							return err
						}
						if err := tx.Put(cf, k, []byte(tag)); err != nil {
							return err
						}
					}
					if err := tx.Put(cf, []byte("last"), []byte(tag)); err != nil {
						return err
					}
					if err := tx.Put(cf, []byte("counter"), []byte(strconv.Itoa(n+1))); err != nil {
						return err
					}
					return mode.commit(tx)
				}

				var successes, conflicts atomic.Int64
				errs := make(chan error, workers)
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := 0; i < perWorker; {
							err := increment(fmt.Sprintf("w%d/i%d", w, i), commitModes[(w+i)%2])
							switch {
							case err == nil:
								successes.Add(1)
								i++
							case errors.Is(err, pipeline.ErrConflict):
								conflicts.Add(1)
							default:
								errs <- fmt.Errorf("worker %d: %w", w, err)
								return
							}
						}
					})
				}
				wait(t, wg.Wait, "workers")
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}

				got := mustGet(t, db, cf, "counter")
				if want := strconv.FormatInt(successes.Load(), 10); got != want {
					t.Errorf("counter = %s, want %s (successful commits); %d conflicts", got, want, conflicts.Load())
				}
				if got, want := db.LastPosition(), uint64(successes.Load()); got != want {
					t.Errorf("LastPosition = %d, want %d", got, want)
				}
				last := mustGet(t, db, cf, "last")
				for j := range others {
					if v := mustGet(t, db, cf, fmt.Sprintf("other/%02d", j)); v != last {
						t.Fatalf("other/%02d = %q, but last commit was %q: a commit landed partly", j, v, last)
					}
				}
				t.Logf("%d commits, %d conflicts", successes.Load(), conflicts.Load())
			})
		}
	}
}

var errInsufficient = errors.New("insufficient funds")

// TestBank moves money between 50 accounts from 8 goroutines with Update. A transfer
// that would overdraw refuses with a sentinel, which Update returns as is. The total
// must be conserved, no balance may go negative and refused transfers write nothing.
func TestBank(t *testing.T) {
	const accounts, goroutines, transfers, initial = 50, 8, 50, 100
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, MaxAttempts: 1000})
			cf := db.Default()
			acct := func(i int) []byte { return key("acct/%02d", i) }
			err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
				for i := range accounts {
					if err := tx.Put(cf, acct(i), []byte(strconv.Itoa(initial))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			balance := func(tx *pipeline.Txn, i int) (int, error) {
				v, err := tx.Get(cf, acct(i))
				if err != nil {
					return 0, err
				}
				return strconv.Atoi(string(v))
			}

			var done, refused atomic.Int64
			errs := make(chan error, goroutines)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 42))
					for range transfers {
						from, to := r.IntN(accounts), r.IntN(accounts-1)
						if to >= from {
							to++
						}
						amount := 1 + r.IntN(150)
						err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
							fb, err := balance(tx, from)
							if err != nil {
								return err
							}
							tb, err := balance(tx, to)
							if err != nil {
								return err
							}
							if fb < amount {
								return errInsufficient
							}
							if err := tx.Put(cf, acct(from), []byte(strconv.Itoa(fb-amount))); err != nil {
								return err
							}
							return tx.Put(cf, acct(to), []byte(strconv.Itoa(tb+amount)))
						})
						switch {
						case err == nil:
							done.Add(1)
						case err == errInsufficient: // returned as is, not wrapped
							refused.Add(1)
						default:
							errs <- err
							return
						}
					}
				})
			}
			wait(t, wg.Wait, "transfers")
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}

			total := 0
			err = db.View(func(tx *pipeline.Txn) error {
				for i := range accounts {
					b, err := balance(tx, i)
					if err != nil {
						return err
					}
					if b < 0 {
						t.Errorf("account %d: balance %d", i, b)
					}
					total += b
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if total != accounts*initial {
				t.Errorf("total = %d, want %d", total, accounts*initial)
			}
			if done.Load()+refused.Load() != goroutines*transfers {
				t.Errorf("%d done + %d refused, want %d transfers", done.Load(), refused.Load(), goroutines*transfers)
			}
			if refused.Load() == 0 {
				t.Error("no transfer was refused; the overdraft path was not exercised")
			}
			if got, want := db.LastPosition(), uint64(1+done.Load()); got != want {
				t.Errorf("LastPosition = %d, want %d (setup + completed transfers)", got, want)
			}
		})
	}
}

// TestPositionsDense checks log positions: sequential commits get consecutive
// positions, and under one lane concurrent commits get positions 1..N in the order the
// lane validated them.
func TestPositionsDense(t *testing.T) {
	for _, pol := range policies {
		for _, lanes := range []int{1, 4} {
			t.Run(fmt.Sprintf("sequential/%s/lanes=%d", pol, lanes), func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: lanes})
				for i := 1; i <= 40; i++ {
					if pos := put(t, db, db.Default(), fmt.Sprintf("k%d", i), "v"); pos != uint64(i) {
						t.Fatalf("commit %d: position %d, want %d", i, pos, i)
					}
					if got := db.LastPosition(); got != uint64(i) {
						t.Fatalf("after commit %d: LastPosition = %d", i, got)
					}
				}
			})
		}
		t.Run("concurrent/"+pol+"/lanes=1", func(t *testing.T) {
			const n = 64
			var mu sync.Mutex
			var order []string // keys in the order the lane validated them
			record := func(_ context.Context, c pipeline.CommitInfo, _ pipeline.CheckView) error {
				mu.Lock()
				order = append(order, string(c.Writes[0].Key))
				mu.Unlock()
				return nil
			}
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 1, Checks: []pipeline.Check{record}})
			positions := make(map[string]uint64, n)
			var pmu sync.Mutex
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					k := fmt.Sprintf("k%02d", i)
					tx := db.Begin()
					if err := tx.Put(db.Default(), []byte(k), []byte("v")); err != nil {
						errs <- err
						return
					}
					pos, err := tx.CommitPosition(context.Background())
					if err != nil {
						errs <- err
						return
					}
					pmu.Lock()
					positions[k] = pos
					pmu.Unlock()
				})
			}
			wait(t, wg.Wait, "commits")
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if len(order) != n {
				t.Fatalf("%d commits validated, want %d", len(order), n)
			}
			for i, k := range order {
				if positions[k] != uint64(i+1) {
					t.Fatalf("commit %s was validated %d-th but got position %d", k, i+1, positions[k])
				}
			}
			all := make([]uint64, 0, n)
			for _, p := range positions {
				all = append(all, p)
			}
			slices.Sort(all)
			for i, p := range all {
				if p != uint64(i+1) {
					t.Fatalf("positions %v are not 1..%d", all, n)
				}
			}
			if got := db.LastPosition(); got != n {
				t.Errorf("LastPosition = %d, want %d", got, n)
			}
		})
	}
}

// TestCloseDuringCommits closes the database while 1,000 commits are in flight. Close
// must return, every commit must either succeed (and be readable after reopening) or
// fail with ErrClosed (and have written nothing), and no goroutine may leak (TestMain).
func TestCloseDuringCommits(t *testing.T) {
	const n = 1000
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			dir := t.TempDir() + "/db"
			db, err := pipeline.Open(dir, pipeline.Config{Validation: pol})
			if err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			enough := make(chan struct{}) // closed when the first commit has succeeded
			var succeeded atomic.Int64
			results := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					tx := db.Begin()
					err := tx.Put(db.Default(), key("k%04d", i), []byte("v"))
					if err == nil {
						if i%2 == 0 {
							err = tx.Commit(context.Background())
						} else {
							err = tx.CommitInline()
						}
					}
					results[i] = err
					if err == nil && succeeded.Add(1) == 1 {
						close(enough)
					}
				})
			}
			close(start)
			recv(t, enough, "the first commit")
			closed := make(chan error, 1)
			go func() { closed <- db.Close() }()
			if err := recv(t, closed, "Close"); err != nil {
				t.Fatalf("Close: %v", err)
			}
			wait(t, wg.Wait, "commits after Close")
			goleak.VerifyNone(t) // no lane or commit goroutine outlives Close

			db = openAt(t, dir, pipeline.Config{Validation: pol})
			ok, refused := 0, 0
			for i, err := range results {
				k := fmt.Sprintf("k%04d", i)
				switch {
				case err == nil:
					ok++
					if v := mustGet(t, db, db.Default(), k); v != "v" {
						t.Errorf("%s = %q after reopen", k, v)
					}
				case errors.Is(err, pipeline.ErrClosed):
					refused++
					mustAbsent(t, db, db.Default(), k)
				default:
					t.Errorf("commit %d: %v, want nil or ErrClosed", i, err)
				}
			}
			if got := db.LastPosition(); got != uint64(ok) {
				t.Errorf("LastPosition after reopen = %d, want %d (one per successful commit)", got, ok)
			}
			t.Logf("%d committed, %d refused with ErrClosed", ok, refused)
		})
	}
}
