package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Environment of the child process. childEnv names the database folder; its absence
// makes TestCrashChild a no-op.
const (
	childEnv        = "ROCKLINE_CRASH_CHILD"
	childPolicyEnv  = "ROCKLINE_CRASH_POLICY"
	childLanesEnv   = "ROCKLINE_CRASH_LANES"
	childSyncEnv    = "ROCKLINE_CRASH_SYNC"
	childWALEnv     = "ROCKLINE_CRASH_WAL"
	childFamBaseEnv = "ROCKLINE_CRASH_FAMBASE"
	childSeedEnv    = "ROCKLINE_CRASH_CHILD_SEED"
	childModeEnv    = "ROCKLINE_CRASH_MODE" // "" (mixed workload), "flush" (noWALFlushChild) or "atomicflush" (atomicFlushChild)
)

// Lines the child writes on stdout. Every acknowledged commit (and family create or
// drop) is reported with one write of one line, after the call returned.
const (
	readyLine = "READY"
	ackPrefix = "ACK "
)

// numStreams is how many streams the child appends to (one appender each).
const numStreams = 2

func streamName(i int) string { return fmt.Sprintf("crash-%d", i) }

func allStreams() []string {
	out := make([]string, numStreams)
	for i := range out {
		out[i] = streamName(i)
	}
	return out
}

// ack is one acknowledged operation as reported by the child.
type ack struct {
	Kind   string   `json:"kind"` // transfer, put, append, create, dropping, drop
	Pos    uint64   `json:"pos,omitempty"`
	Writes []write  `json:"writes,omitempty"`
	Family string   `json:"family,omitempty"`
	Stream string   `json:"stream,omitempty"`
	Rev    uint64   `json:"rev,omitempty"` // the first event's revision
	IDs    []string `json:"ids,omitempty"`
	Err    string   `json:"err,omitempty"` // kinds error and closed (TestFullDisk)
	// Positions of the cold commits made while a CompactRange's atomic flush ran
	// (kind atomic-flush, see provokeAtomicFlush).
	Positions []uint64 `json:"positions,omitempty"`
}

// write is one key written by an acknowledged commit.
type write struct {
	F   string `json:"f"`
	K   string `json:"k"`
	V   string `json:"v,omitempty"`
	Del bool   `json:"del,omitempty"`
}

// variant is how the database is made durable in a cycle.
type variant struct {
	name      string
	wal, sync bool
}

// durable reports whether acknowledged commits must survive a process kill: with the
// WAL on they must, synced or not (a kill does not lose what reached the OS).
func (v variant) durable() bool { return v.wal }

var variants = []variant{
	{name: "wal+sync", wal: true, sync: true},
	{name: "wal", wal: true},
	{name: "nowal"},
}

func variantByName(name string) variant {
	for _, v := range variants {
		if v.name == name {
			return v
		}
	}
	panic("unknown variant " + name)
}

// childConfig is the configuration of a cycle's child and of its reopen. The families
// of atomicFlushFamilies are there in every variant; only WAL-off children write them.
func childConfig(v variant, policy string, lanes int) pipeline.Config {
	return pipeline.Config{Validation: policy, Lanes: lanes, Sync: v.sync, DisableWAL: !v.wal, Families: atomicFlushFamilies()}
}

// reporter writes ack lines to stdout, one write per line.
type reporter struct {
	mu sync.Mutex
	n  atomic.Int64
}

func (r *reporter) line(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := os.Stdout.WriteString(s + "\n")
	return err
}

func (r *reporter) ack(a ack) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	r.n.Add(1)
	return r.line(ackPrefix + string(b))
}

// TestCrashChild is the child half of TestCrash; run directly it does nothing. It opens
// the database named by ROCKLINE_CRASH_CHILD, prints READY, runs the mixed workload
// from several goroutines and reports every acknowledged operation until it is
// killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return
	}
	switch os.Getenv(childModeEnv) {
	case "flush":
		noWALFlushChild(t, dir)
		return
	case "atomicflush":
		attempt, _ := strconv.Atoi(os.Getenv(childSeedEnv))
		atomicFlushChild(t, dir, attempt)
		return
	}
	v := variantByName(os.Getenv(childWALEnv))
	lanes, _ := strconv.Atoi(os.Getenv(childLanesEnv))
	famBase, _ := strconv.Atoi(os.Getenv(childFamBaseEnv))
	seed, _ := strconv.ParseUint(os.Getenv(childSeedEnv), 10, 64)
	db, err := pipeline.Open(dir, childConfig(v, os.Getenv(childPolicyEnv), lanes))
	if err != nil {
		t.Fatalf("child: Open: %v", err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("child: eventstore.New: %v", err)
	}
	acc, err := db.ColumnFamily(accountsFamily)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	w := &childWorkload{db: db, es: es, acc: acc, out: &reporter{}, seed: seed, famBase: famBase}
	if err := w.out.line(readyLine); err != nil {
		t.Fatalf("child: %v", err)
	}
	errs := make(chan error, 16)
	run := func(name string, fn func() error) {
		go func() { errs <- fmt.Errorf("%s: %w", name, fn()) }()
	}
	for i := range 4 {
		run(fmt.Sprintf("transfer %d", i), func() error { return w.transfers(i) })
	}
	for i := range numStreams {
		run(fmt.Sprintf("appender %d", i), func() error { return w.appends(i) })
	}
	run("families", w.families)
	run("family writer", w.familyWrites)
	if !v.wal {
		// With the WAL off, set facebook/rocksdb#11148's race up again and again (the
		// kill may land while its hole is open; verify looks for exactly that loss).
		run("atomic flush provoker", func() error {
			for a := 0; ; a++ {
				during, err := provokeAtomicFlush(context.Background(), db, w.out, int(seed%1000)*1000+a, a == 0)
				if err != nil {
					return err
				}
				if err := w.out.ack(ack{Kind: "atomic-flush", Family: coldFamily, Positions: during}); err != nil {
					return err
				}
			}
		})
	}
	// The workers run until the parent kills the process; the bound only keeps an
	// orphaned child from living forever.
	select {
	case err := <-errs:
		t.Fatalf("child: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("child: not killed")
	}
}

type childWorkload struct {
	db      *pipeline.DB
	es      *eventstore.Store
	acc     *pipeline.ColumnFamily
	out     *reporter
	seed    uint64
	famBase int
	current atomic.Pointer[pipeline.ColumnFamily] // the live tmp family, if any
}

// expected reports whether err is an outcome the workload accepts and moves past.
func expected(err error) bool {
	return errors.Is(err, pipeline.ErrConflict) || errors.Is(err, pipeline.ErrTxnTooOld)
}

// transfers moves random amounts between random accounts with Update.
func (w *childWorkload) transfers(worker int) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(w.seed, uint64(worker)))
	var writes []write
	for {
		a := rng.IntN(numAccounts)
		b := (a + 1 + rng.IntN(numAccounts-1)) % numAccounts
		amount := 1 + rng.IntN(100)
		pos, err := w.db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
			writes = writes[:0]
			ka, kb := []byte(accountKey(a)), []byte(accountKey(b))
			va, err := tx.Get(w.acc, ka)
			if err != nil {
				return err
			}
			vb, err := tx.Get(w.acc, kb)
			if err != nil {
				return err
			}
			ba, _ := strconv.Atoi(string(va))
			bb, _ := strconv.Atoi(string(vb))
			if ba < amount {
				return nil // nothing to move: an empty transaction, position 0
			}
			na, nb := strconv.Itoa(ba-amount), strconv.Itoa(bb+amount)
			if err := tx.Put(w.acc, ka, []byte(na)); err != nil {
				return err
			}
			if err := tx.Put(w.acc, kb, []byte(nb)); err != nil {
				return err
			}
			writes = append(writes, write{F: accountsFamily, K: accountKey(a), V: na}, write{F: accountsFamily, K: accountKey(b), V: nb})
			return nil
		})
		switch {
		case expected(err):
			continue
		case err != nil:
			return err
		case pos == 0:
			continue
		}
		if err := w.out.ack(ack{Kind: "transfer", Pos: pos, Writes: writes}); err != nil {
			return err
		}
	}
}

// appends appends one or two events at a time to its own stream, expecting the exact
// revision it left the stream at.
func (w *childWorkload) appends(worker int) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(w.seed, 100+uint64(worker)))
	stream := streamName(worker)
	expect := eventstore.NoStream
	last, err := w.es.ReadStreamBackward(ctx, stream, math.MaxUint64, 1)
	if err != nil {
		return err
	}
	if len(last) == 1 {
		expect = eventstore.Revision(last[0].Revision)
	}
	for n := 0; ; n++ {
		events := make([]pipeline.Event, 1+rng.IntN(2))
		ids := make([]string, len(events))
		for i := range events {
			ids[i] = fmt.Sprintf("%s-%d-%d-%d", stream, w.seed, n, i)
			events[i] = pipeline.Event{ID: ids[i], Type: "deposited", Data: []byte(strconv.Itoa(rng.IntN(1000)))}
		}
		res, err := w.es.Append(ctx, stream, expect, events...)
		if expected(err) {
			continue
		}
		if err != nil {
			return err
		}
		first := res.NextExpectedRevision + 1 - uint64(len(events))
		if err := w.out.ack(ack{Kind: "append", Pos: res.Position, Stream: stream, Rev: first, IDs: ids}); err != nil {
			return err
		}
		expect = eventstore.Revision(res.NextExpectedRevision)
	}
}

// families creates a family tmp-N, writes to it, and drops it, over and over; the
// family writer writes to the live one concurrently, so drops race with commits.
func (w *childWorkload) families() error {
	ctx := context.Background()
	// Pacing, not synchronisation: a few families per cycle keep the replay check's
	// rebuild (which re-creates and drops every family the log names) quick.
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		name := fmt.Sprintf("tmp-%d", w.famBase+i)
		cf, err := w.db.CreateColumnFamily(name)
		if err != nil {
			return err
		}
		if err := w.out.ack(ack{Kind: "create", Family: name}); err != nil {
			return err
		}
		w.current.Store(cf)
		pos, err := w.db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
			return tx.Put(cf, []byte("seed"), []byte(name))
		})
		if err != nil && !expected(err) {
			return err
		}
		if err == nil {
			if err := w.out.ack(ack{Kind: "put", Pos: pos, Writes: []write{{F: name, K: "seed", V: name}}}); err != nil {
				return err
			}
		}
		<-tick.C
		if err := w.out.ack(ack{Kind: "dropping", Family: name}); err != nil {
			return err
		}
		if err := w.db.DropColumnFamily(name); err != nil {
			return err
		}
		if err := w.out.ack(ack{Kind: "drop", Family: name}); err != nil {
			return err
		}
	}
}

// familyWrites writes (and every third time deletes) keys in whichever tmp family is
// live; commits that lose the race with a drop fail with ErrColumnFamilyDropped.
func (w *childWorkload) familyWrites() error {
	ctx := context.Background()
	tick := time.NewTicker(time.Millisecond) // pacing, not synchronisation
	defer tick.Stop()
	for n := 0; ; n++ {
		<-tick.C
		cf := w.current.Load()
		if cf == nil {
			continue
		}
		wr := write{F: cf.Name(), K: fmt.Sprintf("k%d", n/3*3), V: fmt.Sprintf("v%d", n)}
		if n%3 == 2 {
			wr.V, wr.Del = "", true
		}
		pos, err := w.db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
			if wr.Del {
				return tx.Delete(cf, []byte(wr.K))
			}
			return tx.Put(cf, []byte(wr.K), []byte(wr.V))
		})
		switch {
		case errors.Is(err, pipeline.ErrColumnFamilyDropped), expected(err):
			continue
		case err != nil:
			return err
		}
		if err := w.out.ack(ack{Kind: "put", Pos: pos, Writes: []write{wr}}); err != nil {
			return err
		}
	}
}
