package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/pipeline"
)

// compactCmd compacts one family, a key range of it, or every family.
func compactCmd(o *options) *cobra.Command {
	var start, end string
	cmd := &cobra.Command{
		Use:   "compact [FAMILY]",
		Short: "Compact a family (or a key range of it, or every family) down to its live data",
		Long: `compact rewrites a family's table files down to the bottommost level, dropping deleted
and overwritten data and tombstones, so its space on disk shrinks to its live data (see
"rockline info"). Without FAMILY every family is compacted, rockline's own included.
It needs the database to itself: a folder another process holds is refused.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 0 && (start != "" || end != "") {
				return usageError{fmt.Errorf("--start and --end need a FAMILY")}
			}
			if start != "" && end != "" && start > end {
				return usageError{fmt.Errorf("--start %q is after --end %q", start, end)}
			}
			if len(a) == 1 { // check the family without writing anything
				err := o.peek(func(db *pipeline.DB) error { _, err := family(db, a[0]); return err })
				if err != nil {
					return err
				}
			}
			db, err := o.openWritable("compact")
			if err != nil {
				return err
			}
			before, err := spaceOf(db)
			if err != nil {
				return errors.Join(err, db.Close())
			}
			p := o.newProgress()
			count := 1
			if len(a) == 1 {
				cf, err := family(db, a[0])
				if err == nil {
					var lo, hi []byte
					if start != "" {
						lo = []byte(start)
					}
					if end != "" {
						hi = []byte(end)
					}
					p.update("compact", 0, 0, false)
					err = db.CompactRange(cf, lo, hi)
				}
				if err != nil {
					p.finish()
					return errors.Join(err, db.Close())
				}
			} else {
				err := db.CompactAll(func(_ string, done, total int) {
					count = total
					p.update("compact", uint64(done), uint64(total), false)
				})
				if err != nil {
					p.finish()
					return errors.Join(err, db.Close())
				}
			}
			p.finish()
			after, err := spaceOf(db)
			if err := errors.Join(err, db.Close()); err != nil {
				return err
			}
			if o.json {
				return o.emitJSON(map[string]any{"families": count, "sst_bytes_before": before, "sst_bytes_after": after})
			}
			fmt.Fprintf(o.out, "compact: %d families, SST bytes %d -> %d\n", count, before, after)
			return nil
		},
	}
	cmd.Flags().StringVar(&start, "start", "", "first key of the range (default: the family's first)")
	cmd.Flags().StringVar(&end, "end", "", "key the range ends before (default: past the family's last)")
	return cmd
}

// spaceOf sums every family's SST bytes.
func spaceOf(db *pipeline.DB) (uint64, error) {
	st, err := db.StorageStats()
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, f := range st.Families {
		n += f.SSTBytes
	}
	return n, nil
}

// truncateCmd deletes the log below a checkpointed position.
func truncateCmd(o *options) *cobra.Command {
	var before uint64
	cmd := &cobra.Command{
		Use:   "truncate --before N",
		Short: "Delete the log's entries below position N, which a recorded checkpoint must cover",
		Long: `truncate deletes the log entries below position N (DB.TruncateLog). A checkpoint the
database recorded must cover N-1 ("rockline checkpoint" records one when no other process
holds the database; DB.Checkpoint always does), so a copy plus the rest of the log can
still rebuild the database. It needs the database to itself.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before < 2 {
				return usageError{fmt.Errorf("--before %d: expected a position of 2 or more (the first one kept)", before)}
			}
			err := o.peek(func(db *pipeline.DB) error {
				if last := db.LastPosition(); before > last+1 {
					return usageError{fmt.Errorf("--before %d: the log ends at %d", before, last)}
				}
				return nil
			})
			if err != nil {
				return err
			}
			db, err := o.openWritable("truncate")
			if err != nil {
				return err
			}
			err = db.TruncateLog(before)
			first := db.FirstPosition()
			if err := errors.Join(err, db.Close()); err != nil {
				return err
			}
			if o.json {
				return o.emitJSON(map[string]any{"first_position": first})
			}
			fmt.Fprintf(o.out, "truncate: the log now starts at %d\n", first)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&before, "before", 0, "the first position to keep (required)")
	return cmd
}
