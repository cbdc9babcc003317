package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// infoCmd prints the log's bounds and marks, the settings the folder records, and
// every family with its generation, options, key estimate and space.
func infoCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "The log's positions and marks, recorded settings, the families with generation, options, keys and space, pending drops",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, done, err := o.open()
			if err != nil {
				return err
			}
			defer done()
			st, err := db.StorageStats()
			if err != nil {
				return err
			}
			checkpointed, err := db.CheckpointedPosition()
			if err != nil {
				return err
			}
			created, opened, err := db.RecordedSettings()
			if err != nil {
				return err
			}
			type family struct {
				Name                 string `json:"name"`
				Generation           int    `json:"generation"`
				EstimatedKeys        uint64 `json:"estimated_keys"`
				WriteBufferSize      int64  `json:"write_buffer_size"`
				MaxWriteBufferNumber int    `json:"max_write_buffer_number"`
				SSTBytes             uint64 `json:"sst_bytes"`
				LiveDataBytes        uint64 `json:"live_data_bytes"`
			}
			info := struct {
				Dir            string                  `json:"dir"`
				FirstPosition  uint64                  `json:"first_position"`
				LastPosition   uint64                  `json:"last_position"`
				Checkpointed   uint64                  `json:"checkpointed_position"`
				PendingDrops   int64                   `json:"pending_drops"`
				CreatedWith    pipeline.FolderSettings `json:"created_with"`
				LastOpenedWith pipeline.FolderSettings `json:"last_opened_with"`
				Families       []family                `json:"families"`
			}{Dir: o.dir, FirstPosition: db.FirstPosition(), LastPosition: db.LastPosition(), Checkpointed: checkpointed,
				PendingDrops: st.PendingDrops, CreatedWith: created, LastOpenedWith: opened}
			for _, f := range st.Families {
				info.Families = append(info.Families, family{f.Name, f.Generation, f.EstimatedKeys, f.WriteBufferSize, f.MaxWriteBufferNumber, f.SSTBytes, f.LiveDataBytes})
			}
			if o.json {
				return o.emitJSON(info)
			}
			truncated := "none"
			if info.FirstPosition > 1 {
				truncated = fmt.Sprintf("below %d", info.FirstPosition)
			}
			fmt.Fprintf(o.out, "folder        %s\nlog           positions %d..%d, truncated %s, checkpoint recorded through %d\npending       %d drops\n",
				info.Dir, info.FirstPosition, info.LastPosition, truncated, info.Checkpointed, info.PendingDrops)
			for _, s := range []struct {
				what string
				fs   pipeline.FolderSettings
			}{{"created", created}, {"last opened", opened}} {
				if s.fs.At.IsZero() {
					fmt.Fprintf(o.out, "%-13s (not recorded)\n", s.what)
					continue
				}
				fmt.Fprintf(o.out, "%-13s %s with validation %s, %d lanes, %d buckets, sync %v, WAL off %v, bloom %.1f bits/key\n", s.what,
					s.fs.At.Format(time.RFC3339), s.fs.Validation, s.fs.Lanes, s.fs.Buckets, s.fs.Sync, s.fs.DisableWAL, s.fs.BloomBitsPerKey)
			}
			fmt.Fprintln(o.out)
			w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "FAMILY\tGEN\tKEYS (EST.)\tWRITE BUFFER\tBUFFERS\tSST BYTES\tLIVE BYTES")
			for _, f := range info.Families {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", f.Name, f.Generation, f.EstimatedKeys, f.WriteBufferSize, f.MaxWriteBufferNumber, f.SSTBytes, f.LiveDataBytes)
			}
			return w.Flush()
		},
	}
}

// streamCmd reads a stream.
func streamCmd(o *options) *cobra.Command {
	var from uint64
	var backward bool
	var limit int
	cmd := &cobra.Command{
		Use:   "stream NAME",
		Short: "A stream's events, forward from a revision or backward",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkLimit(limit, 1<<20); err != nil {
				return err
			}
			db, done, err := o.open()
			if err != nil {
				return err
			}
			defer done()
			es, err := eventstore.New(db)
			if errors.Is(err, pipeline.ErrReadOnly) {
				return fmt.Errorf("stream %q: the database has no event store (no stream was ever appended)", a[0])
			}
			if err != nil {
				return err
			}
			read := es.ReadStream
			if backward {
				read = es.ReadStreamBackward
				if !cmd.Flags().Changed("from") {
					from = ^uint64(0)
				}
			}
			evs, err := read(cmd.Context(), a[0], from, limit)
			var ae *pipeline.ArgumentError
			if errors.As(err, &ae) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if o.json {
				return o.emitJSON(evs)
			}
			w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "REVISION\tPOSITION\tTIME\tTYPE\tID\tDATA")
			for _, e := range evs {
				fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\n", e.Revision, e.Position, e.Time.UTC().Format(time.RFC3339), e.Type, e.ID, printable(e.Data))
			}
			return w.Flush()
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "first revision (backward: the last one; default the stream's last)")
	cmd.Flags().BoolVar(&backward, "backward", false, "newest first")
	cmd.Flags().IntVar(&limit, "limit", 100, "events at most (1..1048576)")
	return cmd
}

// family opens the family named by the command line.
func family(db *pipeline.DB, name string) (*pipeline.ColumnFamily, error) {
	if name == "default" {
		return db.Default(), nil
	}
	cf, err := db.ColumnFamily(name)
	if errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		return nil, usageError{fmt.Errorf("family %q: no such family (see rockline info)", name)}
	}
	return cf, err
}

// getCmd prints one key's value.
func getCmd(o *options) *cobra.Command {
	var asHex bool
	cmd := &cobra.Command{
		Use:   "get FAMILY KEY",
		Short: "One key's value",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			db, done, err := o.open()
			if err != nil {
				return err
			}
			defer done()
			cf, err := family(db, a[0])
			if err != nil {
				return err
			}
			key := []byte(a[1])
			if asHex {
				if key, err = hex.DecodeString(a[1]); err != nil {
					return usageError{fmt.Errorf("KEY %q: expected hex with --hex: %w", a[1], err)}
				}
			}
			var v []byte
			err = db.View(func(tx *pipeline.Txn) error {
				var err error
				v, err = tx.GetUntracked(cf, key)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s %s: %w", a[0], printable(key), err)
			}
			if o.json {
				return o.emitJSON(map[string]string{"key": hex.EncodeToString(key), "value": hex.EncodeToString(v)})
			}
			fmt.Fprintln(o.out, printable(v))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asHex, "hex", false, "KEY is hex")
	return cmd
}

// scanCmd prints the keys of a family, under a prefix or in a range.
func scanCmd(o *options) *cobra.Command {
	var prefix, start, end string
	var limit int
	cmd := &cobra.Command{
		Use:   "scan FAMILY",
		Short: "Keys and values of a family: all, under a prefix, or in a range [--start, --end)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkLimit(limit, math.MaxInt); err != nil {
				return err
			}
			if prefix != "" && (start != "" || end != "") {
				return usageError{fmt.Errorf("--prefix and --start/--end: expected one or the other")}
			}
			if start != "" && end != "" && start > end {
				return usageError{fmt.Errorf("--start %q is after --end %q", start, end)}
			}
			db, done, err := o.open()
			if err != nil {
				return err
			}
			defer done()
			cf, err := family(db, a[0])
			if err != nil {
				return err
			}
			type kv struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			}
			var rows []kv
			err = db.View(func(tx *pipeline.Txn) error {
				opts := pipeline.IterOptions{}
				switch {
				case prefix != "":
					opts.Lower = []byte(prefix)
					opts.Upper = storage.PrefixEnd([]byte(prefix))
				default:
					if start != "" {
						opts.Lower = []byte(start)
					}
					if end != "" {
						opts.Upper = []byte(end)
					}
				}
				it, err := tx.NewIterator(cf, opts)
				if err != nil {
					return err
				}
				defer it.Close()
				for it.First(); it.Valid() && len(rows) < limit; it.Next() {
					if o.json {
						rows = append(rows, kv{hex.EncodeToString(it.Key()), hex.EncodeToString(it.Value())})
					} else {
						rows = append(rows, kv{printable(it.Key()), printable(it.Value())})
					}
				}
				return it.Err()
			})
			if err != nil {
				return err
			}
			if o.json {
				return o.emitJSON(rows)
			}
			w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tVALUE")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\n", r.Key, r.Value)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "keys starting with this")
	cmd.Flags().StringVar(&start, "start", "", "first key of a range")
	cmd.Flags().StringVar(&end, "end", "", "key a range ends before")
	cmd.Flags().IntVar(&limit, "limit", 1000, "keys at most")
	return cmd
}

// checkLimit refuses a --limit outside 1..most.
func checkLimit(limit, most int) error {
	if limit < 1 || limit > most {
		return usageError{fmt.Errorf("--limit %d: expected between 1 and %d", limit, most)}
	}
	return nil
}

// printable shows b as text when it is printable UTF-8, else as 0x-prefixed hex.
func printable(b []byte) string {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if r < 0x20 || r == 0x7f {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return "0x" + hex.EncodeToString(b)
}
