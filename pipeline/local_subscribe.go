package pipeline

import (
	"context"
	"errors"
)

// localSub is a subscription of the local engine: a goroutine that reads the log
// from after and then follows the sequencer's publications.
//
// Invariants:
//   - done is closed once, by the goroutine, after err is set; Wait reads err after
//     done, so err needs no lock.
type localSub struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (s *localSub) Done() <-chan struct{} { return s.done }

func (s *localSub) Wait() error {
	<-s.done
	return s.err
}

func (s *localSub) Close() error {
	s.cancel()
	return s.Wait()
}

// subscribePage is how many entries a subscription catching up reads at once.
const subscribePage = 256

// Subscribe is Engine.Subscribe: a goroutine, owned by the returned subscription,
// that reads the log from after and then follows publications until ctx ends, the
// engine closes or handler fails.
func (db *localDB) Subscribe(ctx context.Context, after uint64, handler func(LogEntry) error, o SubscribeOptions) (EngineSubscription, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &localSub{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cancel()
		s.err = db.follow(ctx, after, handler, o)
	}()
	return s, nil
}

// follow is the subscription's loop; pos is the last position handled.
func (db *localDB) follow(ctx context.Context, pos uint64, handler func(LogEntry) error, o SubscribeOptions) error {
	live := false
	setLive := func(v bool) {
		if live != v {
			live = v
			if o.OnLive != nil {
				o.OnLive(v)
			}
		}
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		changed := db.seq.Changed() // before reading Published, so no publication is missed
		last := db.seq.Published()
		if pos < last {
			if live && last-pos > o.LagBound {
				setLive(false)
			}
			// Entries read before an error (a corrupt entry) are delivered first.
			entries, err := db.ReadLog(ctx, pos+1, int(min(subscribePage, last-pos)))
			for _, e := range entries {
				if ctx.Err() != nil {
					return nil
				}
				if err := handler(e); err != nil {
					return err
				}
				pos = e.Position
			}
			if err != nil {
				if errors.Is(err, ErrClosed) || db.closing.Load() {
					return ErrClosed
				}
				return err
			}
			continue
		}
		if err := db.seq.Err(); err != nil {
			return err
		}
		setLive(true)
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		case <-db.done:
			return ErrClosed
		}
	}
}
