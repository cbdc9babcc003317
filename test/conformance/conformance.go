// Package conformance is one suite of behaviour tests that every rockline engine must
// pass: the local engine (pipeline and eventstore on RocksDB, local_test.go here) and
// the JetStream engine (its own module runs Run with its adapter). It states the
// promises of one partition in terms both engines can be driven by: optimistic
// transactions with tracked reads over families, appends with expected revisions,
// idempotent retries, subscriptions, family drops and typed errors for bad input.
//
// An engine joins by implementing Engine (a small adapter over its own API) and
// calling Run from a test. The suite uses only what Engine offers and the error
// sentinels of pipeline and eventstore, so a failure names a broken promise, not an
// implementation detail.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Engine is what the suite drives: one partition of an engine, fresh and empty.
type Engine interface {
	// Begin starts a transaction that reads the partition as of now.
	Begin(ctx context.Context) (Txn, error)
	// Append appends events to stream in a transaction of its own (eventstore's
	// Store.Append): a mismatch matches eventstore.ErrWrongExpectedVersion, and an
	// append whose events, all with IDs, are already the stream's at the revisions
	// expected returns the original commit's position without writing.
	Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) (uint64, error)
	// ReadStream returns every event of stream, in revision order.
	ReadStream(ctx context.Context, stream string) ([]Event, error)
	// Subscribe hands every commit after position after to fn, in position order,
	// each once, until ctx ends or Close; it returns once the subscription runs.
	Subscribe(ctx context.Context, after uint64, fn func(Entry) error) (Subscription, error)
	// DropFamily drops family: its keys are gone afterwards, and writing it again
	// starts it empty.
	DropFamily(ctx context.Context, family string) error
}

// Txn is an optimistic transaction of an Engine.
type Txn interface {
	// Get returns key of family as the transaction sees it and whether it exists;
	// the read is tracked for conflicts.
	Get(ctx context.Context, family string, key []byte) ([]byte, bool, error)
	Put(family string, key, value []byte) error
	// PutAtCommit puts key with a value made at commit from the commit's position by
	// the event store's tag marker value (revision.AppendMark, named
	// revision.MarkName): not checked for conflicts, but a write to others' tracked
	// reads (pipeline.Txn.PutAtCommit).
	PutAtCommit(family string, key, payload []byte) error
	Delete(family string, key []byte) error
	// Append appends events to stream if its revision meets expected, else an error
	// matching eventstore.ErrWrongExpectedVersion.
	Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) error
	// CheckStream makes the commit conditional on stream's revision meeting expected
	// without appending to it (eventstore's StreamAt condition): an error matching
	// eventstore.ErrWrongExpectedVersion if it does not now, and a Commit that fails
	// with pipeline.ErrConflict if another commit appends to stream first.
	CheckStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error
	// RequireNoneMatching makes the commit conditional on no event matching q having
	// been appended after position after (eventstore's NoneMatching condition): an
	// error matching eventstore.ErrConditionFailed if one has, and a Commit that
	// fails with pipeline.ErrConflict if another commit appends one first. An engine
	// that cannot check it refuses with an error matching errors.ErrUnsupported.
	RequireNoneMatching(ctx context.Context, q eventstore.Query, after uint64) error
	// Commit commits and returns the position (0 for a transaction with nothing to
	// write); a conflict matches pipeline.ErrConflict.
	Commit(ctx context.Context) (uint64, error)
	Discard()
}

// Subscription is a running subscription.
type Subscription interface{ Close() error }

// Event is an event as read back.
type Event struct {
	Stream   string
	Revision uint64
	ID, Type string
	Data     []byte
	Tags     []string
}

// Entry is one commit as a subscription delivers it.
type Entry struct {
	Position uint64
	Events   []Event
	// Writes is the commit's write set as the engine logs it (pipeline.LogEntry.Writes):
	// replayed in order it gives the commit's effect; an engine may log only the last
	// write of each key.
	Writes []Write
}

// Write is a logged put (or, with Delete, a delete) of Key in Family.
type Write struct {
	Family string
	Key    []byte
	Value  []byte
	Delete bool
}

// Factory returns a fresh, empty partition of the engine for one test.
type Factory func(t *testing.T) Engine

// deadline bounds every wait, so a broken engine fails a test instead of hanging it.
const deadline = 60 * time.Second

// Run runs the whole suite against the engine newEngine makes.
func Run(t *testing.T, newEngine Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Engine)
	}{
		{"ExpectedRevisionTruthTable", expectedRevisionTruthTable},
		{"RacingAppendsOneWins", racingAppendsOneWins},
		{"BankNoLostUpdate", bankNoLostUpdate},
		{"WriteSkewRefused", writeSkewRefused},
		{"TrackedReadConflicts", trackedReadConflicts},
		{"SubscriptionNeverSkipsOrRepeats", subscriptionNeverSkipsOrRepeats},
		{"IdempotentRetry", idempotentRetry},
		{"DropFamily", dropFamily},
		{"BadInputIsTyped", badInputIsTyped},
		{"LoggedWritesReplayToTheCommit", loggedWritesReplayToTheCommit},
		{"PositionedWriteConflictsWithTrackedRead", positionedWriteConflictsWithTrackedRead},
		{"TagsRoundTrip", tagsRoundTrip},
		{"StreamConditionTruthTable", streamConditionTruthTable},
		{"StreamConditionConflicts", streamConditionConflicts},
		{"StreamConditionsRacingAppends", streamConditionsRacingAppends},
		{"QueryConditionsRacingAppends", queryConditionsRacingAppends},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEngine(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// update runs fn in transactions until one commits or fn fails, retrying conflicts.
func update(ctx context.Context, e Engine, fn func(Txn) error) (uint64, error) {
	for attempt := 0; ; attempt++ {
		tx, err := e.Begin(ctx)
		if err != nil {
			return 0, err
		}
		if err := fn(tx); err != nil {
			tx.Discard()
			return 0, err
		}
		pos, err := tx.Commit(ctx)
		if !errors.Is(err, pipeline.ErrConflict) || attempt > 200 {
			return pos, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}

func appendOnce(ctx context.Context, e Engine, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) (uint64, error) {
	return e.Append(ctx, stream, expected, events...)
}

func ev(id, typ string) pipeline.Event { return pipeline.Event{ID: id, Type: typ, Data: []byte(id)} }

// expectedRevisionTruthTable: every expectation against a stream with no events, one
// event and three, as KurrentDB defines them.
func expectedRevisionTruthTable(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	for i, n := range []int{1, 3} {
		for j := range n {
			if _, err := appendOnce(ctx, e, fmt.Sprint("s", n), eventstore.Any, ev(fmt.Sprintf("seed-%d-%d", i, j), "seed")); err != nil {
				t.Fatal(err)
			}
		}
	}
	expectations := []struct {
		name string
		exp  eventstore.ExpectedRevision
		ok   [3]bool // against no stream, 1 event, 3 events
	}{
		{"Any", eventstore.Any, [3]bool{true, true, true}},
		{"NoStream", eventstore.NoStream, [3]bool{true, false, false}},
		{"StreamExists", eventstore.StreamExists, [3]bool{false, true, true}},
		{"Revision(0)", eventstore.Revision(0), [3]bool{false, true, false}},
		{"Revision(2)", eventstore.Revision(2), [3]bool{false, false, true}},
		{"Revision(5)", eventstore.Revision(5), [3]bool{false, false, false}},
	}
	for _, x := range expectations {
		for k, stream := range []string{"none", "s1", "s3"} {
			tx, err := e.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = tx.Append(ctx, stream, x.exp, ev("", "probe"))
			tx.Discard() // nothing is committed: the table checks the decision alone
			if got := err == nil; got != x.ok[k] {
				t.Errorf("%s against %s: err %v, want success %v", x.name, stream, err, x.ok[k])
			}
			if err != nil && !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
				t.Errorf("%s against %s: %v, want an error matching ErrWrongExpectedVersion", x.name, stream, err)
			}
		}
	}
}

// racingAppendsOneWins: writers that read the same revision and append concurrently:
// exactly one commits each round, and the stream holds exactly the winners.
func racingAppendsOneWins(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	const writers, rounds = 4, 8
	var winners []string
	for r := range rounds {
		expected := eventstore.NoStream
		if r > 0 {
			expected = eventstore.Revision(uint64(r - 1))
		}
		txs := make([]Txn, writers)
		for w := range writers { // every writer reads the same head before any commits
			tx, err := e.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Append(ctx, "race", expected, ev(fmt.Sprintf("r%d-w%d", r, w), "raced")); err != nil {
				t.Fatalf("round %d writer %d: %v", r, w, err)
			}
			txs[w] = tx
		}
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w, tx := range txs {
			wg.Go(func() { _, errs[w] = tx.Commit(ctx) })
		}
		wg.Wait()
		won := 0
		for w, err := range errs {
			switch {
			case err == nil:
				won++
				winners = append(winners, fmt.Sprintf("r%d-w%d", r, w))
			case !errors.Is(err, pipeline.ErrConflict):
				t.Errorf("round %d writer %d: %v, want success or ErrConflict", r, w, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers won, want exactly 1 (%v)", r, won, errs)
		}
	}
	got, err := e.ReadStream(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, x := range got {
		ids = append(ids, x.ID)
		if x.Revision != uint64(i) {
			t.Errorf("revision %d at index %d", x.Revision, i)
		}
	}
	if !slices.Equal(ids, winners) {
		t.Errorf("stream holds %v, want the winners %v", ids, winners)
	}
}

func readInt(ctx context.Context, tx Txn, key string) (int, error) {
	v, ok, err := tx.Get(ctx, "accounts", []byte(key))
	if err != nil || !ok {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(string(v), &n)
	return n, err
}

// bankNoLostUpdate: concurrent transfers between a few accounts, retried on conflict:
// the total is conserved and every account ends at its opening balance plus the
// transfers committed to and from it.
func bankNoLostUpdate(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	const accounts, workers, transfers, opening = 4, 4, 25, 1000
	if _, err := update(ctx, e, func(tx Txn) error {
		for a := range accounts {
			if err := tx.Put("accounts", []byte(fmt.Sprint("a", a)), []byte(fmt.Sprint(opening))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	net := make([]int, accounts)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range transfers {
				from, to, amount := (w+i)%accounts, (w+i+1)%accounts, 1+i%7
				_, err := update(ctx, e, func(tx Txn) error {
					a, err := readInt(ctx, tx, fmt.Sprint("a", from))
					if err != nil {
						return err
					}
					b, err := readInt(ctx, tx, fmt.Sprint("a", to))
					if err != nil {
						return err
					}
					return errors.Join(tx.Put("accounts", []byte(fmt.Sprint("a", from)), []byte(fmt.Sprint(a-amount))),
						tx.Put("accounts", []byte(fmt.Sprint("a", to)), []byte(fmt.Sprint(b+amount))))
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				net[from] -= amount
				net[to] += amount
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tx, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Discard()
	total := 0
	for a := range accounts {
		n, err := readInt(ctx, tx, fmt.Sprint("a", a))
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n != opening+net[a] {
			t.Errorf("account %d: %d, want %d: an update was lost", a, n, opening+net[a])
		}
	}
	if total != accounts*opening {
		t.Errorf("total %d, want %d", total, accounts*opening)
	}
}

// writeSkewRefused: two transactions each read both on-call flags and clear their own
// when the other is set; committing both would leave nobody on call.
func writeSkewRefused(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	if _, err := update(ctx, e, func(tx Txn) error {
		return errors.Join(tx.Put("oncall", []byte("alice"), []byte("1")), tx.Put("oncall", []byte("bob"), []byte("1")))
	}); err != nil {
		t.Fatal(err)
	}
	txs := make([]Txn, 2)
	for i, me := range []string{"alice", "bob"} {
		tx, err := e.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other := map[string]string{"alice": "bob", "bob": "alice"}[me]
		v, ok, err := tx.Get(ctx, "oncall", []byte(other))
		if err != nil || !ok || string(v) != "1" {
			t.Fatalf("%s reads %s: %q %v %v", me, other, v, ok, err)
		}
		if _, _, err := tx.Get(ctx, "oncall", []byte(me)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Put("oncall", []byte(me), []byte("0")); err != nil {
			t.Fatal(err)
		}
		txs[i] = tx
	}
	_, err0 := txs[0].Commit(ctx)
	_, err1 := txs[1].Commit(ctx)
	if err0 != nil || !errors.Is(err1, pipeline.ErrConflict) {
		t.Errorf("commits: %v, %v; want the first to commit and the second to conflict", err0, err1)
	}
}

// trackedReadConflicts: a key read but not written fails the commit when another
// commit changed it meanwhile.
func trackedReadConflicts(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	if _, err := update(ctx, e, func(tx Txn) error { return tx.Put("f", []byte("k"), []byte("v1")) }); err != nil {
		t.Fatal(err)
	}
	tx, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.Get(ctx, "f", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Put("f", []byte("other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := update(ctx, e, func(tx Txn) error { return tx.Put("f", []byte("k"), []byte("v2")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); !errors.Is(err, pipeline.ErrConflict) {
		t.Errorf("commit after the key read changed: %v, want ErrConflict", err)
	}
	// A key absent when read and created meanwhile is a change too.
	tx, err = e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tx.Get(ctx, "f", []byte("new")); err != nil || ok {
		t.Fatalf("Get(new) = %v, %v", ok, err)
	}
	if err := tx.Put("f", []byte("other"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := update(ctx, e, func(tx Txn) error { return tx.Put("f", []byte("new"), []byte("n")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); !errors.Is(err, pipeline.ErrConflict) {
		t.Errorf("commit after a key read absent was created: %v, want ErrConflict", err)
	}
}

// subscriptionNeverSkipsOrRepeats: a subscription started before concurrent writers
// and one started from the middle each see every acknowledged commit once, in order.
func subscriptionNeverSkipsOrRepeats(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	const writers, per = 3, 20
	type seen struct {
		mu   sync.Mutex
		pos  []uint64
		done chan struct{}
		want int
	}
	follow := func(after uint64, want int) (*seen, Subscription) {
		s := &seen{done: make(chan struct{}), want: want}
		sub, err := e.Subscribe(ctx, after, func(en Entry) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.pos = append(s.pos, en.Position)
			if len(s.pos) == s.want {
				close(s.done)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return s, sub
	}
	all, sub := follow(0, writers*per)
	defer sub.Close()
	var mu sync.Mutex
	var acked []uint64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				pos, err := appendOnce(ctx, e, fmt.Sprint("sub-", w), eventstore.Any, ev(fmt.Sprintf("w%d-%d", w, i), "t"))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, pos)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(acked)
	select {
	case <-all.done:
	case <-time.After(deadline):
		t.Fatalf("the subscription saw %d of %d commits", len(all.pos), writers*per)
	}
	all.mu.Lock()
	got := slices.Clone(all.pos)
	all.mu.Unlock()
	if !slices.Equal(got, acked) {
		t.Errorf("subscription delivered %v, want the acknowledged positions %v in order", got, acked)
	}
	mid := acked[len(acked)/2]
	rest, sub2 := follow(mid, len(acked)-len(acked)/2-1)
	defer sub2.Close()
	select {
	case <-rest.done:
	case <-time.After(deadline):
		t.Fatalf("the subscription from %d saw %d commits", mid, len(rest.pos))
	}
	rest.mu.Lock()
	defer rest.mu.Unlock()
	if !slices.Equal(rest.pos, acked[len(acked)/2+1:]) {
		t.Errorf("subscription after %d delivered %v, want %v", mid, rest.pos, acked[len(acked)/2+1:])
	}
}

// idempotentRetry: an append sent again with the same event IDs and expectation (an
// acknowledgement lost) reports the original position and writes nothing twice.
func idempotentRetry(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	events := []pipeline.Event{ev("once-1", "t"), ev("once-2", "t")}
	first, err := appendOnce(ctx, e, "idem", eventstore.NoStream, events...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendOnce(ctx, e, "idem", eventstore.Revision(1), ev("after", "t")); err != nil {
		t.Fatal(err)
	}
	again, err := appendOnce(ctx, e, "idem", eventstore.NoStream, events...)
	if err != nil || again != first {
		t.Errorf("the retried append: position %d, %v; want the original %d", again, err, first)
	}
	got, err := e.ReadStream(ctx, "idem")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range got {
		ids = append(ids, x.ID)
	}
	if want := []string{"once-1", "once-2", "after"}; !slices.Equal(ids, want) {
		t.Errorf("stream holds %v, want %v", ids, want)
	}
	if _, err := appendOnce(ctx, e, "idem", eventstore.NoStream, ev("once-1", "t"), ev("other", "t")); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("an append only partly made before: %v, want ErrWrongExpectedVersion", err)
	}
}

// dropFamily: a dropped family's keys are gone; writing it again starts it empty; the
// streams are untouched.
func dropFamily(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	if _, err := update(ctx, e, func(tx Txn) error {
		return errors.Join(tx.Put("tmp", []byte("a"), []byte("1")), tx.Put("tmp", []byte("b"), []byte("2")),
			tx.Append(ctx, "kept", eventstore.NoStream, ev("k1", "t")))
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.DropFamily(ctx, "tmp"); err != nil {
		t.Fatal(err)
	}
	if _, err := update(ctx, e, func(tx Txn) error { return tx.Put("tmp", []byte("c"), []byte("3")) }); err != nil {
		t.Fatal(err)
	}
	tx, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Discard()
	for key, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if _, ok, err := tx.Get(ctx, "tmp", []byte(key)); err != nil || ok != want {
			t.Errorf("after the drop, tmp/%s exists %v (%v), want %v", key, ok, err, want)
		}
	}
	if got, err := e.ReadStream(ctx, "kept"); err != nil || len(got) != 1 {
		t.Errorf("stream kept after the drop: %v, %v", got, err)
	}
}

// badInputIsTyped: bad arguments are *pipeline.ArgumentError naming the argument,
// and nothing is written.
func badInputIsTyped(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	tx, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Discard()
	cases := map[string]error{
		"empty key":    tx.Put("f", nil, []byte("v")),
		"empty stream": tx.Append(ctx, "", eventstore.Any, ev("", "t")),
		"no events":    tx.Append(ctx, "s", eventstore.Any),
		"no type":      tx.Append(ctx, "s", eventstore.Any, pipeline.Event{}),
	}
	for name, err := range cases {
		var ae *pipeline.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("%s: %v, want a *pipeline.ArgumentError", name, err)
		}
	}
	if pos, err := tx.Commit(ctx); err != nil || pos != 0 {
		t.Errorf("commit after refused input: %d, %v; want nothing written", pos, err)
	}
}
