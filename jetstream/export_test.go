package jetstream

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// Hooks for the external tests: the timeout resolution, without a real timeout.

// ResolveForTest runs the resolution of a timed-out commit for batch id.
func (p *Partition) ResolveForTest(ctx context.Context, id string) (uint64, error) {
	return p.resolve(ctx, batch{id: id, sent: time.Now()}, context.DeadlineExceeded)
}

// LandedBelowForTest runs the search for batch id's commit marker below an abort
// marker at abort, for a batch first sent at sent, of a commit known to land above
// after (0: unknown).
func (p *Partition) LandedBelowForTest(ctx context.Context, id string, abort uint64, sent time.Time, after uint64) (uint64, bool, error) {
	return p.landedBelow(ctx, batch{id: id, sent: sent, after: after}, abort)
}

// LeaderCheckAttempt is the wait at which a read at a position the leader reported
// asks the leader about it.
const LeaderCheckAttempt = leaderCheckAttempt

// AwaitFenceForTest runs a snapshot read's attempt-th wait (0-based) for a replica
// that has applied up to fence, for a position at the caller passed (leader false) or
// one the stream leader reported (leader true, as a Txn's).
func (p *Partition) AwaitFenceForTest(ctx context.Context, at, fence uint64, attempt int, leader bool) error {
	origin := callerPos
	if leader {
		origin = leaderPos
	}
	return p.awaitFence(ctx, "Get", at, fence, attempt, origin)
}

// PublishWithIDForTest publishes c as the batch id (no resolution; sent again only
// while no stream leader answers, which stores nothing) and
// returns its position or the server's error.
func (p *Partition) PublishWithIDForTest(ctx context.Context, id string, c *Commit) (uint64, error) {
	msgs, _, err := p.build(c)
	if err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		pos, aerr, _, err := p.publishBatch(ctx, id, msgs)
		if aerr != nil {
			return 0, aerr.serverError("Commit")
		}
		// No responders: nothing received the batch (a stream just created, its
		// leader not elected yet), so sending it again is the same as the first time.
		if !errors.Is(err, nats.ErrNoResponders) {
			return pos, err
		}
		if berr := backoff(ctx, attempt); berr != nil {
			return 0, err
		}
	}
}

// PublishCorruptedForTest publishes c as one batch after corrupt has changed its
// built messages (checksums already set), as a replica's damaged files would serve
// them, and returns its position.
func (p *Partition) PublishCorruptedForTest(ctx context.Context, c *Commit, corrupt func(msgs []*nats.Msg)) (uint64, error) {
	msgs, _, err := p.build(c)
	if err != nil {
		return 0, err
	}
	corrupt(msgs)
	pos, aerr, _, err := p.publishBatch(ctx, newBatch(0).id, msgs)
	if aerr != nil {
		return 0, aerr.serverError("Commit")
	}
	return pos, err
}
