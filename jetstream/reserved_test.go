package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
)

// markers returns how many read markers (P.m) the partition's stream holds.
func markers(t *testing.T, ctx context.Context, cfg jetstream.Config) uint64 {
	t.Helper()
	js, err := natsjs.New(connect(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	subject := cfg.Subject + ".m"
	info, err := s.Info(ctx, natsjs.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// TestReservedFamilies: a reserved family (a layer's, "rockline." prefix) can be
// neither created nor dropped through the partition, so a Txn that reads and writes
// only such a family commits without a catalog check: no read marker, where an
// ordinary family's commit carries one.
func TestReservedFamilies(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := open(t, 3)
	const layer = "rockline.streams"
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"DropFamily", func() error { _, _, err := p.DropFamily(ctx, layer); return err }},
		{"CreateFamily", func() error { _, _, err := p.CreateFamily(ctx, layer); return err }},
	} {
		err := op.call()
		var ae *jetstream.ArgumentError
		if !errors.As(err, &ae) || ae.Op != op.name || ae.Arg != "family" || !errors.Is(err, jetstream.ErrInvalidArgument) {
			t.Errorf("%s(%q) = %v; want an *ArgumentError on family", op.name, layer, err)
		}
	}
	// Two commits of a family, each reading and writing one key; it returns the read
	// markers they added.
	commit := func(family string) uint64 {
		before := markers(t, ctx, cfg)
		for range 2 {
			tx, err := p.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := tx.Get(ctx, family, []byte("k")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Put(family, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit of %q: %v", family, err)
			}
		}
		return markers(t, ctx, cfg) - before
	}
	if n := commit(layer); n != 0 {
		t.Errorf("2 commits of reserved family %q added %d read markers; want 0", layer, n)
	}
	if n := commit("f"); n != 2 {
		t.Errorf("2 commits of family f added %d read markers; want 2 (their catalog checks)", n)
	}
	pos, err := p.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Family(ctx, layer, pos); err != nil || st.Recorded || st.Dropped {
		t.Errorf("Family(%q) = %+v, %v; want no catalog record", layer, st, err)
	}
}

// TestEventStoreAppendUnchecked: an event store append on the JetStream engine
// touches only its layer family, and so carries no catalog check; the name
// pipeline gives a layer family is one the partition refuses to drop.
func TestEventStoreAppendUnchecked(t *testing.T) {
	ctx := ctxT(t)
	n := streamSeq.Add(1)
	cfg := jetstream.Config{Stream: fmt.Sprintf("RL_test_%d", n), Subject: fmt.Sprintf("rl.test.%d", n), Replicas: 3, PositionedValues: eventstore.PositionedValues()}
	p := openOn(t, connect(t, 0), cfg)
	db, err := pipeline.OpenEngine(jetstream.NewEngine(p), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, expected := range []eventstore.ExpectedRevision{eventstore.NoStream, eventstore.Revision(0), eventstore.Revision(1)} {
		if _, err := es.Append(ctx, "s-1", expected, eventstore.Event{Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := markers(t, ctx, cfg); n != 0 {
		t.Errorf("event store appends left %d read markers; want 0", n)
	}
	cf, err := db.LayerFamily("streams")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.DropFamily(ctx, cf.Name()); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("DropFamily(%q), the event store's family = %v; want ErrInvalidArgument", cf.Name(), err)
	}
}
