package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// usage fills r's disk and memory figures: the database folder's allocated blocks,
// each family's SST bytes, and the process's memory after a GC (resident, its peak so
// far, anonymous, Go heap) with the block cache's and the memtables' share of it.
func (s *scaleDB) usage(r *scaleResult) error {
	u, err := diskUsage(s.dir)
	if err != nil {
		return err
	}
	r.DiskBytes, r.FileBytes, r.WALBytes = u.allocated, u.files, u.wal
	if r.LoadAvg, err = loadAverage(); err != nil {
		return err
	}
	st, err := s.db.StorageStats()
	if err != nil {
		return fmt.Errorf("storage stats: %w", err)
	}
	r.SSTBytes = map[string]uint64{}
	var memtables uint64
	for _, f := range st.Families {
		if f.SSTBytes > 0 {
			r.SSTBytes[f.Name] += f.SSTBytes
		}
		memtables += f.MemtableBytes
	}
	r.BlockCacheMiB, r.MemtableMiB = float64(st.BlockCacheBytes)/mib, float64(memtables)/mib
	anon, heap, err := settled()
	if err != nil {
		return err
	}
	rss, peak, err := residentBytes()
	if err != nil {
		return err
	}
	r.AnonMiB, r.GoHeapMiB, r.RSSMiB, r.PeakRSSMiB = float64(anon)/mib, float64(heap)/mib, float64(rss)/mib, float64(peak)/mib
	return nil
}

// space is what the files under a folder take.
type space struct {
	allocated int64 // blocks allocated on the device, as du counts them (RocksDB preallocates WAL files)
	files     int64 // the files' sizes
	wal       int64 // the write-ahead log files' (*.log) sizes
}

// diskUsage is the space the files under dir take, leaving out files deleted while
// it walks.
func diskUsage(dir string) (space, error) {
	var u space
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		var info fs.FileInfo
		if err == nil {
			info, err = d.Info()
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a file RocksDB deleted during the walk (an obsolete SST or WAL)
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		u.files += info.Size()
		if strings.HasSuffix(path, ".log") {
			u.wal += info.Size()
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.allocated += st.Blocks * 512
		} else {
			u.allocated += info.Size()
		}
		return nil
	})
	if err != nil {
		return space{}, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return u, nil
}

// ioCounters are the process's bytes read so far: through read calls (page cache
// hits included) and from the device.
type ioCounters struct{ read, device uint64 }

// readIO reads the process's ioCounters from /proc/self/io (Linux).
func readIO() (ioCounters, error) {
	r, d, err := procIO()
	if err != nil {
		return ioCounters{}, fmt.Errorf("/proc/self/io: %w", err)
	}
	return ioCounters{r, d}, nil
}

// perCall is the KiB read and the KiB read from the device since c0, per call of n.
func (c ioCounters) perCall(c0 ioCounters, n uint64) (read, device float64) {
	return ratioOf(float64(c.read-c0.read)/1024, float64(n)), ratioOf(float64(c.device-c0.device)/1024, float64(n))
}

// loadAverage is the machine's load average over the last minute (/proc/loadavg):
// on a shared machine, how many runnable threads the figures competed with.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/loadavg: %w", err)
	}
	return v, nil
}

// residentBytes reads the process's resident set size and its peak (VmRSS, VmHWM)
// from /proc/self/status (Linux).
func residentBytes() (rss, peak int64, err error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, v, ok := strings.Cut(s.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	if rss == 0 || peak == 0 {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM line in /proc/self/status")
	}
	return rss, peak, nil
}
