package validators

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rockline/rockline/storage"
)

// rig is a real RocksDB with a log family, a data family and a validator.
type rig struct {
	st   *storage.DB
	log  *storage.Family
	data *storage.Family
	seq  *fakePositions
	v    Validator
	fp   Fingerprinter
}

func newRig(t *testing.T, policy string, checks ...Check) *rig {
	t.Helper()
	st, err := storage.Open(t.TempDir(), storage.Options{Families: map[string]storage.FamilyOptions{"log": {}, "data": {}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &rig{st: st, seq: newFakePositions(t), fp: NewFingerprinter()}
	r.log, _ = st.Family("log")
	r.data, _ = st.Family("data")
	r.v, err = New(policy, Env{
		Positions: r.seq,
		Write:     st.Write,
		Read:      func(f *storage.Family, key []byte) ([]byte, error) { return st.Get(f, key, nil) },
		Log:       r.log,
		LogKey:    func(dst []byte, pos uint64) []byte { return binary.BigEndian.AppendUint64(dst, pos) },
		Filler:    func(dst []byte, pos uint64) []byte { return append(dst, "filler"...) },
	}, Options{Buckets: 16, Checks: checks})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// commit builds a Commit that read reads and writes key=value for each of writes.
func (r *rig) commit(t *testing.T, f *storage.Family, readPos uint64, reads []string, writes map[string]string) *Commit {
	t.Helper()
	c := &Commit{ReadPos: readPos, Batch: storage.NewBatch(), Record: rigRecord{}}
	for _, k := range reads {
		c.Reads = append(c.Reads, r.fp.Of(f.ID(), []byte(k)))
	}
	for k, v := range writes {
		if err := c.Batch.Put(f, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		c.Ops = append(c.Ops, Op{Family: f, Key: []byte(k), Value: []byte(v)})
		c.Writes = append(c.Writes, r.fp.Of(f.ID(), []byte(k)))
	}
	return c
}

func (r *rig) logEntry(t *testing.T, pos uint64) string {
	t.Helper()
	v, err := r.st.Get(r.log, binary.BigEndian.AppendUint64(nil, pos), nil)
	if err != nil {
		t.Fatalf("log entry %d: %v", pos, err)
	}
	return string(v)
}

var policies = []string{Parallel, Serial}

func TestConflictAndPositions(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			ctx := context.Background()
			pos, err := r.v.Commit(ctx, r.commit(t, r.data, 0, nil, map[string]string{"a": "1"}))
			if err != nil || pos != 1 {
				t.Fatalf("first commit = %d, %v; want 1, nil", pos, err)
			}
			if _, err := r.v.Commit(ctx, r.commit(t, r.data, 0, []string{"a"}, map[string]string{"b": "2"})); !errors.Is(err, ErrConflict) {
				t.Fatalf("read of a key written after the read position: %v; want ErrConflict", err)
			}
			if _, err := r.v.Commit(ctx, r.commit(t, r.data, 0, nil, map[string]string{"a": "3"})); !errors.Is(err, ErrConflict) {
				t.Fatalf("write of a key written after the read position: %v; want ErrConflict", err)
			}
			pos, err = r.v.Commit(ctx, r.commit(t, r.data, 1, []string{"a"}, map[string]string{"a": "4"}))
			if err != nil || pos != 2 {
				t.Fatalf("commit at the current position = %d, %v; want 2, nil", pos, err)
			}
			if got := r.logEntry(t, 2); got != "entry 2" {
				t.Fatalf("log entry 2 = %q", got)
			}
			if pos, err := r.v.Commit(ctx, &Commit{}); pos != 0 || err != nil {
				t.Fatalf("empty commit = %d, %v; want 0, nil", pos, err)
			}
		})
	}
}

// A write that fails after its position was assigned leaves a filler, not a gap.
func TestFailedWriteIsFilled(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			doomed, err := r.st.CreateFamily("doomed", storage.FamilyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := r.commit(t, doomed, 0, nil, map[string]string{"k": "v"})
			if err := r.st.DropFamily("doomed"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.v.Commit(context.Background(), c); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
				t.Fatalf("commit into a dropped family = %v", err)
			}
			if got := r.seq.Published(); got != 1 {
				t.Fatalf("published %d after a failed write; want 1 (filled)", got)
			}
			if got := r.logEntry(t, 1); got != "filler" {
				t.Fatalf("log entry 1 = %q; want the filler", got)
			}
			pos, err := r.v.Commit(context.Background(), r.commit(t, r.data, 1, nil, map[string]string{"x": "y"}))
			if err != nil || pos != 2 {
				t.Fatalf("next commit = %d, %v; want 2, nil", pos, err)
			}
		})
	}
}

// When neither the write nor its filler can land, the sequencer stops.
func TestUnfillableWriteStops(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			c := r.commit(t, r.data, 0, nil, map[string]string{"k": "v"})
			r.st.Close()
			if _, err := r.v.Commit(context.Background(), c); !errors.Is(err, storage.ErrClosed) {
				t.Fatalf("commit on closed storage = %v", err)
			}
			if !errors.Is(r.seq.Err(), ErrStopped) {
				t.Fatalf("sequencer error = %v; want ErrStopped", r.seq.Err())
			}
			if _, err := r.v.Commit(context.Background(), r.commit(t, r.data, 0, nil, map[string]string{"x": "y"})); !errors.Is(err, ErrStopped) {
				t.Fatalf("commit after stop = %v; want ErrStopped", err)
			}
		})
	}
}

func TestChecksReject(t *testing.T) {
	errLimit := errors.New("over the limit")
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			var r *rig
			r = newRig(t, policy, func(ctx context.Context, c *Commit, v View) error {
				for _, op := range c.Ops {
					if string(op.Value) == "too much" {
						return errLimit
					}
				}
				return nil
			})
			if _, err := r.v.Commit(context.Background(), r.commit(t, r.data, 0, nil, map[string]string{"k": "too much"})); !errors.Is(err, errLimit) {
				t.Fatalf("commit = %v; want the check's error", err)
			}
			if got := r.seq.lastAssigned(); got != 0 {
				t.Fatalf("a rejected commit was assigned position %d", got)
			}
		})
	}
}

// Concurrent commits on overlapping keys: each counter increment that succeeds was
// validated against every earlier one (no lost update), for 16 buckets.
func TestConcurrentIncrementsLoseNothing(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			var mu sync.Mutex // guards the model of the counter, not the validator
			var wg sync.WaitGroup
			successes := 0
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 100; i++ {
						for {
							readPos := r.seq.acquire()
							v, err := r.st.Get(r.data, []byte("counter"), nil)
							n := 0
							if err == nil {
								n = int(binary.BigEndian.Uint64(v))
							}
							c := r.commit(t, r.data, readPos, []string{"counter"}, nil)
							next := binary.BigEndian.AppendUint64(nil, uint64(n+1))
							c.Batch.Put(r.data, []byte("counter"), next)
							c.Ops = append(c.Ops, Op{Family: r.data, Key: []byte("counter"), Value: next})
							c.Writes = append(c.Writes, r.fp.Of(r.data.ID(), []byte("counter")))
							_, err = r.v.Commit(context.Background(), c)
							r.seq.release(readPos)
							if errors.Is(err, ErrConflict) {
								continue
							}
							if err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							successes++
							mu.Unlock()
							break
						}
					}
				}()
			}
			wg.Wait()
			v, err := r.st.Get(r.data, []byte("counter"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := int(binary.BigEndian.Uint64(v)); got != successes || got != 400 {
				t.Fatalf("counter = %d after %d successful increments; want 400", got, successes)
			}
		})
	}
}

// A group is validated in order: a member that read a key an earlier member writes
// loses; the others are written together at consecutive positions.
func TestCommitGroupValidatesInOrder(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			ctx := context.Background()
			reqs := []*Request{
				{Ctx: ctx, Commit: r.commit(t, r.data, 0, nil, map[string]string{"a": "1"})},
				{Ctx: ctx, Commit: r.commit(t, r.data, 0, []string{"a"}, map[string]string{"b": "2"})},
				{Ctx: ctx, Commit: &Commit{}},
				{Ctx: ctx, Commit: r.commit(t, r.data, 0, []string{"c"}, map[string]string{"c": "3"})},
			}
			r.v.CommitGroup(reqs)
			type outcome struct {
				pos      uint64
				conflict bool
				err      bool
			}
			var got []outcome
			for _, q := range reqs {
				got = append(got, outcome{q.Pos, errors.Is(q.Err, ErrConflict), q.Err != nil})
			}
			want := []outcome{{1, false, false}, {0, true, true}, {0, false, false}, {2, false, false}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("outcomes %v; want %v", got, want)
			}
			if r.seq.Published() != 2 {
				t.Fatalf("published %d; want 2", r.seq.Published())
			}
			for _, k := range []string{"a", "c"} {
				if _, err := r.st.Get(r.data, []byte(k), nil); err != nil {
					t.Errorf("%s not written: %v", k, err)
				}
			}
			if _, err := r.st.Get(r.data, []byte("b"), nil); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("the losing member's write landed: %v", err)
			}
		})
	}
}

// A commit with events but no keys still gets a position under both policies.
func TestEventsOnlyCommitGetsPosition(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			c := r.commit(t, r.data, 0, nil, nil)
			c.HasRecord = true
			pos, err := r.v.Commit(context.Background(), c)
			if err != nil || pos != 1 {
				t.Fatalf("events-only commit = %d, %v; want 1, nil", pos, err)
			}
		})
	}
}

// rigRecord is the rig's commit Record: "entry POS" as the log entry, no stage trace.
type rigRecord struct{}

func (rigRecord) Entry(_ *storage.Batch, dst []byte, pos uint64, _ int64) ([]byte, error) {
	return fmt.Appendf(dst, "entry %d", pos), nil
}

func (rigRecord) Observe(Stage) {}
