package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Subscription delivers published log entries, in order and without gaps, to a
// handler running on a goroutine the Subscription owns. It first catches up by
// reading the log, then follows commits as they are published. Writers never wait for
// a subscriber: one that falls behind simply reads the log again until it has caught
// up. The goroutine ends when the context is cancelled, the handler returns an error,
// Close is called, or the database closes; Wait reports why.
type Subscription struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	pos    atomic.Uint64
}

// SubscribeOption configures Subscribe.
type SubscribeOption func(*SubscribeOptions)

// SubscribeOptions are Subscribe's options as an engine receives them.
type SubscribeOptions struct {
	// OnLive, when set, is called on the subscription's goroutine with true when the
	// subscription has caught up and with false when it fell more than LagBound
	// behind.
	OnLive func(live bool)
	// LagBound is how many positions behind a live subscription may fall before
	// OnLive(false) (at least 1).
	LagBound uint64
}

// OnLive registers fn, called on the subscription's goroutine with true when the
// subscription has caught up with the published log (entries now arrive as they are
// published) and with false when it has fallen more than the lag bound behind (see
// WithLagBound) and is catching up from the log again.
func OnLive(fn func(live bool)) SubscribeOption { return func(o *SubscribeOptions) { o.OnLive = fn } }

// WithLagBound sets how many positions behind a live subscription may fall before
// OnLive(false) is reported (default 1024).
func WithLagBound(n uint64) SubscribeOption {
	return func(o *SubscribeOptions) { o.LagBound = max(n, 1) }
}

// Subscribe delivers every published entry with a position above after, in order,
// each exactly once, to handler. Storing the last position handled and passing it as
// after when subscribing again gives at-least-once delivery across restarts. An error
// from handler ends the subscription with that error; the entry counts as not handled
// (Position stays below it) unless the error is marked with Handled. Subscribe fails
// only on a closed database or a nil handler.
func (db *DB) Subscribe(ctx context.Context, after uint64, handler func(LogEntry) error, opts ...SubscribeOption) (*Subscription, error) {
	if handler == nil {
		return nil, &ArgumentError{Op: "Subscribe", Arg: "handler", Reason: "must not be nil"}
	}
	o := SubscribeOptions{LagBound: 1024}
	for _, opt := range opts {
		opt(&o)
	}
	s, ctx, err := db.addSubscription(ctx, after)
	if err != nil {
		return nil, err
	}
	es, err := db.eng.Subscribe(ctx, after, func(e LogEntry) error {
		handled, err := s.deliver(handler, e)
		if handled {
			db.saw(e.Position)
		}
		return err
	}, o)
	if err != nil {
		db.removeSubscription(s)
		return nil, err
	}
	go func() { // owned by s: ends with the engine's subscription
		defer db.removeSubscription(s)
		defer close(s.done)
		select {
		case <-es.Done():
		case <-db.done:
			es.Close()
			s.err = ErrClosed
			return
		}
		s.err = es.Wait()
		if s.err != nil && db.closing.Load() {
			s.err = ErrClosed
		}
	}()
	return s, nil
}

// addSubscription registers a Subscription at after, with the context its goroutine
// runs under, or fails with ErrClosed once Close began. Its goroutine ends with
// removeSubscription.
func (db *DB) addSubscription(ctx context.Context, after uint64) (*Subscription, context.Context, error) {
	db.subsMu.Lock()
	defer db.subsMu.Unlock()
	if db.closing.Load() {
		return nil, nil, ErrClosed
	}
	db.subs.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{cancel: cancel, done: make(chan struct{})}
	s.pos.Store(after)
	if db.active == nil {
		db.active = make(map[*Subscription]struct{})
	}
	db.active[s] = struct{}{}
	return s, ctx, nil
}

// removeSubscription undoes addSubscription: the last thing s's goroutine does.
func (db *DB) removeSubscription(s *Subscription) {
	s.cancel()
	db.subsMu.Lock()
	delete(db.active, s)
	db.subsMu.Unlock()
	db.subs.Done()
}

// Position returns the position of the last entry handled: the handler returned nil
// for it, or an error marked with Handled. Subscribing again after it delivers the
// next entry, and a handler error without the mark delivers its entry again.
func (s *Subscription) Position() uint64 { return s.pos.Load() }

// Handled marks err, returned by a Subscribe handler, as coming after the entry was
// handled whole (a failure to store a checkpoint once the entry's work is done): the
// subscription ends with err, as with any handler error, but the entry counts as
// handled, so Position includes it and subscribing again after Position does not
// deliver it a second time. Wait returns err itself. Handled(nil) is nil.
func Handled(err error) error {
	if err == nil {
		return nil
	}
	return &handledError{err: err}
}

// handledError is Handled's mark.
type handledError struct{ err error }

func (h *handledError) Error() string { return h.err.Error() }
func (h *handledError) Unwrap() error { return h.err }

// deliver hands e to handler and advances the position when the handler handled it
// (nil, or an error marked with Handled). It returns whether it did and the error that
// ends the subscription, with a top-level Handled mark taken off.
func (s *Subscription) deliver(handler func(LogEntry) error, e LogEntry) (handled bool, err error) {
	err = handler(e)
	var h *handledError
	if err != nil && !errors.As(err, &h) {
		return false, err
	}
	s.pos.Store(e.Position)
	if h != nil && err == error(h) {
		err = h.err
	}
	return true, err
}

// Done is closed when the subscription has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Wait blocks until the subscription ends and returns why: nil after its context was
// cancelled or Close, the handler's error, ErrClosed when the database closed, or a
// read error.
func (s *Subscription) Wait() error {
	<-s.done
	return s.err
}

// Close ends the subscription and waits for its goroutine to return (the handler call
// in progress, if any, finishes first).
func (s *Subscription) Close() error {
	s.cancel()
	return s.Wait()
}

// subscriptions is embedded in DB: Close signals done and waits for every subscription
// goroutine before freeing storage.
type subscriptions struct {
	subsMu sync.Mutex
	active map[*Subscription]struct{} // running subscriptions, for the lag gauge; under subsMu
	subs   sync.WaitGroup
	done   chan struct{}
}

// subscriptionLag returns how many running subscriptions there are and the largest
// number of published positions one of them has not handled yet.
func (db *DB) subscriptionLag() (n int, lag uint64) {
	published := db.last.Load()
	db.subsMu.Lock()
	defer db.subsMu.Unlock()
	for s := range db.active {
		if p := s.pos.Load(); published > p {
			lag = max(lag, published-p)
		}
	}
	return len(db.active), lag
}
