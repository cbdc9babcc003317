package jetstream_test

import (
	"errors"
	"testing"

	"github.com/rockline/rockline/jetstream"
)

// A timed-out commit is settled by an abort marker carrying the commit marker's
// message ID: a commit that landed is found (its position returned), one that did not
// is fenced out for good, and the abort shows in the log as an empty Aborted entry.
func TestTimeoutResolution(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	c := &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v")}}}
	landed, err := p.PublishWithIDForTest(ctx, "batch-landed", c)
	if err != nil {
		t.Fatal(err)
	}
	if pos, err := p.ResolveForTest(ctx, "batch-landed"); err != nil || pos != landed {
		t.Fatalf("resolving a landed commit: %d %v, want %d", pos, err, landed)
	}
	// Resolving again is idempotent: the abort is a duplicate each time.
	if pos, err := p.ResolveForTest(ctx, "batch-landed"); err != nil || pos != landed {
		t.Fatalf("resolving it again: %d %v, want %d", pos, err, landed)
	}
	_, err = p.ResolveForTest(ctx, "batch-lost")
	if !errors.Is(err, jetstream.ErrTimeout) {
		t.Fatalf("resolving a commit that never arrived: %v, want ErrTimeout", err)
	}
	abort, _ := p.Position(ctx)
	// The late arrival of the fenced-out commit is refused whole.
	c2 := &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("late"), Value: []byte("v")}}}
	if _, err := p.PublishWithIDForTest(ctx, "batch-lost", c2); err == nil {
		t.Fatal("a commit fenced out by its abort marker landed")
	}
	if _, ok, _ := p.Get(ctx, "f", []byte("late"), abort); ok {
		t.Fatal("the fenced-out commit wrote")
	}
	next, err := p.Commit(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	es := collect(t, p, 0, 2)
	if len(es) != 3 || es[0].Position != landed || es[0].Aborted || !es[1].Aborted || es[1].Position != abort ||
		len(es[1].Writes) != 0 || es[2].Position != next {
		t.Fatalf("log: %+v", es)
	}
}
