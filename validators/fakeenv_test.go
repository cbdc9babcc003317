package validators

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rockline/rockline/storage"
)

// fakeEnv is an Env without storage. Every call a validator makes into it (and into
// its fakePositions) goes into one ordered trace, so a test states what a validator
// did, in order: "validated a", "assign 1+2", "entry a @1", "write 4", "written a",
// "filler @1", "publish 1..2", "stop 1". A commit's Record is a fakeRecord with its
// tag. Batches are real
// storage.Batch values (built in Go memory) over zero Families, which need no RocksDB.
type fakeEnv struct {
	t         *testing.T
	pos       *fakePositions
	trace     *trace
	log, data *storage.Family
	fp        Fingerprinter

	mu         sync.Mutex
	failWrites int               // how many of the next Write calls fail with errWrite
	failEntry  string            // the tag whose Entry fails with errEntry
	committed  map[string]string // what Read returns, by key
}

var (
	errWrite = errors.New("injected write failure")
	errEntry = errors.New("injected entry failure")
)

func newFakeEnv(t *testing.T) *fakeEnv {
	pos := newFakePositions(t)
	return &fakeEnv{
		t: t, pos: pos, trace: pos.trace,
		log: &storage.Family{}, data: &storage.Family{},
		fp: NewFingerprinter(), committed: make(map[string]string),
	}
}

func tag(c *Commit) string {
	if r, ok := c.Record.(*fakeRecord); ok {
		return r.tag
	}
	return ""
}

// fakeRecord is a commit's Record in the fake: its calls go into the env's trace.
type fakeRecord struct {
	e   *fakeEnv
	tag string
}

func (r *fakeRecord) Entry(_ *storage.Batch, dst []byte, pos uint64, _ int64) ([]byte, error) {
	e := r.e
	e.trace.add("entry %s @%d", r.tag, pos)
	e.mu.Lock()
	fail := e.failEntry == r.tag
	e.mu.Unlock()
	if fail {
		return dst, errEntry
	}
	return fmt.Appendf(dst, "entry %s", r.tag), nil
}

func (r *fakeRecord) Observe(s Stage) {
	switch s {
	case Validated:
		r.e.trace.add("validated %s", r.tag)
	case Written:
		r.e.trace.add("written %s", r.tag)
	default:
		r.e.t.Errorf("Observe(%s, %d): unknown stage", r.tag, s)
	}
}

// env returns the Env the validator under test is given.
func (e *fakeEnv) env() Env {
	return Env{
		Positions: e.pos,
		Write: func(b *storage.Batch) error {
			e.mu.Lock()
			fail := e.failWrites > 0
			if fail {
				e.failWrites--
			}
			e.mu.Unlock()
			if fail {
				e.trace.add("write %d failed", b.Count())
				return errWrite
			}
			e.trace.add("write %d", b.Count())
			return nil
		},
		Read: func(f *storage.Family, key []byte) ([]byte, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if v, ok := e.committed[string(key)]; ok && f == e.data {
				return []byte(v), nil
			}
			return nil, storage.ErrNotFound
		},
		Log:    e.log,
		LogKey: func(dst []byte, pos uint64) []byte { return fmt.Appendf(dst, "log/%d", pos) },
		Filler: func(dst []byte, pos uint64) []byte {
			e.trace.add("filler @%d", pos)
			return append(dst, "filler"...)
		},
	}
}

// spec describes one commit for commit: its tag, read position, the keys it read
// with tracking and the keys it writes (each to "v"). No writes makes it empty.
type spec struct {
	tag     string
	readPos uint64
	reads   []string
	writes  []string
}

// commit builds the Commit s describes, in the data family.
func (e *fakeEnv) commit(s spec) *Commit {
	e.t.Helper()
	c := &Commit{ReadPos: s.readPos, Batch: storage.NewBatch(), Record: &fakeRecord{e: e, tag: s.tag}}
	for _, k := range s.reads {
		c.Reads = append(c.Reads, e.fp.Of(1, []byte(k)))
	}
	for _, k := range s.writes {
		if err := c.Batch.Put(e.data, []byte(k), []byte("v")); err != nil {
			e.t.Fatal(err)
		}
		c.Ops = append(c.Ops, Op{Family: e.data, Key: []byte(k), Value: []byte("v")})
		c.Writes = append(c.Writes, e.fp.Of(1, []byte(k)))
	}
	return c
}

// validator returns a validator of policy over e, with checks.
func (e *fakeEnv) validator(policy string, checks ...Check) Validator {
	e.t.Helper()
	v, err := New(policy, e.env(), Options{Buckets: MinBuckets, Checks: checks})
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}
