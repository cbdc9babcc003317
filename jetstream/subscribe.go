package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rockline/rockline/pipeline"
)

// Entry is one commit as a subscription delivers it: its Position (the sequence of
// its commit marker), the time the server stored the marker, its writes and events in
// the commit's order. Reads and stream checks leave no trace. An Aborted entry is an
// abort marker that fenced out a timed-out commit: it has no writes or events but
// takes a position like any commit.
type Entry struct {
	Position uint64
	Time     time.Time
	Writes   []LoggedWrite
	Events   []LoggedEvent
	Aborted  bool
	// Families lists the catalog changes of the commit (CreateFamily, DropFamily).
	Families []FamilyChange
}

// LoggedWrite is a write of a committed Entry; Version is its own sequence, the
// key's version from then on.
//
// Generation is the family's generation written (1 unless re-created). For a
// positioned write, Value is the encoding's value and AtCommit the commit's position.
type LoggedWrite struct {
	Family     string
	Key        []byte
	Value      []byte
	Delete     bool
	Version    uint64
	Generation uint64
	AtCommit   uint64
}

// LoggedEvent is an event of a committed Entry; Sequence is its own stream sequence,
// the stream's version from then on.
type LoggedEvent struct {
	Stream   string
	Revision uint64
	Sequence uint64
	pipeline.Event
}

// Subscription delivers a partition's commits, in order and each once, to a handler
// running on a goroutine the Subscription owns. It reads with a JetStream ordered
// consumer (which recreates itself after a gap, resuming after the last sequence it
// delivered) and regroups each commit's messages, which are consecutive in the stream,
// into one Entry at its commit marker. The goroutine ends when the context is
// cancelled, Close is called, the partition closes, the handler returns an error or
// reading fails; Wait reports why.
type Subscription struct {
	p      *Partition
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	pos    atomic.Uint64
}

// Subscribe delivers every commit with a position above after to handler, in order,
// each exactly once. after must be 0 or a commit position of this partition (one
// Commit, Position or an Entry returned); a position below the truncation point fails
// with a *TruncatedError. After a family purge, commits made only of that family's
// writes are gone and positions skip them.
func (p *Partition) Subscribe(ctx context.Context, after uint64, handler func(Entry) error) (*Subscription, error) {
	if handler == nil {
		return nil, &ArgumentError{Op: "Subscribe", Arg: "handler", Reason: "must not be nil"}
	}
	if t := p.truncated.Load(); after < t {
		return nil, &TruncatedError{Position: after, First: t}
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &Subscription{p: p, cancel: cancel, done: make(chan struct{})}
	s.pos.Store(after)
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	p.subs[s] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	cons, err := p.orderedConsumer(sctx, after)
	var it natsjs.MessagesContext
	if err == nil {
		it, err = cons.Messages()
	}
	if err != nil {
		s.end(fmt.Errorf("rockline/jetstream: Subscribe: %w", err))
		return nil, s.err
	}
	go func() {
		defer it.Stop()
		s.end(s.run(sctx, it, handler))
	}()
	return s, nil
}

// orderedConsumer creates the subscription's ordered consumer from after+1. While the
// cluster is electing a leader (right after a failover or a healed partition) the API
// answers "JetStream system temporarily unavailable" (10008) or nobody answers; both
// are waited out, backing off, up to Config.ReadTimeout, as reads are.
func (p *Partition) orderedConsumer(ctx context.Context, after uint64) (natsjs.Consumer, error) {
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		cons, err := p.js.OrderedConsumer(ctx, p.cfg.Stream, natsjs.OrderedConsumerConfig{
			DeliverPolicy: natsjs.DeliverByStartSequencePolicy,
			OptStartSeq:   after + 1,
		})
		var apiErr *natsjs.APIError
		transient := errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrNoStreamResponse) ||
			(errors.As(err, &apiErr) && apiErr.ErrorCode == codeJetStreamUnavailable) || isTimeout(err)
		if err == nil || !transient {
			return cons, err
		}
		if berr := backoff(rctx, attempt); berr != nil {
			return nil, err
		}
	}
}

// codeJetStreamUnavailable is the API's "JetStream system temporarily unavailable".
const codeJetStreamUnavailable = 10008

func (s *Subscription) end(err error) {
	s.cancel()
	s.err = err
	s.p.mu.Lock()
	delete(s.p.subs, s)
	s.p.mu.Unlock()
	close(s.done)
	s.p.wg.Done()
}

func (s *Subscription) run(ctx context.Context, it natsjs.MessagesContext, handler func(Entry) error) error {
	p := s.p
	var e Entry
	var batch string
	last := s.pos.Load()
	for {
		m, err := it.Next(natsjs.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				if p.closed.Load() {
					return ErrClosed
				}
				return nil
			}
			return fmt.Errorf("rockline/jetstream: subscription after %d: %w", last, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("rockline/jetstream: subscription after %d: %w", last, err)
		}
		seq := md.Sequence.Stream
		if seq <= last {
			return fmt.Errorf("rockline/jetstream: subscription: sequence %d repeats or goes back (last %d)", seq, last)
		}
		var done bool
		if e, batch, done, err = p.appendMsg(e, batch, seq, md.Timestamp, m.Subject(), m.Headers(), m.Data()); err != nil {
			return fmt.Errorf("rockline/jetstream: subscription: %w", err)
		}
		last = seq
		if !done {
			continue
		}
		if err := handler(e); err != nil {
			return err
		}
		s.pos.Store(e.Position)
		e, batch = Entry{}, ""
	}
}

// appendMsg adds the stored message (seq, ts, subject, h, data) to the commit entry e
// being assembled from the batch ID batch ("" before its first message), and reports
// whether e is complete (the message was its commit marker, or an abort marker).
func (p *Partition) appendMsg(e Entry, batch string, seq uint64, ts time.Time, subject string, h nats.Header, data []byte) (Entry, string, bool, error) {
	kind, a, b, gen, ok := p.subj.parseGen(subject)
	if !ok {
		return e, batch, false, fmt.Errorf("sequence %d: subject %q is not the engine's", seq, subject)
	}
	if err := p.verify(seq, subject, h, data); err != nil {
		return e, batch, false, err
	}
	id := h.Get(hdrBID)
	if kind == tokCommit && id == "" && h.Get(hdrAbort) != "" && batch == "" {
		return Entry{Position: seq, Time: ts, Aborted: true}, batch, true, nil
	}
	switch {
	case id == "":
		return e, batch, false, fmt.Errorf("sequence %d (%s) belongs to no commit", seq, subject)
	case batch == "":
		batch = id
	case id != batch:
		return e, batch, false, fmt.Errorf("sequence %d of batch %s inside batch %s, whose commit marker is missing", seq, id, batch)
	}
	switch kind {
	case tokKey:
		w := LoggedWrite{Family: string(a), Key: b, Delete: h.Get(hdrOp) == opDelete, Version: seq, Generation: gen}
		if !w.Delete {
			var err error
			if w.Value, w.AtCommit, err = p.value(subject, seq, h, data); err != nil {
				return e, batch, false, err
			}
		}
		e.Writes = append(e.Writes, w)
	case tokEvent:
		ev, err := loggedEvent(string(a), seq, h, data)
		if err != nil {
			return e, batch, false, err
		}
		e.Events = append(e.Events, ev)
	case tokFamily:
		r, err := decodeFamilyRecord(string(a), data)
		if err != nil {
			return e, batch, false, err
		}
		if gen == 0 { // one change per family: its copy 0
			e.Families = append(e.Families, FamilyChange{Family: string(a), Generation: r.Generation, Dropped: r.Dropped})
		}
	case tokMarker:
	case tokCommit:
		e.Position, e.Time = seq, ts
		return e, batch, true, nil
	default:
		return e, batch, false, fmt.Errorf("sequence %d: unexpected subject %q", seq, subject)
	}
	return e, batch, false, nil
}

// Position returns the position of the last entry the handler returned from (after,
// before the first).
func (s *Subscription) Position() uint64 { return s.pos.Load() }

// Done is closed when the subscription has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Wait blocks until the subscription ends and returns why: nil after its context was
// cancelled or Close, ErrClosed when the partition closed, the handler's error, or a
// read error.
func (s *Subscription) Wait() error {
	<-s.done
	return s.err
}

// Close ends the subscription and waits for its goroutine (a handler call in
// progress finishes first).
func (s *Subscription) Close() error {
	s.cancel()
	err := s.Wait()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
