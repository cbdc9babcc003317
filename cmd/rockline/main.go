// Command rockline looks into a rockline database: its families and log (info), its
// log entries decoded (log), a stream (stream), and keys (get, scan). Every command
// reads through a RocksDB secondary open (pipeline.OpenSecondary), so it works on a
// database another process has open and is writing, never takes the write lock and
// writes nothing to the database's folder.
//
// Output is aligned text for people, or one JSON document with --json. Exit status: 0
// on success, 1 when the command failed (a missing folder, a corrupt entry), 2 for bad
// arguments, with a message naming what was wrong.
//
// This is the first part of the tool issue 15 describes; verify, checkpoint, restore,
// compact, truncate, stats and --follow are still to come.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

func main() {
	root := newRoot(os.Stdout)
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
