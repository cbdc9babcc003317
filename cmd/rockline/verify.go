package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// errProblems marks a verify that ran and found problems: exit status 1, after the
// summary.
var errProblems = errors.New("verify found problems")

// verifyCmd checks the log, the state against a replay and the stream index.
func verifyCmd(o *options) *cobra.Command {
	var skipState bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every log entry's checksum, log density, the stream index against the log, and the state against a replay of the log",
		Long: `verify reads the database through a secondary open, so another process may keep
writing: it checks the state as of the moment it caught up. The state check rebuilds the
database from its log into a scratch folder beside the system's temporary files
(removed afterwards; it needs as much space as the database) and compares every family
key by key; --skip-state leaves it out. Exit status 0 when everything passed, 1 when a
problem was found (listed in the summary) or a check could not run.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, done, err := o.open()
			if err != nil {
				return err
			}
			defer done()
			p := o.newProgress()
			defer p.finish()
			opts := pipeline.VerifyOptions{Progress: func(stage string, d, t uint64) { p.update(stage, d, t, false) }}
			if !skipState {
				tmp, err := os.MkdirTemp("", "rockline-verify-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				opts.ScratchDir = filepath.Join(tmp, "replay")
			}
			rep, err := db.Verify(cmd.Context(), opts)
			if err != nil {
				return err
			}
			var streams *eventstore.VerifyReport
			if es, err := eventstore.New(db); err == nil {
				r, err := es.Verify(cmd.Context(), func(stage string, d, t uint64) { p.update("streams "+stage, d, t, false) })
				if err != nil {
					return err
				}
				streams = &r
			} else if !errors.Is(err, pipeline.ErrReadOnly) { // ErrReadOnly: no event store was ever made
				return err
			}
			p.finish()
			ok := rep.OK() && (streams == nil || streams.OK())
			if o.json {
				if err := o.emitJSON(struct {
					OK      bool                     `json:"ok"`
					Log     pipeline.VerifyReport    `json:"log"`
					Streams *eventstore.VerifyReport `json:"streams,omitempty"`
				}{ok, rep, streams}); err != nil {
					return err
				}
			} else {
				printVerify(o, rep, streams, ok)
			}
			if !ok {
				return errProblems
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&skipState, "skip-state", false, "leave out the comparison of the state with a replay of the log")
	return cmd
}

func printVerify(o *options, rep pipeline.VerifyReport, streams *eventstore.VerifyReport, ok bool) {
	mark := func(good bool) string {
		if good {
			return "ok"
		}
		return "FAILED"
	}
	fmt.Fprintf(o.out, "log       %-6s positions %d..%d: %d entries with valid checksums, %d corrupt or missing\n",
		mark(rep.CorruptEntries == 0), rep.FirstPosition, rep.LastPosition, rep.Entries, rep.CorruptEntries)
	if rep.StateChecked {
		fmt.Fprintf(o.out, "state     %-6s %d families, %d keys compared with a replay of the log, %d differences\n",
			mark(rep.StateDifferences == 0), rep.Families, rep.KeysCompared, rep.StateDifferences)
	} else {
		fmt.Fprintf(o.out, "state     %-6s %s\n", "skipped", rep.StateSkipped)
	}
	if streams != nil {
		fmt.Fprintf(o.out, "streams   %-6s %d streams, %d index records, %d events in the log, %d tag markers, %d index entries, %d problems\n",
			mark(streams.OK()), streams.Streams, streams.Records, streams.EventsChecked, streams.Tags, streams.IndexEntries, streams.ProblemCount)
	} else {
		fmt.Fprintf(o.out, "streams   %-6s no event store in this database\n", "none")
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(o.out, "  problem: %s\n", p)
	}
	if streams != nil {
		for _, p := range streams.Problems {
			fmt.Fprintf(o.out, "  problem: %s\n", p)
		}
	}
	if ok {
		fmt.Fprintln(o.out, "verify: ok")
	} else {
		fmt.Fprintln(o.out, "verify: problems found")
	}
}
