// Package jstest starts an embedded JetStream cluster for tests: three nats-server
// nodes in this process, every listener on 127.0.0.1 with a free port (clients and
// cluster routes; no monitoring, leaf, gateway or websocket listener), file storage
// under a temporary folder, explicit routes between all three. Start it once per test
// package, from TestMain, and Shutdown it there:
//
//	var cluster *jstest.Cluster
//
//	func TestMain(m *testing.M) { os.Exit(jstest.Main(m, jstest.Options{}, &cluster)) }
//
// A test may Shutdown a node of the cluster and Restart it with its storage and
// client port. For a crash or a network partition, StartProcs (proc.go) runs the
// nodes as child processes of the re-executed test binary, optionally each in its own
// network namespace; the package's TestMain must then call RunNodeIfChild first.
//
// Goroutines: Shutdown waits for every node (WaitForShutdown), after which, with
// nats-server v2.15.3, no goroutine of the servers is left: goleak.Find passes in the
// jetstream package's TestMain with IgnoreGoroutines, which is empty today and is where
// an exception belongs if a later nats-server leaves one by design.
package jstest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

// Options configures Start. Zero values take the defaults shown.
type Options struct {
	// Nodes is the cluster's size (default 3, valid 1..5).
	Nodes int
	// Dir holds each node's storage in a subfolder; default a new temporary folder,
	// removed by Shutdown.
	Dir string
	// ReadyTimeout bounds the wait for every node to accept clients and for the
	// JetStream meta group to elect a leader (default 30s).
	ReadyTimeout time.Duration
	// ClusterName is the cluster's name (default "rockline-test").
	ClusterName string
	// LazySync runs the nodes with nats-server's default file-store sync (an fsync
	// every 2 minutes) instead of sync_interval: always, the setting rockline
	// requires for an acknowledged commit to survive an OS crash or power loss (see
	// the jetstream package doc). For measuring the difference only.
	LazySync bool
}

// Cluster is a running embedded cluster.
type Cluster struct {
	// Servers are the nodes, node 1 first; a test may stop one (Shutdown) to see a
	// failover, after which the cluster has one node fewer until Restart.
	Servers []*server.Server
	opts    []server.Options // each node's options, its client port fixed once known
	dir     string
	ownDir  bool
}

// Start starts the cluster and returns once every node accepts clients and the
// JetStream meta group has a leader that every node follows, or fails after
// ReadyTimeout (shutting down what it started).
func Start(o Options) (*Cluster, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes < 1 || o.Nodes > 5 {
		return nil, fmt.Errorf("jstest: Nodes = %d: expected 1..5", o.Nodes)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	if o.ClusterName == "" {
		o.ClusterName = "rockline-test"
	}
	c := &Cluster{dir: o.Dir}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "rockline-jstest-")
		if err != nil {
			return nil, fmt.Errorf("jstest: %w", err)
		}
		c.dir, c.ownDir = d, true
	}
	ports, err := freePorts(o.Nodes)
	if err != nil {
		return nil, c.fail(err)
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))})
	}
	for i := 0; i < o.Nodes; i++ {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			HTTPPort:   0, // no monitoring listener
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)),
			SyncAlways: !o.LazySync, // sync_interval: always
		}
		if o.Nodes > 1 {
			opts.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: "127.0.0.1", Port: ports[i]}
			opts.Routes = routes
		}
		c.opts = append(c.opts, *opts)
		s, err := server.NewServer(opts)
		if err != nil {
			return nil, c.fail(fmt.Errorf("jstest: node %d: %w", i+1, err))
		}
		c.Servers = append(c.Servers, s)
		s.Start()
	}
	deadline := time.Now().Add(o.ReadyTimeout)
	for i, s := range c.Servers {
		if !s.ReadyForConnections(time.Until(deadline)) {
			return nil, c.fail(fmt.Errorf("jstest: node %d not accepting clients after %v", i+1, o.ReadyTimeout))
		}
		// A restarted node listens where clients knew it.
		c.opts[i].Port = s.Addr().(*net.TCPAddr).Port
	}
	if err := c.waitMetaLeader(deadline); err != nil {
		return nil, c.fail(err)
	}
	return c, nil
}

// waitMetaLeader polls, every 10 ms and until deadline, for a meta leader that every
// node is current with. nats-server offers no notification of this, so a bounded poll
// it is.
func (c *Cluster) waitMetaLeader(deadline time.Time) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		leaders, current := 0, 0
		for _, s := range c.Servers {
			if s.JetStreamIsLeader() {
				leaders++
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		if leaders == 1 && current == len(c.Servers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jstest: no JetStream meta leader followed by all %d nodes by the deadline (%d leaders, %d current)", len(c.Servers), leaders, current)
		}
		<-tick.C
	}
}

func (c *Cluster) fail(err error) error {
	return errors.Join(err, c.Shutdown())
}

// freePorts returns n ports free on 127.0.0.1 at the time of the call (the routes
// must be known before the nodes start, so the cluster ports cannot be RANDOM_PORT).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("jstest: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Restart starts node i (0-based) again after a test stopped it with Shutdown, with
// its options, storage and client port, and returns once it accepts clients (within
// timeout). It does not wait for the node to catch up with the cluster: that is for
// the test to watch.
func (c *Cluster) Restart(i int, timeout time.Duration) error {
	if i < 0 || i >= len(c.Servers) {
		return fmt.Errorf("jstest: Restart(%d): the cluster has %d nodes", i, len(c.Servers))
	}
	old := c.Servers[i]
	if old.Running() {
		return fmt.Errorf("jstest: Restart(%d): node %d is running", i, i+1)
	}
	old.WaitForShutdown()
	opts := c.opts[i]
	s, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("jstest: restarting node %d: %w", i+1, err)
	}
	c.Servers[i] = s
	s.Start()
	if !s.ReadyForConnections(timeout) {
		return fmt.Errorf("jstest: restarted node %d not accepting clients after %v", i+1, timeout)
	}
	return nil
}

// URLs returns every node's client URL, node 1 first.
func (c *Cluster) URLs() []string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.ClientURL())
	}
	return out
}

// Connect connects to node i (0-based) only, with the given extra options; the
// connection may still reconnect to other nodes it learns of.
func (c *Cluster) Connect(i int, opts ...nats.Option) (*nats.Conn, error) {
	if i < 0 || i >= len(c.Servers) {
		return nil, fmt.Errorf("jstest: Connect(%d): the cluster has %d nodes", i, len(c.Servers))
	}
	nc, err := nats.Connect(c.Servers[i].ClientURL(), append([]nats.Option{nats.Name(fmt.Sprintf("jstest-n%d", i+1))}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("jstest: connecting to node %d: %w", i+1, err)
	}
	return nc, nil
}

// Shutdown stops every node, waits for each to finish, and removes the storage
// folder if Start made it. It is safe on a partly started cluster.
func (c *Cluster) Shutdown() error {
	for _, s := range c.Servers {
		s.Shutdown()
	}
	for _, s := range c.Servers {
		s.WaitForShutdown()
	}
	c.Servers = nil
	if c.ownDir {
		if err := os.RemoveAll(c.dir); err != nil {
			return fmt.Errorf("jstest: removing %s: %w", c.dir, err)
		}
	}
	return nil
}

// IgnoreGoroutines lists, for goleak, goroutines nats-server starts once per process
// and never stops, which outlive Shutdown by design. With v2.15.3 there are none.
func IgnoreGoroutines() []goleak.Option { return nil }
