package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/pipeline"
)

// checkpointCmd takes an online backup: an openable copy of the database.
func checkpointCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint TARGET",
		Short: "Copy the database into TARGET (a folder that does not exist), online",
		Long: `checkpoint writes an openable copy of the database into TARGET (hard links for the
table files on the same filesystem, so it is cheap). When no other process holds the
database, the tool opens it and the copy is a checkpoint in rockline's sense: the
database records that its log up to the copy's position is backed up, so "rockline
truncate" may then delete the log below it. When another process is writing, the copy is
taken through a secondary open, as a crash of the writer would leave the files, and
records nothing in the database (take a checkpoint from that process, DB.Checkpoint, to
allow truncation).`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			target := a[0]
			if _, err := os.Stat(target); err == nil {
				return usageError{fmt.Errorf("TARGET %s exists; expected a folder that does not exist yet", target)}
			}
			if err := o.folder(); err != nil {
				return err
			}
			p := o.newProgress()
			defer p.finish()
			p.update("checkpoint", 0, 0, false)
			covered, recorded, err := checkpoint(o, target)
			p.finish()
			if err != nil {
				os.RemoveAll(target) // nothing half-written
				return err
			}
			if o.json {
				return o.emitJSON(map[string]any{"target": target, "position": covered, "recorded": recorded})
			}
			if recorded {
				fmt.Fprintf(o.out, "checkpoint: %s holds log positions 1..%d; recorded, so the log below %d may be truncated\n", target, covered, covered+1)
			} else {
				fmt.Fprintf(o.out, "checkpoint: %s holds log positions 1..%d at least (taken through a secondary while another process writes; not recorded)\n", target, covered)
			}
			return nil
		},
	}
}

// checkpoint copies the database into target: through a writable open when the
// folder is free (recorded), else through a secondary, caught up again and retried
// when the writer deleted a file the secondary still listed.
func checkpoint(o *options, target string) (covered uint64, recorded bool, err error) {
	db, err := pipeline.Open(o.dir, pipeline.Config{Lanes: 1})
	if err == nil {
		covered, err = db.Checkpoint(target)
		return covered, err == nil, errors.Join(err, db.Close())
	}
	if !errors.Is(err, pipeline.ErrLocked) {
		return 0, false, fmt.Errorf("open %s: %w", o.dir, err)
	}
	sec, done, err := o.open()
	if err != nil {
		return 0, false, err
	}
	defer done()
	for attempt := 1; ; attempt++ {
		covered, err = sec.Checkpoint(target)
		if err == nil || attempt == 3 {
			return covered, false, err
		}
		os.RemoveAll(target)
		if err := sec.CatchUp(); err != nil {
			return 0, false, err
		}
	}
}

// restoreCmd makes a database folder from a checkpoint.
func restoreCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "restore CHECKPOINT",
		Short: "Make the database folder --dir (new or empty) from a checkpoint",
		Long: `restore copies CHECKPOINT (a folder "rockline checkpoint" or DB.Checkpoint wrote) into
--dir, which must not exist or be empty, then opens it once, which completes what a copy
taken from a running writer holds as a crash would. The copy goes to a sibling folder
first and is renamed into place only when whole: a failed restore leaves nothing behind.
Table files are hard-linked when both folders are on one filesystem (they never change),
copied otherwise; every other file is copied.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			src := a[0]
			if o.dir == "" {
				return usageError{fmt.Errorf("--dir is required: the folder to restore into")}
			}
			if entries, err := os.ReadDir(o.dir); err == nil && len(entries) > 0 {
				return usageError{fmt.Errorf("--dir %s is not empty; expected a new or empty folder", o.dir)}
			}
			if _, err := os.Stat(filepath.Join(src, "CURRENT")); err != nil {
				return fmt.Errorf("CHECKPOINT %s holds no database (no RocksDB CURRENT file)", src)
			}
			tmp := strings.TrimRight(o.dir, string(filepath.Separator)) + ".restoring"
			if err := os.RemoveAll(tmp); err != nil {
				return err
			}
			p := o.newProgress()
			defer p.finish()
			if err := copyTree(src, tmp, func(d, t uint64) { p.update("restore", d, t, true) }); err != nil {
				os.RemoveAll(tmp)
				return err
			}
			p.finish()
			db, err := pipeline.Open(tmp, pipeline.Config{Lanes: 1})
			if err != nil {
				os.RemoveAll(tmp)
				return fmt.Errorf("open the restored copy: %w", err)
			}
			first, last := db.FirstPosition(), db.LastPosition()
			if err := db.Close(); err != nil {
				os.RemoveAll(tmp)
				return err
			}
			os.Remove(o.dir) // empty, if it exists
			if err := os.Rename(tmp, o.dir); err != nil {
				os.RemoveAll(tmp)
				return err
			}
			if o.json {
				return o.emitJSON(map[string]any{"dir": o.dir, "first_position": first, "last_position": last})
			}
			fmt.Fprintf(o.out, "restore: %s holds log positions %d..%d\n", o.dir, first, last)
			return nil
		},
	}
}

// copyTree copies the files of src into a new folder dst, hard-linking table files
// when it can, syncing each copy, and reporting bytes done of the total.
func copyTree(src, dst string, report func(done, total uint64)) error {
	var total, done uint64
	var files []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += uint64(info.Size())
			files = append(files, path)
		} else if !d.IsDir() {
			return fmt.Errorf("%s: not a regular file in a checkpoint", path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range files {
		rel, err := filepath.Rel(src, f)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		n, err := copyFile(f, to)
		if err != nil {
			return err
		}
		done += n
		report(done, total)
	}
	return syncDir(dst)
}

func copyFile(from, to string) (uint64, error) {
	info, err := os.Stat(from)
	if err != nil {
		return 0, err
	}
	if strings.HasSuffix(from, ".sst") && os.Link(from, to) == nil {
		return uint64(info.Size()), nil
	}
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	return uint64(n), errors.Join(err, out.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
