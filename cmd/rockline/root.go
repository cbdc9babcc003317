package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/pipeline"
)

// usageError marks an error in the command line: exit status 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// options are the flags every command shares.
type options struct {
	dir      string
	json     bool
	progress string // auto, always or never
	out      io.Writer
	errOut   io.Writer // progress displays
}

// newRoot builds the command tree writing results to out and progress to errOut.
func newRoot(out, errOut io.Writer) *cobra.Command {
	o := &options{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:           "rockline",
		Short:         "Look into a rockline database, also one another process is writing",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&o.dir, "dir", "", "the database's folder (required)")
	root.PersistentFlags().BoolVar(&o.json, "json", false, "print one JSON document instead of text")
	root.PersistentFlags().StringVar(&o.progress, "progress", "auto", "progress display of long commands on standard error: auto (when it is a terminal), always or never")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch o.progress {
		case "auto", "always", "never":
			return nil
		}
		return usageError{fmt.Errorf("--progress %q: expected auto, always or never", o.progress)}
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(infoCmd(o), statsCmd(o), logCmd(o), streamCmd(o), getCmd(o), scanCmd(o),
		verifyCmd(o), checkpointCmd(o), restoreCmd(o), compactCmd(o), truncateCmd(o))
	root.SetHelpCommand(helpCmd())
	root.InitDefaultCompletionCmd() // now, not in Execute, so strictCommandLine sees it
	strictCommandLine(root)
	return root
}

// args wraps a cobra argument check so its error is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			if errors.As(err, new(usageError)) {
				return err // a check wrapped twice (strictCommandLine)
			}
			return usageError{err}
		}
		return nil
	}
}

// folder checks that --dir names an existing rockline (RocksDB) folder, so no
// command creates a database where there was none.
func (o *options) folder() error {
	if o.dir == "" {
		return usageError{fmt.Errorf("--dir is required: the database's folder")}
	}
	if _, err := os.Stat(o.dir); err != nil {
		return fmt.Errorf("database folder: %w", err)
	}
	if _, err := os.Stat(filepath.Join(o.dir, "CURRENT")); err != nil {
		return fmt.Errorf("%s holds no database (no RocksDB CURRENT file)", o.dir)
	}
	return nil
}

// openWritable opens the database for writing, for the commands that change it. A
// folder another process holds fails with a message saying what to do instead.
func (o *options) openWritable(what string) (*pipeline.DB, error) {
	if err := o.folder(); err != nil {
		return nil, err
	}
	db, err := pipeline.Open(o.dir, pipeline.Config{Lanes: 1})
	if errors.Is(err, pipeline.ErrLocked) {
		return nil, fmt.Errorf("%s is held by another process; %s needs the database to itself: stop that process, or do it from there", o.dir, what)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.dir, err)
	}
	return db, nil
}

// peek runs check on a secondary open, for the checks a writing command makes before
// it opens the database for writing (which already changes files).
func (o *options) peek(check func(*pipeline.DB) error) error {
	db, done, err := o.open()
	if err != nil {
		return err
	}
	defer done()
	return check(db)
}

// open opens the database as a secondary in a scratch folder and catches it up, so
// it sees everything the writer (if any) has written.
func (o *options) open() (*pipeline.DB, func(), error) {
	if err := o.folder(); err != nil {
		return nil, nil, err
	}
	scratch, err := os.MkdirTemp("", "rockline-secondary-")
	if err != nil {
		return nil, nil, err
	}
	db, err := pipeline.OpenSecondary(o.dir, scratch, pipeline.Config{Lanes: 1})
	if err != nil {
		os.RemoveAll(scratch)
		return nil, nil, fmt.Errorf("open %s: %w", o.dir, err)
	}
	if err := db.CatchUp(); err != nil {
		db.Close()
		os.RemoveAll(scratch)
		return nil, nil, fmt.Errorf("catch up with %s: %w", o.dir, err)
	}
	return db, func() { db.Close(); os.RemoveAll(scratch) }, nil
}

// emitJSON prints v as indented JSON.
func (o *options) emitJSON(v any) error {
	enc := json.NewEncoder(o.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
