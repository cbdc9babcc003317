package conformance

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// loggedWritesReplayToTheCommit: a commit that writes a key twice, and puts then
// deletes another, logs a write set whose in-order replay is the commit's effect,
// and whose last write of each key is that key's final state. How many writes of
// one key an entry holds is the engine's choice (the local engine logs every Put,
// the JetStream engine the last one of each key): the seam promises the replay, not
// the count.
func loggedWritesReplayToTheCommit(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	got := make(chan Entry, 4)
	s, err := e.Subscribe(ctx, 0, func(en Entry) error {
		if len(en.Writes) > 0 {
			got <- en
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	pos, err := update(ctx, e, func(tx Txn) error {
		for _, w := range []Write{
			{Key: []byte("twice"), Value: []byte("first")},
			{Key: []byte("gone"), Value: []byte("briefly")},
			{Key: []byte("twice"), Value: []byte("second")},
			{Key: []byte("gone"), Delete: true},
			{Key: []byte("once"), Value: []byte("only")},
		} {
			var err error
			if w.Delete {
				err = tx.Delete("lw", w.Key)
			} else {
				err = tx.Put("lw", w.Key, w.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var en Entry
	select {
	case en = <-got:
	case <-ctx.Done():
		t.Fatal("the commit's entry was not delivered")
	}
	if en.Position != pos {
		t.Fatalf("entry at %d, commit at %d", en.Position, pos)
	}
	// Replay in order, and the last write of each key.
	replay, last := map[string]string{}, map[string]Write{}
	for _, w := range en.Writes {
		if w.Family != "lw" {
			t.Fatalf("a write of family %q, want lw", w.Family)
		}
		if w.Delete {
			delete(replay, string(w.Key))
		} else {
			replay[string(w.Key)] = string(w.Value)
		}
		last[string(w.Key)] = w
	}
	want := map[string]string{"twice": "second", "once": "only"}
	if d := cmp.Diff(want, replay); d != "" {
		t.Errorf("replaying the logged writes in order (-want +got):\n%s", d)
	}
	if w := last["gone"]; !w.Delete {
		t.Errorf("the last logged write of a key put then deleted: %+v, want a delete", w)
	}
	// Whatever was logged agrees with what a transaction now reads.
	tx, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Discard()
	for _, k := range []string{"twice", "once", "gone"} {
		v, ok, err := tx.Get(ctx, "lw", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if w, logged := want[k]; ok != logged || string(v) != w {
			t.Errorf("%s reads %q (exists %v), the log replays to %q", k, v, ok, w)
		}
	}
}
