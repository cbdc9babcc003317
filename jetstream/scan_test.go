package jetstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
)

// writeKeys commits keys k00000.. of family f, n of them, 900 per commit, values
// "v<i>", and returns the last position.
func writeKeys(t *testing.T, p *jetstream.Partition, family string, n int) uint64 {
	t.Helper()
	ctx := ctxT(t)
	var pos uint64
	for start := 0; start < n; start += 900 {
		var ws []jetstream.Write
		for i := start; i < min(n, start+900); i++ {
			ws = append(ws, jetstream.Write{Family: family, Key: fmt.Appendf(nil, "k%05d", i), Value: fmt.Appendf(nil, "v%d", i), Blind: true})
		}
		var err error
		if pos, err = p.Commit(ctx, &jetstream.Commit{Writes: ws}); err != nil {
			t.Fatal(err)
		}
	}
	return pos
}

func keysOf(t *testing.T, it *jetstream.Iterator, forward bool) []string {
	t.Helper()
	var out []string
	if forward {
		for it.First(); it.Valid(); it.Next() {
			out = append(out, string(it.Key()))
		}
	} else {
		for it.Last(); it.Valid(); it.Prev() {
			out = append(out, string(it.Key()))
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// An iterator walks a family of more keys than one multi-get can answer, in key
// order both ways, within bounds, at a snapshot, with deletes hidden.
func TestIteratorPagesAFamily(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	const n = 2500
	start := time.Now()
	at1 := writeKeys(t, p, "big", n)
	t.Logf("wrote %d keys in %v", n, time.Since(start))
	// Later: delete every 10th key, overwrite k00001, add one more key.
	var ws []jetstream.Write
	for i := 0; i < n; i += 10 {
		ws = append(ws, jetstream.Write{Family: "big", Key: fmt.Appendf(nil, "k%05d", i), Delete: true, Blind: true})
	}
	ws = append(ws, jetstream.Write{Family: "big", Key: []byte("k00001"), Value: []byte("new"), Blind: true},
		jetstream.Write{Family: "big", Key: []byte("zz"), Value: []byte("z"), Blind: true})
	at2, err := p.Commit(ctx, &jetstream.Commit{Writes: ws})
	if err != nil {
		t.Fatal(err)
	}
	var want1, want2 []string
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		want1 = append(want1, k)
		if i%10 != 0 {
			want2 = append(want2, k)
		}
	}
	want2 = append(want2, "zz")

	start = time.Now()
	it, err := p.NewIterator(ctx, "big", jetstream.IterOptions{}, at1)
	if err != nil {
		t.Fatal(err)
	}
	listed := time.Since(start)
	got := keysOf(t, it, true)
	t.Logf("at %d: listed %d subjects in %v, walked %d keys forward in %v", at1, n+1, listed, len(got), time.Since(start))
	if !slices.Equal(got, want1) {
		t.Fatalf("forward at %d: %d keys, want %d (first %v)", at1, len(got), len(want1), got[:min(3, len(got))])
	}
	if back := keysOf(t, it, false); !slices.Equal(back, reversed(want1)) {
		t.Errorf("backward at %d: %d keys", at1, len(back))
	}
	it2, err := p.NewIterator(ctx, "big", jetstream.IterOptions{}, at2)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, it2, true); !slices.Equal(got, want2) {
		t.Errorf("forward at %d: %d keys, want %d", at2, len(got), len(want2))
	}
	it2.Seek([]byte("k00001"))
	if !it2.Valid() || string(it2.Value()) != "new" {
		t.Errorf("Seek k00001 at %d: valid %v value %q", at2, it2.Valid(), it2.Value())
	}
	it2.Seek([]byte("k01230")) // deleted: lands on the next
	if !it2.Valid() || string(it2.Key()) != "k01231" {
		t.Errorf("Seek to a deleted key: %q", it2.Key())
	}
	it2.Prev() // k01230 deleted: k01229
	if !it2.Valid() || string(it2.Key()) != "k01229" {
		t.Errorf("Prev over a deleted key: %q", it2.Key())
	}
	it2.SeekForPrev([]byte("k01230x"))
	if !it2.Valid() || string(it2.Key()) != "k01229" {
		t.Errorf("SeekForPrev: %q", it2.Key())
	}
	it2.Seek([]byte("zzz"))
	if it2.Valid() {
		t.Errorf("Seek past the end: %q", it2.Key())
	}
	_ = it2.Close()

	// Bounds [lower, upper).
	it3, err := p.NewIterator(ctx, "big", jetstream.IterOptions{Lower: []byte("k01000"), Upper: []byte("k01100")}, at2)
	if err != nil {
		t.Fatal(err)
	}
	var wantRange []string
	for _, k := range want2 {
		if k >= "k01000" && k < "k01100" {
			wantRange = append(wantRange, k)
		}
	}
	if got := keysOf(t, it3, true); !slices.Equal(got, wantRange) {
		t.Errorf("range: %v, want %v", got, wantRange)
	}
	if got := keysOf(t, it3, false); !slices.Equal(got, reversed(wantRange)) {
		t.Errorf("range backward: %v", got)
	}
	// The empty partition, and a position inside a commit.
	if it, err := p.NewIterator(ctx, "big", jetstream.IterOptions{}, 0); err != nil || len(keysOf(t, it, true)) != 0 {
		t.Errorf("at 0: %v", err)
	}
	it4, err := p.NewIterator(ctx, "big", jetstream.IterOptions{}, at2-1)
	if err != nil {
		t.Fatal(err)
	}
	if it4.First(); it4.Valid() || !errors.Is(it4.Err(), jetstream.ErrInvalidArgument) {
		t.Errorf("inside a commit: valid %v, %v", it4.Valid(), it4.Err())
	}
	// Scan has no cap any more.
	start = time.Now()
	items, err := p.Scan(ctx, "big", nil, at2)
	if err != nil || len(items) != len(want2) {
		t.Fatalf("Scan: %d items, %v", len(items), err)
	}
	t.Logf("Scan of %d live keys (%d subjects) at %d: %v", len(items), n+1, at2, time.Since(start))
	for i, it := range items {
		if string(it.Key) != want2[i] {
			t.Fatalf("Scan item %d = %q, want %q", i, it.Key, want2[i])
		}
	}
	start = time.Now()
	it5, _ := p.NewIterator(ctx, "big", jetstream.IterOptions{}, at2)
	it5.Seek([]byte("k02000"))
	for range 10 {
		it5.Next()
	}
	t.Logf("open + Seek + 10 Next over %d subjects: %v", n+1, time.Since(start))
	if !it5.Valid() || it5.Err() != nil {
		t.Errorf("Seek+Next: %v", it5.Err())
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// A transaction's iterator merges its own writes and tracks what it yields.
func TestTxnIterator(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{
		{Family: "f", Key: []byte("a"), Value: []byte("1")}, {Family: "f", Key: []byte("b"), Value: []byte("2")},
		{Family: "f", Key: []byte("c"), Value: []byte("3")}, {Family: "g", Key: []byte("a"), Value: []byte("x")},
	}}); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Put("f", []byte("bb"), []byte("own"))
	_ = tx.Delete("f", []byte("c"))
	_ = tx.Put("f", []byte("a"), []byte("1'"))
	it, err := tx.NewIterator(ctx, "f", jetstream.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for it.First(); it.Valid(); it.Next() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
	}
	if want := []string{"a=1'", "b=2", "bb=own"}; !slices.Equal(got, want) {
		t.Errorf("merged: %v, want %v", got, want)
	}
	got = got[:0]
	for it.Last(); it.Valid(); it.Prev() {
		got = append(got, string(it.Key()))
	}
	if want := []string{"bb", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("merged backward: %v, want %v", got, want)
	}
	// b was yielded from the snapshot, so it is tracked: a change to it conflicts.
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("b"), Value: []byte("changed"), Blind: true}}}); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Commit(ctx)
	var ce *jetstream.ConflictError
	if !errors.As(err, &ce) || string(ce.Key) != "b" || ce.Kind != "read" {
		t.Errorf("commit after a yielded key changed: %v, want a read conflict on b", err)
	}
}

// The listing holds every key the family ever had, so its cost grows with the family,
// not the range: measured for the report.
func TestIteratorCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	ctx := ctxT(t)
	p, _ := open(t, 3)
	for _, n := range []int{1000, 10000} {
		fam := fmt.Sprintf("f%d", n)
		at := writeKeys(t, p, fam, n)
		var tl, tw, ts time.Duration
		const runs = 3
		for range runs {
			start := time.Now()
			it, err := p.NewIterator(ctx, fam, jetstream.IterOptions{}, at)
			if err != nil {
				t.Fatal(err)
			}
			tl += time.Since(start)
			it.Seek([]byte("k00500"))
			for range 9 {
				it.Next()
			}
			ts += time.Since(start)
			c := 0
			for it.First(); it.Valid(); it.Next() {
				c++
			}
			if c != n || it.Err() != nil {
				t.Fatalf("walked %d of %d: %v", c, n, it.Err())
			}
			tw += time.Since(start)
		}
		t.Logf("family of %d keys: list %v, list+Seek+10 keys %v, list+walk all %v (mean of %d)", n, tl/runs, ts/runs, tw/runs, runs)
	}
	_ = bytes.Compare
}
