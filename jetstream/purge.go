package jetstream

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Truncate drops the log up to the commit position upTo: the events, read markers
// and commit markers of every commit at or below it (upTo's own marker stays, as the
// fence of reads at upTo). Keys keep their whole history, because a key's last
// version is its value and may be arbitrarily old. Afterwards reads at positions below
// upTo and subscriptions after them fail with a *TruncatedError. The truncation point
// is recorded in the stream's metadata before anything is purged, so a crash between
// the steps leaves the point set and a repeated Truncate finishes the purge.
//
// An event stream's version is its last event's sequence; once that event is
// truncated, StreamHead reports 0, so an event store on this engine must keep stream
// heads as keys before truncating. Truncate never lowers the truncation point.
func (p *Partition) Truncate(ctx context.Context, upTo uint64) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if upTo <= p.truncated.Load() {
		return nil
	}
	pos, err := p.Position(ctx)
	if err != nil {
		return err
	}
	if upTo > pos {
		return &ArgumentError{Op: "Truncate", Arg: "upTo", Reason: fmt.Sprintf("%d is above the latest position %d", upTo, pos)}
	}
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		return fmt.Errorf("rockline/jetstream: Truncate: %w", err)
	}
	sc := s.CachedInfo().Config
	sc.Metadata = maps.Clone(sc.Metadata)
	if sc.Metadata == nil {
		sc.Metadata = map[string]string{}
	}
	sc.Metadata[metaTruncated] = strconv.FormatUint(upTo, 10)
	if _, err := p.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("rockline/jetstream: Truncate: recording the truncation point: %w", err)
	}
	p.truncated.Store(upTo)
	for _, pr := range []struct {
		subject string
		below   uint64
	}{
		{p.subj.prefix + tokEvent + ".*", upTo + 1},
		{p.subj.marker(), upTo + 1},
		{p.subj.commit(), upTo},
	} {
		if err := s.Purge(ctx, natsjs.WithPurgeSubject(pr.subject), natsjs.WithPurgeSequence(pr.below)); err != nil {
			return fmt.Errorf("rockline/jetstream: Truncate: purging %s below %d: %w", pr.subject, pr.below, err)
		}
	}
	return nil
}

// PurgeFamily removes every version of every key of family, at every position: reads
// then find the family empty and subscriptions deliver commits without its writes
// (commits made only of them are gone). It is the physical half of a family drop,
// meant for a family no commit uses any more; the engine seam keeps that promise with
// generations, as the local engine does.
func (p *Partition) PurgeFamily(ctx context.Context, family string) error {
	if p.closed.Load() {
		return ErrClosed
	}
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		return fmt.Errorf("rockline/jetstream: PurgeFamily: %w", err)
	}
	if err := s.Purge(ctx, natsjs.WithPurgeSubject(p.subj.family(family))); err != nil {
		return fmt.Errorf("rockline/jetstream: PurgeFamily %q: %w", family, err)
	}
	return nil
}
