// Command rockline looks into and maintains a rockline database: its families and
// log (info), write stalls and space (stats), log entries decoded and followed (log),
// a stream (stream), keys (get, scan), a full check (verify), online backups
// (checkpoint, restore), compaction (compact) and log truncation (truncate).
//
// The read commands open the folder through a RocksDB secondary
// (pipeline.OpenSecondary), so they work on a database another process has open and
// is writing, never take the write lock and write nothing into the folder. checkpoint
// uses a secondary too when another process holds the database; compact and truncate
// need it to themselves and refuse otherwise, after checking their arguments on a
// secondary so a refused command changes nothing.
//
// Output is aligned text for people, or JSON with --json. Long commands draw progress
// with an ETA on a terminal (progress.go). Exit status: 0 on success, 1 when the
// command failed (a missing folder, a corrupt entry, a problem verify found), 2 for a
// bad command line (an unknown command or subcommand, at any level and in help's
// path too; a bad flag or argument), with a message naming what was wrong.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

func main() {
	root := newRoot(os.Stdout, os.Stderr)
	if err := root.Execute(); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "rockline: ") {
			msg = "rockline: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
