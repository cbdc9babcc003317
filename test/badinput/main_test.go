// Package badinput sweeps every public function of pipeline, eventstore and storage with bad
// input: nil and empty keys, oversized keys and values, nil, foreign and dropped
// families, closed databases, used-up transactions, cancelled contexts, bad limits,
// invalid stream names and events, zero values and bad Config fields. Every case must
// return a typed error (or a documented sentinel) whose message names what was wrong,
// must not panic, and must leave the database committing.
//
// The 1 GiB+1 value case allocates one buffer (untouched pages, so cheap); -short
// skips it with a message.
package badinput

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
