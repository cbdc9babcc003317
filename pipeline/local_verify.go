package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// VerifyOptions say how far Verify goes and how it reports progress.
type VerifyOptions struct {
	// ScratchDir is the folder the state check rebuilds the database into (it must
	// not exist; Verify removes it afterwards). Empty skips the state check.
	ScratchDir string
	// Progress, when set, is called from Verify's goroutine as work advances, with the
	// stage ("log", "replay" or "compare"), the units done and the stage's total
	// (log entries for "log" and "replay", families for "compare").
	Progress func(stage string, done, total uint64)
	// MaxProblems bounds how many problems the report lists (the counts are exact);
	// 0 means 20.
	MaxProblems int
}

// VerifyReport is what Verify found. Problems lists, in the order found, what is
// wrong; an empty list means the database passed every check that ran.
type VerifyReport struct {
	FirstPosition, LastPosition uint64 // the log's bounds as verified
	Entries                     uint64 // log entries read and decoded with a valid checksum
	CorruptEntries              uint64 // entries that failed to decode or were missing
	StateChecked                bool   // the state was compared with a replay of the log
	StateSkipped                string // why not, when it was not
	Families                    int    // families compared (reserved ones included)
	KeysCompared                uint64 // keys compared between the database and the replay
	StateDifferences            uint64 // keys (or families) that differ
	Problems                    []string
}

// OK reports whether every check that ran passed.
func (r *VerifyReport) OK() bool { return r.CorruptEntries == 0 && r.StateDifferences == 0 }

func (r *VerifyReport) problem(limit int, format string, a ...any) {
	if len(r.Problems) < limit {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// Verify is DB.Verify on the local engine.
func (db *localDB) Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	const op = "Verify"
	if !db.ReadOnly() {
		return VerifyReport{}, &ArgumentError{Op: op, Arg: "db", Reason: "must be a read-only or secondary open: checkpoint a live database and verify the copy"}
	}
	if opts.MaxProblems < 0 {
		return VerifyReport{}, &ArgumentError{Op: op, Arg: "MaxProblems", Reason: fmt.Sprintf("%d is negative", opts.MaxProblems)}
	}
	if opts.ScratchDir != "" {
		if _, err := os.Stat(opts.ScratchDir); err == nil {
			return VerifyReport{}, &ArgumentError{Op: op, Arg: "ScratchDir", Reason: fmt.Sprintf("%s exists; expected a folder that does not exist yet", opts.ScratchDir)}
		}
	}
	limit := opts.MaxProblems
	if limit == 0 {
		limit = 20
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, uint64, uint64) {}
	}
	r := VerifyReport{FirstPosition: db.FirstPosition(), LastPosition: db.seq.Published()}
	if err := db.verifyLog(ctx, &r, limit, progress); err != nil {
		return r, err
	}
	switch {
	case opts.ScratchDir == "":
		r.StateSkipped = "no scratch folder given"
	case r.FirstPosition > 1:
		r.StateSkipped = fmt.Sprintf("the log was truncated below %d; a replay needs it whole", r.FirstPosition)
	case r.CorruptEntries > 0:
		r.StateSkipped = "the log has corrupt entries; a replay would stop at the first"
	default:
		if err := db.verifyState(ctx, &r, opts.ScratchDir, limit, progress); err != nil {
			return r, err
		}
	}
	return r, nil
}

// verifyLog reads every entry of the log's range, resuming after a corrupt one.
func (db *localDB) verifyLog(ctx context.Context, r *VerifyReport, limit int, progress func(string, uint64, uint64)) error {
	total := r.LastPosition - min(r.LastPosition, r.FirstPosition-1)
	for pos := r.FirstPosition; pos <= r.LastPosition; {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := db.ReadLog(ctx, pos, 1024)
		for _, e := range page {
			if e.Position != pos {
				r.CorruptEntries++
				r.problem(limit, "log position %d: an entry for position %d is stored there", pos, e.Position)
			} else {
				r.Entries++
			}
			pos++
		}
		var ce *logentry.CorruptEntryError
		switch {
		case errors.As(err, &ce):
			r.CorruptEntries++
			r.problem(limit, "%v", ce)
			pos = max(pos, ce.Position) + 1
		case err != nil:
			return err
		case len(page) == 0:
			r.CorruptEntries += r.LastPosition - pos + 1
			r.problem(limit, "log ends at %d, below its last position %d", pos-1, r.LastPosition)
			pos = r.LastPosition + 1
		}
		progress("log", pos-r.FirstPosition, total)
	}
	return nil
}

// verifyState rebuilds the database into dir and compares both, family by family.
func (db *localDB) verifyState(ctx context.Context, r *VerifyReport, dir string, limit int, progress func(string, uint64, uint64)) (err error) {
	dst, err := db.rebuild(ctx, dir, Config{DisableWAL: true, Lanes: 1}, r.LastPosition, func(done uint64) { progress("replay", done, r.LastPosition) })
	if err != nil {
		return fmt.Errorf("verify: replay: %w", err)
	}
	defer func() {
		err = errors.Join(err, dst.Close(), os.RemoveAll(dir))
	}()
	r.StateChecked = true
	have, err := db.store.Families()
	if err != nil {
		return closedErr(err)
	}
	want, err := dst.store.Families()
	if err != nil {
		return closedErr(err)
	}
	names := map[string]bool{}
	for _, n := range append(have, want...) {
		if n != systemFamily {
			names[n] = true
		}
	}
	done := uint64(0)
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.Families++
		a, aerr := db.store.Family(n)
		b, berr := dst.store.Family(n)
		switch {
		case aerr != nil && berr != nil:
			return errors.Join(aerr, berr)
		case aerr != nil:
			r.StateDifferences++
			r.problem(limit, "family %s: in the replay of the log, not in the database", n)
		case berr != nil:
			r.StateDifferences++
			r.problem(limit, "family %s: in the database, not in the replay of the log", n)
		case a.Generation() != b.Generation():
			r.StateDifferences++
			r.problem(limit, "family %s: generation %d, the replay's %d", n, a.Generation(), b.Generation())
		default:
			if err := compareFamily(db, dst, a, b, r, limit); err != nil {
				return err
			}
		}
		done++
		progress("compare", done, uint64(len(names)))
	}
	return nil
}

// compareFamily walks a in db and b in dst side by side in key order.
func compareFamily(db, dst *localDB, a, b *storage.Family, r *VerifyReport, limit int) error {
	ta, err := db.begin()
	if err != nil {
		return err
	}
	defer ta.Discard()
	tb, err := dst.begin()
	if err != nil {
		return err
	}
	defer tb.Discard()
	// The log family's DenseKey is the validator's bookkeeping, not state.
	var opts IterOptions
	if a.Name() == logFamily {
		opts.Lower = logentry.Key(0)
	}
	ia, err := ta.NewIterator(context.Background(), a, opts)
	if err != nil {
		return err
	}
	defer ia.Close()
	ib, err := tb.NewIterator(context.Background(), b, opts)
	if err != nil {
		return err
	}
	defer ib.Close()
	ia.First()
	ib.First()
	for ia.Valid() || ib.Valid() {
		r.KeysCompared++
		c := 0
		switch {
		case !ia.Valid():
			c = 1
		case !ib.Valid():
			c = -1
		default:
			c = bytes.Compare(ia.Key(), ib.Key())
		}
		switch {
		case c < 0:
			r.StateDifferences++
			r.problem(limit, "family %s key %q: in the database, not in the replay of the log", a.Name(), ia.Key())
			ia.Next()
		case c > 0:
			r.StateDifferences++
			r.problem(limit, "family %s key %q: in the replay of the log, not in the database", a.Name(), ib.Key())
			ib.Next()
		default:
			if !bytes.Equal(ia.Value(), ib.Value()) {
				r.StateDifferences++
				r.problem(limit, "family %s key %q: value differs from the replay of the log (%d bytes, replay %d)", a.Name(), ia.Key(), len(ia.Value()), len(ib.Value()))
			}
			ia.Next()
			ib.Next()
		}
	}
	return errors.Join(ia.Err(), ib.Err())
}
