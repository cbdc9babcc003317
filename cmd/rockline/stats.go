package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// statsCmd prints RocksDB's stall indicators and space, per family and in total.
func statsCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Write-stall indicators per family (immutable memtables, L0 files, pending compaction), space and block-cache use",
		Long: `stats prints what RocksDB reports of each family: immutable memtables, L0 files and
pending compaction bytes (what stalls writes), SST and live data bytes, and the block
cache. The file figures (L0, pending compaction, SST, live data) describe the files as
the writer last left them; memtables, write stops and the block cache are those of this
tool's own (secondary) open: a running process reports its own through its metrics
(rockline.storage.*).`,
		Args: args(cobra.NoArgs),
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
			if o.json {
				return o.emitJSON(st)
			}
			stopped := "no"
			if st.WriteStopped {
				stopped = "yes"
			}
			fmt.Fprintf(o.out, "write stopped   %s\ndelayed rate    %d bytes/s (0: not delayed)\nblock cache     %d bytes used, %d pinned\npending drops   %d\n\n",
				stopped, st.DelayedWriteRate, st.BlockCacheBytes, st.BlockCachePinned, st.PendingDrops)
			w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "FAMILY\tIMMUTABLE\tMEMTABLE BYTES\tL0 FILES\tPENDING COMPACTION\tSST BYTES\tLIVE BYTES\t")
			for _, f := range st.Families {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", f.Name, f.ImmutableMemtables, f.MemtableBytes, f.L0Files, f.PendingCompactionBytes, f.SSTBytes, f.LiveDataBytes)
			}
			return w.Flush()
		},
	}
}
