package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/pipeline"
)

// usageError marks an error in the command line: exit status 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// options are the flags every command shares.
type options struct {
	dir     string
	json    bool
	out     io.Writer
	scratch string // the secondary's own folder, removed on exit
}

// newRoot builds the command tree writing to out.
func newRoot(out io.Writer) *cobra.Command {
	o := &options{out: out}
	root := &cobra.Command{
		Use:           "rockline",
		Short:         "Look into a rockline database, also one another process is writing",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&o.dir, "dir", "", "the database's folder (required)")
	root.PersistentFlags().BoolVar(&o.json, "json", false, "print one JSON document instead of text")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(infoCmd(o), logCmd(o), streamCmd(o), getCmd(o), scanCmd(o))
	return root
}

// args wraps a cobra argument check so its error is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// open opens the database as a secondary in a scratch folder and catches it up, so
// it sees everything the writer (if any) has written.
func (o *options) open() (*pipeline.DB, func(), error) {
	if o.dir == "" {
		return nil, nil, usageError{fmt.Errorf("--dir is required: the database's folder")}
	}
	if _, err := os.Stat(o.dir); err != nil {
		return nil, nil, fmt.Errorf("database folder: %w", err)
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
