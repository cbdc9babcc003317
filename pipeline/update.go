package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Update runs fn in a fresh transaction and commits it, running it again in a new
// transaction when the commit fails with ErrConflict or ErrTxnTooOld, up to
// Config.MaxAttempts times, sleeping a jittered, doubling backoff (from
// Config.RetryBackoff, capped at 100 times it) between attempts. fn must not keep the
// Txn. An error from fn discards the transaction and is returned as is. When every
// attempt conflicts the last error is returned wrapped (errors.Is(err, ErrConflict)).
// If ctx ends while backing off, ctx.Err() is returned.
func (db *DB) Update(ctx context.Context, fn func(*Txn) error) error {
	_, err := db.UpdatePosition(ctx, fn)
	return err
}

// UpdatePosition is Update that also returns the commit's log position (0 when the
// function wrote nothing and added no events).
func (db *DB) UpdatePosition(ctx context.Context, fn func(*Txn) error) (pos uint64, err error) {
	if fn == nil {
		return 0, &ArgumentError{Op: "Update", Arg: "fn", Reason: "must not be nil"}
	}
	backoff := db.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		txn := db.begin(ctx)
		if err = fn(txn); err != nil {
			txn.Discard()
			return 0, err
		}
		pos, err = txn.CommitPosition(ctx)
		if err == nil || !retryable(err) {
			return pos, err
		}
		if attempt >= db.cfg.MaxAttempts {
			return 0, fmt.Errorf("rockline: update gave up after %d attempts: %w", attempt, err)
		}
		db.metrics.retried(ctx)
		if backoff > 0 {
			d := backoff/2 + rand.N(backoff)
			timer := time.NewTimer(d)
			select {
			case <-ctx.Done():
				timer.Stop()
				return 0, ctx.Err()
			case <-timer.C:
			}
			backoff = min(backoff*2, db.cfg.RetryBackoff*100)
		}
	}
}

func retryable(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrTxnTooOld)
}

// View runs fn in a read-only transaction that is discarded afterwards. Writes fn
// buffers are dropped.
func (db *DB) View(fn func(*Txn) error) error {
	if fn == nil {
		return &ArgumentError{Op: "View", Arg: "fn", Reason: "must not be nil"}
	}
	txn := db.Begin()
	defer txn.Discard()
	return fn(txn)
}
