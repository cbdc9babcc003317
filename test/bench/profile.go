package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile profiles this process (cgo time shows under the calling Go frame,
// e.g. _Cfunc_rocksdb_get_cf) until the returned function is called. The memory
// scenario's child processes are not profiled, and a run the watchdog ends loses it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpuprofile:", err)
		}
	}, nil
}
