package jetstream_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rockline/rockline/jetstream/jstest"
)

// The fault schedules of the history test and the clusters they run on: the
// package's embedded cluster for "none" and the cut connections, one cluster of
// child-process nodes (in network namespaces when the test runs as root) shared by
// the stops, SIGKILLs and partitions.

// histEnv is a cluster a schedule runs on.
type histEnv struct {
	nodes   int
	connect func(i int, opts ...nats.Option) (*nats.Conn, error)
	procs   *jstest.ProcCluster // nil for the embedded cluster
	netns   bool
}

// histEnvs starts the process cluster once, for the first schedule that needs it.
type histEnvs struct {
	procs *histEnv
	err   error
}

// The clusters a nemesis needs.
const (
	needsEmbedded = "embedded"
	needsProcs    = "procs"
	needsNetns    = "netns"
)

func (e *histEnvs) get(t *testing.T, needs string) *histEnv {
	t.Helper()
	if needs == needsEmbedded {
		return &histEnv{nodes: len(cluster.Servers), connect: cluster.Connect}
	}
	if e.procs == nil && e.err == nil {
		start := time.Now()
		netns := true
		c, err := jstest.StartProcs(jstest.ProcOptions{Netns: true})
		if errors.Is(err, jstest.ErrNetnsUnavailable) {
			t.Logf("no network namespaces (%v): the partition schedules will be skipped", err)
			netns = false
			c, err = jstest.StartProcs(jstest.ProcOptions{})
		}
		if err != nil {
			e.err = err
		} else {
			e.procs = &histEnv{nodes: c.Nodes(), connect: c.Connect, procs: c, netns: netns}
			t.Logf("%d node processes ready in %v (network namespaces: %v)", c.Nodes(), time.Since(start).Round(time.Millisecond), netns)
		}
	}
	if e.err != nil {
		t.Fatalf("starting the process cluster: %v", e.err)
	}
	if needs == needsNetns && !e.procs.netns {
		t.Skip("skipped: this schedule needs network namespaces (Linux, root, the ip command)")
	}
	return e.procs
}

func (e *histEnvs) shutdown() {
	if e.procs != nil {
		_ = e.procs.procs.Shutdown()
	}
}

// nemesis is a fault schedule: fault starts the fault on a run whose load is going
// and returns how to end it; clientOpts, when set, adds options to each client's
// connection.
type nemesis struct {
	name       string
	needs      string
	clientOpts func(r *histRun, client int) []nats.Option
	fault      func(r *histRun, seed uint64) (heal func() error)
}

func nemeses() []nemesis {
	noOpts := func(*histRun, int) []nats.Option { return nil }
	node := func(r *histRun, op func(int) error, i int) {
		if err := op(i); err != nil {
			r.t.Fatalf("node %d: %v", i+1, err)
		}
	}
	return []nemesis{
		{name: "none", needs: needsEmbedded, clientOpts: noOpts, fault: func(*histRun, uint64) func() error {
			return func() error { return nil }
		}},
		{name: "conn-cut", needs: needsEmbedded, clientOpts: cutOpts, fault: cutConnections},
		{name: "leader-stop", needs: needsProcs, clientOpts: noOpts, fault: func(r *histRun, _ uint64) func() error {
			node(r, func(i int) error { return r.env.procs.Stop(i, 10*time.Second) }, r.leader)
			return func() error { return r.env.procs.Restart(r.leader) }
		}},
		{name: "leader-kill", needs: needsProcs, clientOpts: noOpts, fault: func(r *histRun, _ uint64) func() error {
			node(r, r.env.procs.Kill, r.leader)
			return func() error { return r.env.procs.Restart(r.leader) }
		}},
		{name: "follower-kill", needs: needsProcs, clientOpts: noOpts, fault: func(r *histRun, _ uint64) func() error {
			f := (r.leader + 1) % r.env.nodes
			node(r, r.env.procs.Kill, f)
			return func() error { return r.env.procs.Restart(f) }
		}},
		{name: "kill-all", needs: needsProcs, clientOpts: noOpts, fault: func(r *histRun, _ uint64) func() error {
			for i := range r.env.nodes {
				node(r, r.env.procs.Kill, i)
			}
			return func() error { return restartAll(r.env.procs) }
		}},
		{name: "partition-leader", needs: needsNetns, clientOpts: noOpts, fault: func(r *histRun, _ uint64) func() error {
			node(r, r.env.procs.Isolate, r.leader)
			return func() error { return r.env.procs.Heal(r.leader) }
		}},
		{name: "partition-follower", needs: needsNetns, clientOpts: noOpts, fault: func(r *histRun, _ uint64) func() error {
			f := (r.leader + 1) % r.env.nodes
			node(r, r.env.procs.Isolate, f)
			return func() error { return r.env.procs.Heal(f) }
		}},
	}
}

// restartAll restarts every node at once: one alone cannot answer until a quorum
// elects a meta leader, which Restart waits for.
func restartAll(c *jstest.ProcCluster) error {
	errs := make([]error, c.Nodes())
	var wg sync.WaitGroup
	for i := range c.Nodes() {
		wg.Go(func() { errs[i] = c.Restart(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cutters holds each run's dialers that cut a connection right after it sent a
// commit.
var cutters sync.Map // *histRun -> []*cutAfterCommit

func cutOpts(r *histRun, client int) []nats.Option {
	d := &cutAfterCommit{}
	v, loaded := cutters.LoadOrStore(r, &[]*cutAfterCommit{})
	if !loaded {
		r.t.Cleanup(func() { cutters.Delete(r) })
	}
	ds := v.(*[]*cutAfterCommit)
	*ds = append(*ds, d)
	return []nats.Option{nats.SetCustomDialer(d)}
}

// cutConnections cuts a drawn client's connection right after it sends a commit,
// again and again (each cut once the previous one happened, 100 ms apart), until
// healed.
func cutConnections(r *histRun, seed uint64) func() error {
	v, ok := cutters.Load(r)
	if !ok {
		r.t.Fatal("conn-cut: no client has a cutting dialer")
	}
	ds := *v.(*[]*cutAfterCommit)
	rng := rand.New(rand.NewPCG(seed, 2))
	stop, done := make(chan struct{}), make(chan struct{})
	cuts := 0
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var armed *cutAfterCommit
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if armed != nil && armed.armed.Load() {
				continue // not sent a commit yet
			}
			if armed != nil {
				cuts++
			}
			armed = ds[rng.IntN(len(ds))]
			armed.armed.Store(true)
		}
	}()
	return func() error {
		close(stop)
		<-done
		for _, d := range ds {
			d.armed.Store(false)
		}
		r.t.Logf("conn-cut: %d connections cut right after sending a commit", cuts)
		return nil
	}
}
