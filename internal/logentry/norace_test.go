//go:build !race

package logentry

// raceEnabled reports whether the race detector is on; its instrumentation
// adds allocations, so allocation counts are not checked under it.
const raceEnabled = false
