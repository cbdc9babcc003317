package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/rockline/rockline/pipeline"
)

// StreamTail returns the last event of stream as of the commit position at: its
// sequence (the stream's version, as StreamHead returns) and revision; found is false
// for a stream with no events there.
func (p *Partition) StreamTail(ctx context.Context, stream string, at uint64) (seq, revision uint64, found bool, err error) {
	return p.streamTail(ctx, stream, at, callerPos)
}

// streamTail is StreamTail at a position of the given origin.
func (p *Partition) streamTail(ctx context.Context, stream string, at uint64, origin posOrigin) (seq, revision uint64, found bool, err error) {
	if p.closed.Load() {
		return 0, 0, false, ErrClosed
	}
	if at == 0 {
		return 0, 0, false, nil
	}
	msgs, err := p.snapshot(ctx, "StreamTail", []string{p.subj.stream(stream)}, at, origin)
	if err != nil || len(msgs) == 0 {
		return 0, 0, false, err
	}
	rev, err := strconv.ParseUint(msgs[0].Header.Get(hdrRev), 10, 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("rockline/jetstream: StreamTail %q: %w: revision header %q", stream, pipeline.ErrCorrupt, msgs[0].Header.Get(hdrRev))
	}
	return msgSeq(msgs[0]), rev, true, nil
}

// ReadStream returns up to limit events of stream from revision from on, in order, as
// of the partition's latest position when called, reading the stream's subject with
// an ordered consumer (one pass over that subject's messages; the server skips the
// others). A JetStream API that does not answer for a moment (no responders, while a
// leader is being elected) is retried until Config.ReadTimeout.
func (p *Partition) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]LoggedEvent, error) {
	if limit <= 0 {
		return nil, &ArgumentError{Op: "ReadStream", Arg: "limit", Reason: fmt.Sprintf("%d is not positive", limit)}
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		out, err := p.readStream(rctx, stream, from, limit)
		if !errors.Is(err, nats.ErrNoResponders) {
			return out, err
		}
		if berr := backoff(rctx, attempt); berr != nil {
			return nil, fmt.Errorf("%w (retried until %w)", err, berr)
		}
	}
}

func (p *Partition) readStream(ctx context.Context, stream string, from uint64, limit int) ([]LoggedEvent, error) {
	at, err := p.Position(ctx)
	if err != nil {
		return nil, err
	}
	last, err := p.StreamHead(ctx, stream, at)
	if err != nil || last == 0 {
		return nil, err
	}
	subject := p.subj.stream(stream)
	st, err := p.js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("rockline/jetstream: ReadStream %q: stream: %w", stream, err)
	}
	info, err := st.Info(ctx, natsjs.WithSubjectFilter(subject))
	if err != nil {
		return nil, fmt.Errorf("rockline/jetstream: ReadStream %q: info: %w", stream, err)
	}
	total := int(info.State.Subjects[subject]) // at least the events up to last
	cons, err := st.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, fmt.Errorf("rockline/jetstream: ReadStream %q: consumer: %w", stream, err)
	}
	var out []LoggedEvent
	for got, done := 0, false; !done && got < total; {
		// Ask for no more than the subject holds, so the fetch never waits out its
		// expiry, and drain every batch, so no fetch goroutine outlives the call.
		batch, err := cons.Fetch(min(256, total-got), natsjs.FetchMaxWait(p.cfg.ReadTimeout))
		if err != nil {
			return nil, fmt.Errorf("rockline/jetstream: ReadStream %q: %w", stream, err)
		}
		n := 0
		var bad error
		for m := range batch.Messages() {
			n++
			if done || bad != nil {
				continue
			}
			md, err := m.Metadata()
			if err != nil {
				bad = err
				continue
			}
			if err := p.verify(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data()); err != nil {
				bad = err
				continue
			}
			ev, err := loggedEvent(stream, md.Sequence.Stream, m.Headers(), m.Data())
			if err != nil {
				bad = err
				continue
			}
			if ev.Revision >= from && len(out) < limit {
				out = append(out, ev)
			}
			done = md.Sequence.Stream >= last || len(out) == limit
		}
		if bad != nil {
			return nil, bad
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("rockline/jetstream: ReadStream %q: %w", stream, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: ReadStream %q: nothing past revision %d within %s", ErrPositionUnavailable, stream, len(out), p.cfg.ReadTimeout)
		}
		got += n
	}
	return out, nil
}

// loggedEvent decodes an event message of stream at sequence seq.
func loggedEvent(stream string, seq uint64, h nats.Header, data []byte) (LoggedEvent, error) {
	typ, tags, meta, body, ok := decodeEvent(data)
	if !ok {
		return LoggedEvent{}, fmt.Errorf("rockline/jetstream: sequence %d: %w: event does not decode", seq, pipeline.ErrCorrupt)
	}
	rev, err := strconv.ParseUint(h.Get(hdrRev), 10, 64)
	if err != nil {
		return LoggedEvent{}, fmt.Errorf("rockline/jetstream: sequence %d: %w: revision header %q", seq, pipeline.ErrCorrupt, h.Get(hdrRev))
	}
	ev := LoggedEvent{Stream: stream, Revision: rev, Sequence: seq}
	ev.Type, ev.Tags, ev.Metadata, ev.Data = typ, tags, meta, body
	ev.ID = strings.TrimPrefix(h.Get(hdrMsgID), msgIDEvt)
	return ev, nil
}
