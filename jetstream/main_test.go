package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jstest"
)

var cluster *jstest.Cluster

// TestMain starts one embedded 3-node cluster for the package, and after the tests
// checks that no goroutine outlives Shutdown (beyond what jstest lists). Re-executed
// as a node of a process cluster (jstest.StartProcs), the binary runs that node only.
func TestMain(m *testing.M) {
	jstest.RunNodeIfChild()
	os.Exit(jstest.Main(m, jstest.Options{}, &cluster))
}

var streamSeq atomic.Int64

// connect connects to node i and closes the connection at the end of the test.
func connect(t testing.TB, i int) *nats.Conn {
	t.Helper()
	nc, err := cluster.Connect(i)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// open opens a new partition (its own stream) with replicas through node 0, and
// closes it at the end of the test.
func open(t testing.TB, replicas int) (*jetstream.Partition, jetstream.Config) {
	t.Helper()
	n := streamSeq.Add(1)
	cfg := jetstream.Config{Stream: fmt.Sprintf("RL_test_%d", n), Subject: fmt.Sprintf("rl.test.%d", n), Replicas: replicas}
	return openOn(t, connect(t, 0), cfg), cfg
}

func openOn(t testing.TB, nc *nats.Conn, cfg jetstream.Config) *jetstream.Partition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := jetstream.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
