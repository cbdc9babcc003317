// Package crash is rockline's crash-recovery harness: a parent test re-executes its own
// test binary as a child that runs a mixed workload and reports every acknowledged
// commit on stdout, kills it with SIGKILL at a random moment, reopens the database and
// checks that nothing acknowledged was lost and that state and log still agree. It also
// holds the storage fault-injection tests (faults_test.go) and the full-disk test
// (fulldisk_test.go).
//
// Short form: go test -race -count=1 ./test/crash/ (10 cycles). Long form:
// ROCKLINE_CRASH_CYCLES=200 (make crash). ROCKLINE_CRASH_SEED replays a run.
package crash

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait in these tests, so a bug fails a test instead of hanging it.
const deadline = 60 * time.Second

// envInt reads an integer knob, falling back to def when unset.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// lockedBuffer is a bytes.Buffer safe for a copying goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns at most the last n bytes of s, for failure messages.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
