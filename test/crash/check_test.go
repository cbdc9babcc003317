package crash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The bank: accounts in family accountsFamily, each holding a decimal balance; every
// workload moves money between them, so the total never changes.
const (
	accountsFamily = "accounts"
	numAccounts    = 20
	initialBalance = 1000
	bankTotal      = numAccounts * initialBalance
)

func accountKey(i int) string { return fmt.Sprintf("a%02d", i) }

// initBank creates the accounts family and funds every account in one commit.
func initBank(ctx context.Context, db *pipeline.DB) error {
	acc, err := db.CreateColumnFamily(accountsFamily)
	if err != nil {
		return err
	}
	return db.Update(ctx, func(tx *pipeline.Txn) error {
		for i := range numAccounts {
			if err := tx.Put(acc, []byte(accountKey(i)), []byte(strconv.Itoa(initialBalance))); err != nil {
				return err
			}
		}
		return nil
	})
}

// balances reads every account in one snapshot.
func balances(db *pipeline.DB) ([]int, error) {
	acc, err := db.ColumnFamily(accountsFamily)
	if err != nil {
		return nil, err
	}
	out := make([]int, numAccounts)
	err = db.View(func(tx *pipeline.Txn) error {
		for i := range numAccounts {
			v, err := tx.Get(acc, []byte(accountKey(i)))
			if err != nil {
				return fmt.Errorf("account %s: %w", accountKey(i), err)
			}
			if out[i], err = strconv.Atoi(string(v)); err != nil {
				return fmt.Errorf("account %s = %q: %w", accountKey(i), v, err)
			}
		}
		return nil
	})
	return out, err
}

// checkBank fails unless the accounts add up to bankTotal and none is negative.
func checkBank(db *pipeline.DB) error {
	bs, err := balances(db)
	if err != nil {
		return fmt.Errorf("bank: %w", err)
	}
	sum := 0
	for i, b := range bs {
		if b < 0 {
			return fmt.Errorf("bank: account %s is negative (%d)", accountKey(i), b)
		}
		sum += b
	}
	if sum != bankTotal {
		return fmt.Errorf("bank: total %d, want %d (balances %v)", sum, bankTotal, bs)
	}
	return nil
}

// readLog reads the whole published log, 1..LastPosition, and checks that it is dense.
func readLog(db *pipeline.DB) ([]pipeline.LogEntry, error) {
	last := db.LastPosition()
	out := make([]pipeline.LogEntry, 0, last)
	for from := uint64(1); from <= last; {
		page, err := db.ReadLog(from, 4096)
		if err != nil {
			return nil, fmt.Errorf("ReadLog(%d): %w", from, err)
		}
		if len(page) == 0 {
			return nil, fmt.Errorf("ReadLog(%d): no entry below LastPosition %d", from, last)
		}
		for _, e := range page {
			if e.Position != from {
				return nil, fmt.Errorf("log not dense: position %d where %d was due", e.Position, from)
			}
			if e.Filler && (len(e.Writes) > 0 || len(e.Events) > 0) {
				return nil, fmt.Errorf("log position %d: filler with %d writes and %d events", e.Position, len(e.Writes), len(e.Events))
			}
			out = append(out, e)
			from++
		}
	}
	if more, err := db.ReadLog(last+1, 1); err != nil || len(more) != 0 {
		return nil, fmt.Errorf("ReadLog past LastPosition %d: %d entries, %v", last, len(more), err)
	}
	return out, nil
}

// shown is v as a string, or its size and hash when it is too long to print in a diff.
func shown(v []byte) string {
	if len(v) <= 128 {
		return string(v)
	}
	return fmt.Sprintf("<%d bytes, sha256 %x>", len(v), sha256.Sum256(v))
}

// dumpFamily returns every key of cf and its value, read in one transaction.
func dumpFamily(db *pipeline.DB, cf *pipeline.ColumnFamily) (map[string]string, error) {
	out := make(map[string]string)
	err := db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			out[string(it.Key())] = shown(it.Value())
		}
		return it.Err()
	})
	return out, err
}

// dumpAll returns the content of every live family, by name.
func dumpAll(db *pipeline.DB) (map[string]map[string]string, error) {
	names, err := db.ColumnFamilies()
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(names))
	for _, n := range names {
		cf, err := db.ColumnFamily(n)
		if err != nil {
			return nil, fmt.Errorf("family %q: %w", n, err)
		}
		if out[n], err = dumpFamily(db, cf); err != nil {
			return nil, fmt.Errorf("family %q: %w", n, err)
		}
	}
	return out, nil
}

// readStream returns every published event of stream.
func readStream(ctx context.Context, es *eventstore.Store, stream string) ([]eventstore.RecordedEvent, error) {
	var out []eventstore.RecordedEvent
	for from := uint64(0); ; {
		page, err := es.ReadStream(ctx, stream, from, 4096)
		if err != nil {
			return nil, fmt.Errorf("ReadStream(%q, %d): %w", stream, from, err)
		}
		out = append(out, page...)
		if len(page) < 4096 {
			return out, nil
		}
		from = page[len(page)-1].Revision + 1
	}
}

// checkStreamDense fails unless stream's revisions are 0..n-1 and each event is the
// one its log entry holds.
func checkStreamDense(ctx context.Context, es *eventstore.Store, stream string, log []pipeline.LogEntry) error {
	evs, err := readStream(ctx, es, stream)
	if err != nil {
		return err
	}
	for i, ev := range evs {
		if ev.Revision != uint64(i) {
			return fmt.Errorf("stream %q: revision %d at index %d", stream, ev.Revision, i)
		}
		if ev.Position == 0 || ev.Position > uint64(len(log)) {
			return fmt.Errorf("stream %q revision %d: position %d outside the log (1..%d)", stream, i, ev.Position, len(log))
		}
		found := false
		for _, e := range log[ev.Position-1].Events {
			found = found || e.ID == ev.ID
		}
		if !found {
			return fmt.Errorf("stream %q revision %d: event %q not in log entry %d", stream, i, ev.ID, ev.Position)
		}
	}
	return nil
}

// logOpts compare log entries: byte slices as bytes (fast on large values; nil and
// empty are the same bytes).
var logOpts = cmp.Options{cmp.Comparer(bytes.Equal)}

// checkReplay rebuilds db from its log alone into dir and compares every family,
// the log and the given streams with db: the state must be exactly a replay of the log.
func checkReplay(ctx context.Context, db *pipeline.DB, dir string, streams []string) (err error) {
	want, err := dumpAll(db)
	if err != nil {
		return fmt.Errorf("replay check: dump source: %w", err)
	}
	wantLog, err := readLog(db)
	if err != nil {
		return fmt.Errorf("replay check: source log: %w", err)
	}
	dst, err := db.Rebuild(ctx, dir, pipeline.Config{DisableWAL: true, Lanes: 1})
	if err != nil {
		return fmt.Errorf("replay check: Rebuild: %w", err)
	}
	defer func() { err = errors.Join(err, dst.Close()) }()
	got, err := dumpAll(dst)
	if err != nil {
		return fmt.Errorf("replay check: dump rebuilt: %w", err)
	}
	if d := cmp.Diff(want, got); d != "" {
		return fmt.Errorf("replay check: state differs from a replay of the log (-state +replay):\n%s", d)
	}
	gotLog, err := readLog(dst)
	if err != nil {
		return fmt.Errorf("replay check: rebuilt log: %w", err)
	}
	if d := cmp.Diff(wantLog, gotLog, logOpts); d != "" {
		return fmt.Errorf("replay check: rebuilt log differs (-source +rebuilt):\n%s", d)
	}
	if len(streams) == 0 {
		return nil
	}
	es, err := eventstore.New(db)
	if err != nil {
		return fmt.Errorf("replay check: %w", err)
	}
	dstES, err := eventstore.New(dst)
	if err != nil {
		return fmt.Errorf("replay check: rebuilt: %w", err)
	}
	for _, s := range streams {
		a, err := readStream(ctx, es, s)
		if err != nil {
			return fmt.Errorf("replay check: %w", err)
		}
		b, err := readStream(ctx, dstES, s)
		if err != nil {
			return fmt.Errorf("replay check: rebuilt: %w", err)
		}
		if d := cmp.Diff(a, b, logOpts); d != "" {
			return fmt.Errorf("replay check: stream %q differs (-source +rebuilt):\n%s", s, d)
		}
	}
	return nil
}
