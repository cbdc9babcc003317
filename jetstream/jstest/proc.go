package jstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Process clusters: the same three nats-server nodes, each a child process that is
// the test binary itself, re-executed with ROCKLINE_JSTEST_NODE set, so that a test
// can SIGKILL one (a crash, which an in-process Shutdown cannot show) or run each
// in its own network namespace and cut it off (see ProcOptions.Netns). The test
// package's TestMain must call RunNodeIfChild first:
//
//	func TestMain(m *testing.M) {
//		jstest.RunNodeIfChild()
//		...
//	}

// envNode carries a child node's configuration (JSON).
const envNode = "ROCKLINE_JSTEST_NODE"

// nodeConfig is what a child node needs to run.
type nodeConfig struct {
	Name        string
	StoreDir    string
	LogFile     string
	Host        string
	Port        int
	ClusterName string
	ClusterHost string
	ClusterPort int
	Routes      []string
}

// RunNodeIfChild runs a nats-server node and exits when the process was started by
// StartProcs as one of its nodes; otherwise it returns at once. The node shuts down
// gracefully (as nats-server does on SIGTERM: stepping down from what it leads) on
// SIGTERM or SIGINT, and when its standard input closes, which happens when the
// parent test process ends however it ends, so no node outlives its test binary.
func RunNodeIfChild() {
	v, ok := os.LookupEnv(envNode)
	if !ok {
		return
	}
	if err := runNode(v); err != nil {
		fmt.Fprintln(os.Stderr, "jstest node:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runNode(v string) error {
	var nc nodeConfig
	if err := json.Unmarshal([]byte(v), &nc); err != nil {
		return fmt.Errorf("%s: %w", envNode, err)
	}
	opts := &server.Options{
		ServerName: nc.Name,
		Host:       nc.Host,
		Port:       nc.Port,
		HTTPPort:   0,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   nc.StoreDir,
		SyncAlways: true, // sync_interval: always, as rockline requires
		LogFile:    nc.LogFile,
		Logtime:    true,
		Cluster: server.ClusterOpts{
			Name: nc.ClusterName, Host: nc.ClusterHost, Port: nc.ClusterPort,
			// Clients reach a node only where the test connects them.
			NoAdvertise: true,
		},
		Routes: server.RoutesFromStr(strings.Join(nc.Routes, ",")),
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	s.ConfigureLogger()
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return errors.New("not accepting clients after 30s")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	orphaned := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(orphaned)
	}()
	select {
	case <-stop:
	case <-orphaned:
	}
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// ProcOptions configures StartProcs. Zero values take the defaults shown.
type ProcOptions struct {
	// Nodes is the cluster's size (default 3, valid 1..5).
	Nodes int
	// Dir holds each node's storage and log (nN.log) in a subfolder; default a new
	// temporary folder, removed by Shutdown.
	Dir string
	// ReadyTimeout bounds the wait for every node to answer JetStream requests,
	// which needs a meta leader (default 60s: the nodes are race-instrumented
	// binaries under go test -race).
	ReadyTimeout time.Duration
	// ClusterName is the cluster's name (default "rockline-test").
	ClusterName string
	// Netns runs every node in its own Linux network namespace, connected to the
	// others by a veth pair to a bridge in a hub namespace (10.201.0.N/24 for node
	// N, private to the namespaces: nothing is added to the test's own namespace),
	// so that Isolate can cut a node off. Clients reach node N's listener on
	// 127.0.0.1 inside its namespace (Connect dials from inside it). It needs root
	// and the ip command; StartProcs fails with an error matching ErrNetnsUnavailable
	// otherwise.
	Netns bool
}

// ErrNetnsUnavailable: StartProcs with Netns could not create network namespaces
// (not Linux, not root, no ip command, or the kernel refused).
var ErrNetnsUnavailable = errors.New("jstest: network namespaces unavailable")

// ProcCluster is a running cluster of child-process nodes.
type ProcCluster struct {
	nodes  []*procNode
	exe    string
	dir    string
	ownDir bool
	lab    *netLab // nil without Netns
	ready  time.Duration
}

type procNode struct {
	cfg   nodeConfig
	url   string // client URL as the test dials it
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has exited and been waited for
}

// StartProcs starts the nodes as child processes of the test binary and returns once
// each answers a JetStream request (a meta leader exists and it reaches it), or fails
// after ReadyTimeout, stopping what it started.
func StartProcs(o ProcOptions) (*ProcCluster, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes < 1 || o.Nodes > 5 {
		return nil, fmt.Errorf("jstest: Nodes = %d: expected 1..5", o.Nodes)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.ClusterName == "" {
		o.ClusterName = "rockline-test"
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("jstest: locating the test binary: %w", err)
	}
	c := &ProcCluster{exe: exe, dir: o.Dir, ready: o.ReadyTimeout}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "rockline-jstest-procs-")
		if err != nil {
			return nil, fmt.Errorf("jstest: %w", err)
		}
		c.dir, c.ownDir = d, true
	}
	var cfgs []nodeConfig
	if o.Netns {
		lab, err := newNetLab(o.Nodes)
		if err != nil {
			return nil, c.fail(err)
		}
		c.lab = lab
		var routes []string
		for i := range o.Nodes {
			routes = append(routes, "nats://"+net.JoinHostPort(lab.addr(i), "6222"))
		}
		for i := range o.Nodes {
			cfgs = append(cfgs, nodeConfig{Host: "127.0.0.1", Port: 4222, ClusterHost: lab.addr(i), ClusterPort: 6222, Routes: routes})
		}
	} else {
		ports, err := freePorts(2 * o.Nodes)
		if err != nil {
			return nil, c.fail(err)
		}
		var routes []string
		for i := range o.Nodes {
			routes = append(routes, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[o.Nodes+i])))
		}
		for i := range o.Nodes {
			cfgs = append(cfgs, nodeConfig{Host: "127.0.0.1", Port: ports[i], ClusterHost: "127.0.0.1", ClusterPort: ports[o.Nodes+i], Routes: routes})
		}
	}
	for i, nc := range cfgs {
		nc.Name = fmt.Sprintf("n%d", i+1)
		nc.ClusterName = o.ClusterName
		nc.StoreDir = filepath.Join(c.dir, nc.Name)
		nc.LogFile = filepath.Join(c.dir, nc.Name+".log")
		if o.Nodes == 1 {
			nc.Routes = nil
		}
		n := &procNode{cfg: nc, url: "nats://" + net.JoinHostPort(nc.Host, strconv.Itoa(nc.Port))}
		c.nodes = append(c.nodes, n)
		if err := c.start(i); err != nil {
			return nil, c.fail(err)
		}
	}
	deadline := time.Now().Add(o.ReadyTimeout)
	for i := range c.nodes {
		if err := c.waitJetStream(i, deadline); err != nil {
			return nil, c.fail(err)
		}
	}
	return c, nil
}

func (c *ProcCluster) start(i int) error {
	n := c.nodes[i]
	env, err := json.Marshal(n.cfg)
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	if c.lab != nil {
		cmd = exec.Command("ip", "netns", "exec", c.lab.ns(i), c.exe)
	} else {
		cmd = exec.Command(c.exe)
	}
	cmd.Env = append(os.Environ(), envNode+"="+string(env))
	out, err := os.OpenFile(filepath.Join(c.dir, n.cfg.Name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("jstest: node %d: %w", i+1, err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("jstest: node %d: %w", i+1, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("jstest: starting node %d: %w", i+1, err)
	}
	n.cmd, n.stdin, n.done = cmd, stdin, make(chan struct{})
	done := n.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

// waitJetStream polls node i, every 50 ms until deadline, with $JS.API.INFO, which
// only the meta leader answers: an answer means the node runs and reaches a leader.
func (c *ProcCluster) waitJetStream(i int, deadline time.Time) error {
	var last error
	for {
		if c.exited(i) {
			return fmt.Errorf("jstest: node %d exited (see %s)", i+1, filepath.Join(c.dir, c.nodes[i].cfg.Name+".out"))
		}
		nc, err := c.Connect(i, nats.Timeout(time.Second), nats.NoReconnect())
		if err == nil {
			var resp *nats.Msg
			resp, err = nc.Request("$JS.API.INFO", nil, time.Second)
			if err == nil {
				var r struct {
					Error *struct {
						Description string `json:"description"`
					} `json:"error"`
				}
				if err = json.Unmarshal(resp.Data, &r); err == nil && r.Error != nil {
					err = errors.New(r.Error.Description)
				}
			}
			nc.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("jstest: node %d not answering JetStream requests by the deadline: %w", i+1, last)
		}
		t := time.NewTimer(50 * time.Millisecond)
		<-t.C
	}
}

func (c *ProcCluster) exited(i int) bool {
	n := c.nodes[i]
	if n.done == nil {
		return true
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

func (c *ProcCluster) node(op string, i int) (*procNode, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("jstest: %s(%d): the cluster has %d nodes", op, i, len(c.nodes))
	}
	return c.nodes[i], nil
}

// Name returns node i's server name ("n1" for node 0), as stream info names peers.
func (c *ProcCluster) Name(i int) string { return fmt.Sprintf("n%d", i+1) }

// Index returns the node index of a server name ("n2" -> 1), or -1.
func (c *ProcCluster) Index(name string) int {
	for i, n := range c.nodes {
		if n.cfg.Name == name {
			return i
		}
	}
	return -1
}

// Nodes returns the cluster's size.
func (c *ProcCluster) Nodes() int { return len(c.nodes) }

// Dir is the folder holding each node's storage, log (nN.log) and output (nN.out).
func (c *ProcCluster) Dir() string { return c.dir }

// Connect connects to node i (0-based) only, with the given extra options (in a
// Netns cluster, dialing from inside node i's namespace). Nodes advertise no client
// URLs, so the connection reconnects to node i only.
func (c *ProcCluster) Connect(i int, opts ...nats.Option) (*nats.Conn, error) {
	n, err := c.node("Connect", i)
	if err != nil {
		return nil, err
	}
	base := []nats.Option{nats.Name(fmt.Sprintf("jstest-%s", n.cfg.Name))}
	if c.lab != nil {
		base = append(base, nats.SetCustomDialer(c.lab.dialer(i)))
	}
	nc, err := nats.Connect(n.url, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("jstest: connecting to node %d: %w", i+1, err)
	}
	return nc, nil
}

// Kill sends SIGKILL to node i's process and waits (up to 10 s) until it is gone.
func (c *ProcCluster) Kill(i int) error {
	return c.signal("Kill", i, syscall.SIGKILL, 10*time.Second)
}

// Stop sends SIGTERM to node i (a graceful shutdown) and waits up to timeout, then
// kills it.
func (c *ProcCluster) Stop(i int, timeout time.Duration) error {
	if err := c.signal("Stop", i, syscall.SIGTERM, timeout); err == nil {
		return nil
	}
	return c.Kill(i)
}

func (c *ProcCluster) signal(op string, i int, sig syscall.Signal, timeout time.Duration) error {
	n, err := c.node(op, i)
	if err != nil {
		return err
	}
	if c.exited(i) {
		return nil
	}
	if err := n.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("jstest: %s(%d): %w", op, i, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-n.done:
		_ = n.stdin.Close()
		return nil
	case <-t.C:
		return fmt.Errorf("jstest: %s(%d): node %d still running after %v", op, i, i+1, timeout)
	}
}

// Restart starts node i again (after Kill or Stop) with its storage and listeners,
// and returns once it answers a JetStream request, within ReadyTimeout.
func (c *ProcCluster) Restart(i int) error {
	if _, err := c.node("Restart", i); err != nil {
		return err
	}
	if !c.exited(i) {
		return fmt.Errorf("jstest: Restart(%d): node %d is running", i, i+1)
	}
	if err := c.start(i); err != nil {
		return err
	}
	return c.waitJetStream(i, time.Now().Add(c.ready))
}

// Isolate cuts node i off from the others (its link to the bridge goes down: packets
// either way are dropped, connections hang as on a real partition); Heal restores it.
// Clients connected inside node i's namespace keep their connection to it. Only in a
// Netns cluster.
func (c *ProcCluster) Isolate(i int) error { return c.link("Isolate", i, false) }

// Heal undoes Isolate.
func (c *ProcCluster) Heal(i int) error { return c.link("Heal", i, true) }

func (c *ProcCluster) link(op string, i int, up bool) error {
	if _, err := c.node(op, i); err != nil {
		return err
	}
	if c.lab == nil {
		return fmt.Errorf("jstest: %s: the cluster was not started with Netns", op)
	}
	return c.lab.setLink(i, up)
}

func (c *ProcCluster) fail(err error) error { return errors.Join(err, c.Shutdown()) }

// Shutdown stops every node (SIGTERM, then SIGKILL after 10 s), removes the network
// namespaces, and the folder if StartProcs made it. It is safe to call twice and on a
// partly started cluster.
func (c *ProcCluster) Shutdown() error {
	var errs []error
	for i := range c.nodes {
		if err := c.Stop(i, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.lab != nil {
		if err := c.lab.close(); err != nil {
			errs = append(errs, err)
		}
		c.lab = nil
	}
	if c.ownDir && c.dir != "" {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("jstest: removing %s: %w", c.dir, err))
		}
		c.dir = ""
	}
	return errors.Join(errs...)
}
