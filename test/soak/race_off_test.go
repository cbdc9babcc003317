//go:build !race

package soak

// raceDetector is whether the race detector is on: its shadow memory is anonymous
// memory that grows with what the process allocated and is never given back.
const raceDetector = false
