package eventstore

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/rockline/rockline/pipeline"
)

// A read model's alias names the projection version readers use, so a new version can
// be built beside the one serving and then take its place in one commit (a
// blue/green rebuild):
//
//	'a' alias -> the name of the projection serving it
//
// Readers resolve the alias inside their transaction (Alias, a tracked read), so a
// transaction sees one version throughout; Rebuild swaps it only once the new version
// has caught up, so no reader ever sees a half-built read model.

// ErrAliasMoved is returned (wrapped) by SwapAlias and Rebuild when the alias did not
// name the version expected: another swap came first.
var ErrAliasMoved = errors.New("rockline: read model alias moved")

func aliasKey(alias string) []byte { return append([]byte{'a'}, alias...) }

func checkAlias(op, alias string) error {
	if alias == "" || len(alias) > MaxProjectionNameLen || !utf8.ValidString(alias) || containsNUL(alias) {
		return &pipeline.ArgumentError{Op: op, Arg: "alias", Reason: "must be 1 to 255 bytes of UTF-8 without NUL"}
	}
	return nil
}

// Alias returns the projection name alias names as tx reads it ("" when it names
// none yet). Read in the transaction that reads the read model, it names the version
// that transaction's snapshot holds; the read is tracked, so in an Update a swap that
// commits first makes the transaction conflict. A family of a version swapped out is
// dropped by Rebuild, so looking it up by name after the swap fails with
// pipeline.ErrColumnFamilyNotFound: resolve the alias again in a new transaction.
func (s *Store) Alias(tx *pipeline.Txn, alias string) (string, error) {
	if err := s.checkTxn("Store.Alias", tx); err != nil {
		return "", err
	}
	if err := checkAlias("Store.Alias", alias); err != nil {
		return "", err
	}
	v, err := tx.Get(s.cf, aliasKey(alias))
	if errors.Is(err, pipeline.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

// SwapAlias makes alias name projection to, if it names from now ("" for an alias
// not set yet), in one commit; otherwise it fails with an error matching
// ErrAliasMoved and changes nothing.
func (s *Store) SwapAlias(ctx context.Context, alias, from, to string) error {
	if err := checkAlias("Store.SwapAlias", alias); err != nil {
		return err
	}
	if to == "" {
		return &pipeline.ArgumentError{Op: "Store.SwapAlias", Arg: "to", Reason: "must name a projection"}
	}
	return s.db.Update(ctx, func(tx *pipeline.Txn) error {
		cur, err := s.Alias(tx, alias)
		if err != nil {
			return err
		}
		if cur != from {
			return fmt.Errorf("%w: %q names %q, not %q", ErrAliasMoved, alias, cur, from)
		}
		return tx.Put(s.cf, aliasKey(alias), []byte(to))
	})
}

// Rebuild replaces the version of a read model that alias names with next, without
// downtime: it starts next (its own name and its own families in Owns, built from the
// start of the log while old keeps serving), waits until next has applied every event
// published when it was called (ctx bounds the wait and the steps after it, not next's
// life: next runs until its Close or the database's, as old did), swaps alias from
// old's name to next's in one commit, then closes old and drops old's families (each
// drop waits, as every drop does, for the commits that still use it) and deletes
// old's stored position. It returns next, running. On
// an error before the swap, next is closed and its families are left for the caller;
// old keeps serving. old may be nil for a first build (the alias then must name
// nothing).
func (s *Store) Rebuild(ctx context.Context, alias string, old *Projection, next ProjectionConfig) (*Projection, error) {
	if err := checkAlias("Store.Rebuild", alias); err != nil {
		return nil, err
	}
	from := ""
	if old != nil {
		from = old.cfg.Name
		if next.Name == from {
			return nil, &pipeline.ConfigError{Field: "Name", Value: next.Name, Expected: "a name other than the serving version's"}
		}
	}
	for _, f := range next.Owns {
		if _, err := s.db.EnsureColumnFamily(f); err != nil {
			return nil, err
		}
	}
	p, err := s.StartProjection(context.WithoutCancel(ctx), next)
	if err != nil {
		return nil, err
	}
	if err := p.CaughtUp(ctx, s.db.LastPosition()); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("rockline: rebuild %q: %w", alias, err)
	}
	if err := s.SwapAlias(ctx, alias, from, next.Name); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("rockline: rebuild %q: %w", alias, err)
	}
	if old != nil {
		if err := old.Close(); err != nil && !errors.Is(err, pipeline.ErrClosed) {
			return p, fmt.Errorf("rockline: rebuild %q: swapped; closing %q: %w", alias, from, err)
		}
		for _, f := range old.cfg.Owns {
			if err := s.db.DropColumnFamily(f); err != nil && !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
				return p, fmt.Errorf("rockline: rebuild %q: swapped; dropping %q: %w", alias, f, err)
			}
		}
		if err := s.db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Delete(s.cf, old.key) }); err != nil {
			return p, fmt.Errorf("rockline: rebuild %q: swapped; forgetting %q's position: %w", alias, from, err)
		}
	}
	return p, nil
}
