package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every engine's Close ends its goroutines (rockline's lanes,
// Badger's compactors and caches).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
