package jetstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
)

func ev(stream, id, typ, data string) jetstream.Event {
	return jetstream.Event{Stream: stream, Event: pipeline.Event{ID: id, Type: typ, Data: []byte(data)}}
}

func TestCommitReadRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	pos1, err := p.Commit(ctx, &jetstream.Commit{
		Writes: []jetstream.Write{{Family: "acct", Key: []byte("alice"), Value: []byte("100")}, {Family: "acct", Key: []byte("bob"), Value: []byte("50")}},
		Events: []jetstream.Event{ev("acct-alice", "e1", "Opened", "x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if pos1 != 4 { // 2 writes, 1 event, 1 commit marker
		t.Errorf("first commit at %d, want 4", pos1)
	}
	alice, ok, err := p.Get(ctx, "acct", []byte("alice"), pos1)
	if err != nil || !ok || string(alice.Value) != "100" || alice.Version != 2 {
		t.Fatalf("Get alice at %d = %+v %v %v", pos1, alice, ok, err)
	}
	pos2, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{
		{Family: "acct", Key: []byte("alice"), Value: []byte("70"), Version: alice.Version},
		{Family: "acct", Key: []byte("bob"), Delete: true, Version: 3},
		{Family: "acct", Key: []byte("carol"), Value: []byte("30")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The old snapshot is unchanged; the new one sees the commit.
	for _, c := range []struct {
		at         uint64
		key, value string
		exists     bool
	}{{pos1, "alice", "100", true}, {pos1, "bob", "50", true}, {pos1, "carol", "", false}, {pos2, "alice", "70", true}, {pos2, "bob", "", false}, {pos2, "carol", "30", true}, {0, "alice", "", false}} {
		it, ok, err := p.Get(ctx, "acct", []byte(c.key), c.at)
		if err != nil || ok != c.exists || string(it.Value) != c.value {
			t.Errorf("Get %s at %d = %q %v %v, want %q %v", c.key, c.at, it.Value, ok, err, c.value, c.exists)
		}
	}
	items, err := p.Scan(ctx, "acct", nil, pos2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, string(it.Key)+"="+string(it.Value))
	}
	if strings.Join(got, ",") != "alice=70,carol=30" {
		t.Errorf("Scan at %d = %v", pos2, got)
	}
	items, err = p.Scan(ctx, "acct", []byte("b"), pos1)
	if err != nil || len(items) != 1 || string(items[0].Key) != "bob" {
		t.Errorf("Scan prefix b at %d = %v %v", pos1, items, err)
	}
	if cur, err := p.Position(ctx); err != nil || cur != pos2 {
		t.Errorf("Position = %d %v, want %d", cur, err, pos2)
	}
	// A read inside a commit, or past the latest, is refused at once.
	if _, _, err := p.Get(ctx, "acct", []byte("alice"), pos2-1); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("Get inside a commit: %v, want ErrInvalidArgument", err)
	}
	if _, _, err := p.Get(ctx, "acct", []byte("alice"), pos2+10); !errors.Is(err, jetstream.ErrPositionUnavailable) {
		t.Errorf("Get past the latest position: %v, want ErrPositionUnavailable", err)
	}
	if h, err := p.StreamHead(ctx, "acct-alice", pos2); err != nil || h != 1 {
		t.Errorf("StreamHead = %d %v, want 1", h, err)
	}
}

func TestConflictOnStaleWrite(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	// Expecting the key absent (version 0) is now stale.
	before, _ := p.Position(ctx)
	_, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{
		{Family: "f", Key: []byte("other"), Value: []byte("x")},
		{Family: "f", Key: []byte("k"), Value: []byte("2")},
	}})
	var ce *jetstream.ConflictError
	if !errors.Is(err, jetstream.ErrConflict) || !errors.As(err, &ce) || string(ce.Key) != "k" || ce.Family != "f" || ce.Expected != 0 || ce.Actual != 1 {
		t.Fatalf("stale write: %v, want a conflict naming f/k expected 0 found 1", err)
	}
	// Nothing of the batch was stored: the one message after it is the abort marker
	// that fenced the refusal (see Commit), an empty Aborted entry.
	after, _ := p.Position(ctx)
	if e, err := p.Entry(ctx, after); after != before+1 || err != nil || !e.Aborted || len(e.Writes) != 0 {
		t.Errorf("after a refused commit the log moved from %d to %d holding %+v (%v), want one Aborted entry", before, after, e, err)
	}
	if _, ok, _ := p.Get(ctx, "f", []byte("other"), after); ok {
		t.Error("a refused commit wrote part of its batch")
	}
	// A blind write is not checked.
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("3"), Blind: true}}}); err != nil {
		t.Fatalf("blind write: %v", err)
	}
}

// Write skew: two transactions each read both keys and write one. The second to
// commit must fail on its tracked read.
func TestWriteSkewRefused(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	pos, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "oncall", Key: []byte("a"), Value: []byte("on")}, {Family: "oncall", Key: []byte("b"), Value: []byte("on")}}})
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := p.Get(ctx, "oncall", []byte("a"), pos)
	b, _, _ := p.Get(ctx, "oncall", []byte("b"), pos)
	// T1: reads b, takes a off call.
	if _, err := p.Commit(ctx, &jetstream.Commit{
		Reads:  []jetstream.Read{{Family: "oncall", Key: []byte("b"), Version: b.Version}},
		Writes: []jetstream.Write{{Family: "oncall", Key: []byte("a"), Value: []byte("off"), Version: a.Version}},
	}); err != nil {
		t.Fatal(err)
	}
	// T2, from the same snapshot: reads a, takes b off call.
	_, err = p.Commit(ctx, &jetstream.Commit{
		Reads:  []jetstream.Read{{Family: "oncall", Key: []byte("a"), Version: a.Version}},
		Writes: []jetstream.Write{{Family: "oncall", Key: []byte("b"), Value: []byte("off"), Version: b.Version}},
	})
	var ce *jetstream.ConflictError
	if !errors.As(err, &ce) || ce.Kind != "read" || string(ce.Key) != "a" {
		t.Fatalf("write skew: %v, want a read conflict on a", err)
	}
	// A stream check without events is a read marker too.
	_, err = p.Commit(ctx, &jetstream.Commit{Streams: []jetstream.StreamCheck{{Stream: "s", Version: 7}}})
	if !errors.As(err, &ce) || ce.Kind != "stream" || ce.Stream != "s" {
		t.Fatalf("stale stream check: %v, want a stream conflict on s", err)
	}
}

// Two clients on different servers race with the same expectation: exactly one wins
// each round.
func TestRacingCommitsOneWins(t *testing.T) {
	ctx := ctxT(t)
	p1, cfg := open(t, 3)
	p2 := openOn(t, connect(t, 1), cfg)
	const rounds = 40
	var version, lastPos uint64
	wins := [2]int{}
	for r := range rounds {
		errs := make(chan error, 2)
		positions := make(chan uint64, 2)
		for i, p := range []*jetstream.Partition{p1, p2} {
			go func() {
				pos, err := p.Commit(ctx, &jetstream.Commit{
					Writes: []jetstream.Write{{Family: "c", Key: []byte("hot"), Value: fmt.Appendf(nil, "%d-%d", r, i), Version: version}},
					Events: []jetstream.Event{ev("counter", "", "Bumped", fmt.Sprint(i))},
				})
				if err == nil {
					wins[i]++
					positions <- pos
				}
				errs <- err
			}()
		}
		ok := 0
		for range 2 {
			err := <-errs
			switch {
			case err == nil:
				ok++
			case errors.Is(err, jetstream.ErrConflict):
			default:
				t.Fatalf("round %d: %v", r, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d winners, want 1", r, ok)
		}
		pos := <-positions
		lastPos = pos
		it, _, err := p1.Get(ctx, "c", []byte("hot"), pos)
		if err != nil {
			t.Fatal(err)
		}
		version = it.Version
	}
	t.Logf("%d rounds: wins %v; stats %+v and %+v", rounds, wins, p1.Stats(), p2.Stats())
	// Each commit is event, write, marker, and each refusal left one abort marker:
	// the winners' events are all there is.
	head, err := p1.StreamHead(ctx, "counter", lastPos)
	if err != nil || head != lastPos-2 {
		t.Errorf("stream head %d %v at %d, want %d", head, err, lastPos, lastPos-2)
	}
	events, err := p1.ReadStream(ctx, "counter", 0, 1<<20)
	if err != nil || len(events) != rounds {
		t.Errorf("the stream holds %d events (%v), want the %d winners'", len(events), err, rounds)
	}
}

func TestIdempotentEventRetry(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	c := &jetstream.Commit{
		Writes: []jetstream.Write{{Family: "orders", Key: []byte("o1"), Value: []byte("placed")}},
		Events: []jetstream.Event{ev("order-1", "evt-1", "Placed", "a"), ev("order-1", "evt-2", "Priced", "b")},
	}
	pos, err := p.Commit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// The same commit again (its write expectation now stale, its events stored):
	// the retry is recognised and returns the original position.
	again, err := p.Commit(ctx, c)
	if err != nil || again != pos {
		t.Fatalf("retry: %d %v, want %d nil", again, err, pos)
	}
	if cur, _ := p.Position(ctx); cur != pos {
		t.Errorf("the retry moved the position to %d", cur)
	}
	// Reusing one stored ID in a different commit is refused, naming it.
	_, err = p.Commit(ctx, &jetstream.Commit{Events: []jetstream.Event{ev("order-1", "evt-3", "Shipped", ""), ev("order-1", "evt-2", "Priced", "b")}})
	var de *jetstream.DuplicateEventError
	if !errors.As(err, &de) || de.ID != "evt-2" || de.Position != pos {
		t.Fatalf("partial duplicate: %v, want a DuplicateEventError for evt-2 at %d", err, pos)
	}
}

func TestLimitsAndArguments(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 1)
	var le *jetstream.LimitError
	// Too many messages.
	var ws []jetstream.Write
	for i := range jetstream.MaxBatchMessages {
		ws = append(ws, jetstream.Write{Family: "f", Key: fmt.Appendf(nil, "k%d", i), Blind: true})
	}
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: ws}); !errors.As(err, &le) || le.Limit != "messages per commit" || le.Got != 1001 {
		t.Errorf("1000 writes + marker: %v", err)
	}
	at999, err := p.Commit(ctx, &jetstream.Commit{Writes: ws[:999]})
	if err != nil {
		t.Fatalf("999 writes + marker: %v", err)
	}
	// A family of more keys than one multi-get answer holds (1,024 with the fence)
	// is scanned in windows.
	var ws2 []jetstream.Write
	for i := range 26 {
		ws2 = append(ws2, jetstream.Write{Family: "f", Key: fmt.Appendf(nil, "x%d", i), Blind: true})
	}
	at1025, err := p.Commit(ctx, &jetstream.Commit{Writes: ws2})
	if err != nil {
		t.Fatal(err)
	}
	if items, err := p.Scan(ctx, "f", []byte("x"), at1025); err != nil || len(items) != 26 {
		t.Errorf("prefix scan of a family of 1,025 keys: %d items, %v", len(items), err)
	}
	if items, err := p.Scan(ctx, "f", nil, at1025); err != nil || len(items) != 1025 {
		t.Errorf("scan of 1,025 keys: %d items, %v", len(items), err)
	}
	if items, err := p.Scan(ctx, "f", nil, at999); err != nil || len(items) != 999 {
		t.Errorf("scan of 999 keys: %d items, %v", len(items), err)
	}
	// A key too long for a subject.
	long := bytes.Repeat([]byte("k"), 2000)
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: long}}}); !errors.As(err, &le) || le.Limit != "encoded subject length" || le.Field != "writes[0].Key" {
		t.Errorf("long key: %v", err)
	}
	if _, _, err := p.Get(ctx, "f", long, 1); !errors.As(err, &le) {
		t.Errorf("Get long key: %v", err)
	}
	// The longest key that fits round-trips.
	cfg := p.Config()
	maxKey := (jetstream.MaxSubjectLen - len(cfg.Subject) - len(".k.Zg.")) * 3 / 4
	key := bytes.Repeat([]byte("z"), maxKey)
	pos, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: key, Value: []byte("v")}}})
	if err != nil {
		t.Fatalf("key of %d bytes: %v", maxKey, err)
	}
	if it, ok, err := p.Get(ctx, "f", key, pos); err != nil || !ok || string(it.Value) != "v" {
		t.Errorf("Get key of %d bytes: %v %v", maxKey, ok, err)
	}
	// A value over max_payload.
	big := make([]byte, p.MaxPayload())
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("big"), Value: big}}}); !errors.As(err, &le) || le.Field != "writes[0].Value" || le.Max != p.MaxPayload() {
		t.Errorf("value of max_payload: %v", err)
	}
	if !errors.Is(le, jetstream.ErrInvalidArgument) || !errors.Is(le, jetstream.ErrLimit) {
		t.Error("LimitError does not match ErrLimit and ErrInvalidArgument")
	}
	// Bad arguments.
	for name, c := range map[string]*jetstream.Commit{
		"nil":            nil,
		"same key twice": {Writes: []jetstream.Write{{Family: "f", Key: []byte("a")}, {Family: "f", Key: []byte("a")}}},
		"read and write": {Writes: []jetstream.Write{{Family: "f", Key: []byte("a")}}, Reads: []jetstream.Read{{Family: "f", Key: []byte("a")}}},
		"no event type":  {Events: []jetstream.Event{ev("s", "", "", "")}},
		"id with CR":     {Events: []jetstream.Event{ev("s", "a\rb", "T", "")}},
		"id twice":       {Events: []jetstream.Event{ev("s", "x", "T", ""), ev("s", "x", "T", "")}},
	} {
		if _, err := p.Commit(ctx, c); !errors.Is(err, jetstream.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	// Bad config.
	for _, cfg := range []jetstream.Config{{Stream: "a.b", Subject: "x"}, {Stream: "a", Subject: "x.*"}, {Stream: "a", Subject: "x", Replicas: 2}} {
		if _, err := jetstream.Open(ctx, connect(t, 0), cfg); !errors.Is(err, jetstream.ErrInvalidConfig) {
			t.Errorf("Open(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// Commits on three servers that all read one unchanged key, and write their own: the
// server refuses concurrent checks of one subject as "in flight" (10164), which the
// engine re-reads and retries, so none of them may fail.
func TestSharedReadNoFalseConflicts(t *testing.T) {
	ctx := ctxT(t)
	p0, cfg := open(t, 3)
	limit, err := p0.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "cfg", Key: []byte("limit"), Value: []byte("10")}}})
	if err != nil {
		t.Fatal(err)
	}
	limitVersion := limit - 1
	const writers, perWriter = 3, 60
	var wg sync.WaitGroup
	stats := make([]jetstream.Stats, writers)
	for w := range writers {
		wg.Go(func() {
			p := openOn(t, connect(t, w), cfg)
			key := fmt.Appendf(nil, "w%d", w)
			var version uint64
			for range perWriter {
				pos, err := p.Commit(ctx, &jetstream.Commit{
					Reads:  []jetstream.Read{{Family: "cfg", Key: []byte("limit"), Version: limitVersion}},
					Writes: []jetstream.Write{{Family: "acct", Key: key, Value: []byte("x"), Version: version}},
				})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				version = pos - 2 // write, read marker, commit marker
			}
			stats[w] = p.Stats()
		})
	}
	wg.Wait()
	var inFlight uint64
	for _, s := range stats {
		inFlight += s.InFlight
	}
	t.Logf("%d commits sharing a read: %d in-flight answers retried", writers*perWriter, inFlight)
}
