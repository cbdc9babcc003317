package jetstream

import "context"

// Hooks for the external tests: the timeout resolution, without a real timeout.

// ResolveForTest runs the resolution of a timed-out commit for batch id.
func (p *Partition) ResolveForTest(ctx context.Context, id string) (uint64, error) {
	return p.resolve(ctx, id, context.DeadlineExceeded)
}

// PublishWithIDForTest publishes c as the batch id (no retries, no resolution) and
// returns its position or the server's error.
func (p *Partition) PublishWithIDForTest(ctx context.Context, id string, c *Commit) (uint64, error) {
	msgs, _, err := p.build(c)
	if err != nil {
		return 0, err
	}
	pos, aerr, _, err := p.publishBatch(ctx, id, msgs)
	if aerr != nil {
		return 0, aerr.serverError("Commit")
	}
	return pos, err
}
