package jstest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main is a test package's TestMain body around one cluster: it starts the cluster
// with o, stores it in *c, runs the tests, shuts the cluster down, and fails the run
// when a goroutine outlives Shutdown (beyond IgnoreGoroutines). It returns the exit
// code for os.Exit. A package that also runs child-process nodes calls
// RunNodeIfChild before it.
func Main(m *testing.M, o Options, c **Cluster) int {
	start := time.Now()
	cl, err := Start(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "jstest: 3-node cluster ready in %v\n", time.Since(start).Round(time.Millisecond))
	*c = cl
	code := m.Run()
	if err := cl.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(IgnoreGoroutines()...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left after Shutdown:", err)
			code = 1
		}
	}
	return code
}
