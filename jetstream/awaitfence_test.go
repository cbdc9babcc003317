package jetstream_test

import (
	"errors"
	"testing"

	"github.com/rockline/rockline/jetstream"
)

// TestAwaitFenceAsksLeader: a read whose replica is behind its position asks the
// stream leader about the position on its first wait when a caller passed the
// position, so a position above the latest, or inside a commit, fails at once; at a
// position the leader reported (a Txn's) it only waits, and asks on wait
// LeaderCheckAttempt. A position that is not there makes the asking visible: asked,
// the leader refuses it.
func TestAwaitFenceAsksLeader(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	pos, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v")}}})
	if err != nil {
		t.Fatal(err)
	}
	missing := pos + 1000
	if err := p.AwaitFenceForTest(ctx, missing, pos, 0, false); !errors.Is(err, jetstream.ErrPositionUnavailable) {
		t.Errorf("a caller's position above the latest, first wait: %v; want ErrPositionUnavailable", err)
	}
	if err := p.AwaitFenceForTest(ctx, pos-1, pos-2, 0, false); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("a caller's position inside a commit, first wait: %v; want ErrInvalidArgument", err)
	}
	if err := p.AwaitFenceForTest(ctx, missing, pos, 1, false); err != nil {
		t.Errorf("a caller's position, second wait: %v; want none (asked once)", err)
	}
	for attempt := range jetstream.LeaderCheckAttempt {
		if err := p.AwaitFenceForTest(ctx, missing, pos, attempt, true); err != nil {
			t.Errorf("a leader's position, wait %d: %v; want none (not asked)", attempt, err)
		}
	}
	if err := p.AwaitFenceForTest(ctx, missing, pos, jetstream.LeaderCheckAttempt, true); !errors.Is(err, jetstream.ErrPositionUnavailable) {
		t.Errorf("a leader's position, wait %d: %v; want ErrPositionUnavailable (asked)", jetstream.LeaderCheckAttempt, err)
	}
}

// TestTxnReadsAtLeaderPosition: a Txn's reads are at a position the leader reported,
// so a replica that lacks it is waited for before the leader is asked, where a
// caller's read at the same position asks at once. The position is made to go away
// under the Txn (another client truncates past it; one replica, so the purge is
// applied when Truncate returns), which leaves the replica without it for good:
// the waits before the leader's refusal tell the two apart.
func TestTxnReadsAtLeaderPosition(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := open(t, 1)
	write := func(p *jetstream.Partition, key string) uint64 {
		t.Helper()
		pos, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte(key), Value: []byte("v")}}})
		if err != nil {
			t.Fatal(err)
		}
		return pos
	}
	write(p, "k")
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := openOn(t, connect(t, 1), cfg)
	if err := other.Truncate(ctx, write(other, "j")); err != nil {
		t.Fatal(err)
	}
	waits := func(read func() error) uint64 {
		t.Helper()
		before := p.Stats().FenceWaits
		if err := read(); !errors.Is(err, jetstream.ErrInvalidArgument) {
			t.Errorf("a read at position %d, truncated away: %v; want the leader's refusal (ErrInvalidArgument)", tx.Position(), err)
		}
		return p.Stats().FenceWaits - before
	}
	if n := waits(func() error { _, _, err := tx.Get(ctx, "f", []byte("k")); return err }); n != jetstream.LeaderCheckAttempt {
		t.Errorf("Txn.Get waited %d times before asking the leader; want %d", n, jetstream.LeaderCheckAttempt)
	}
	if n := waits(func() error { _, _, err := p.Get(ctx, "f", []byte("k"), tx.Position()); return err }); n != 0 {
		t.Errorf("Get at a caller's position waited %d times before asking the leader; want 0", n)
	}
}
