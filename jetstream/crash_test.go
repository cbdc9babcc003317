package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jstest"
)

// faultRig is a cluster a failover test can stop and restart nodes of.
type faultRig struct {
	how     string // "graceful stop", "SIGKILL"
	nodes   int
	connect func(i int) (*nats.Conn, error)
	fault   func(i int) error
	restart func(i int) error
}

func nodeIndex(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "n%d", &i); err != nil {
		return -1
	}
	return i - 1
}

// runRestartScenario: writers on the two servers that do not lead the stream commit
// while the leader is stopped (rig.fault) and then restarted; a subscriber runs
// throughout. It checks that writes resume, the restarted node becomes current and
// takes writes, and the log holds exactly what was acknowledged; and it reports the
// figures.
func runRestartScenario(t *testing.T, rig faultRig, stream string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	conn := func(i int) *nats.Conn {
		t.Helper()
		nc, err := rig.connect(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	cfg := jetstream.Config{Stream: stream, Subject: "rl.failover." + strings.ToLower(stream), PublishTimeout: time.Second}
	var leader string
	var ncs []*nats.Conn
	for i := range rig.nodes {
		ncs = append(ncs, conn(i))
	}
	openRetry(t, ncs[0], cfg, 30*time.Second)
	pollInfo(t, ncs[0], stream, "a stream leader", 20*time.Second, leaderIs(func(n string) bool { leader = n; return true }))
	victim := nodeIndex(leader)
	var survivors []int
	for i := range rig.nodes {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	watch := ncs[survivors[0]]
	l := newFaultLoad(t, ctx)
	var writers []string
	for _, s := range survivors {
		for w := range 2 {
			name := fmt.Sprintf("n%d-w%d", s+1, w)
			l.add(name, openOn(t, conn(s), cfg))
			writers = append(writers, name)
		}
	}
	checker := openOn(t, ncs[survivors[1]], cfg)
	f := follow(t, openOn(t, watch, cfg))
	l.waitAcks("before the "+rig.how, phaseAcks(), 30*time.Second, writers...)

	faultAt := time.Now()
	if err := rig.fault(victim); err != nil {
		t.Fatal(err)
	}
	faultTook := time.Since(faultAt)
	toLeader := pollInfo(t, watch, stream, "a new stream leader", 30*time.Second, leaderIs(func(n string) bool { return n != leader })) + faultTook
	l.waitAcks("after the "+rig.how, phaseAcks(), 60*time.Second, writers...)
	resumed := l.firstAckAfter(faultAt)

	restartAt := time.Now()
	if err := rig.restart(victim); err != nil {
		t.Fatal(err)
	}
	ready := time.Since(restartAt)
	// As in the partition test, the node catches up with the load paused: its pace
	// behind a saturating load is the server's, not the engine's promise.
	l.pause(30 * time.Second)
	current := awaitCaughtUp(t, watch, stream, "the restarted node current", replicaCurrent(leader)) + ready
	l.resume()
	// Writes through the restarted node too.
	back := fmt.Sprintf("n%d-back", victim+1)
	l.add(back, openOn(t, conn(victim), cfg))
	l.waitAcks("after the restart", phaseAcks(), 30*time.Second, append(writers, back)...)
	l.halt()

	longestCommit, longestGap := l.pauses()
	fig := l.verify(t, checker, f)
	t.Logf("%s of the stream leader %s under load (%d writers on %v): %d acknowledged, %d abort markers, %d of unknown outcome (%d landed); errors: %s",
		rig.how, leader, len(writers), survivors, fig.acked, fig.aborted, fig.unknown, fig.unknownLanded, l.errorSummary())
	t.Logf("figures: stop took %v; new leader after %v; first ack of a commit started after the fault %v; longest pause without any ack %v; longest commit %v; restarted node accepting clients after %v, current after %v",
		faultTook.Round(time.Millisecond), toLeader.Round(time.Millisecond), resumed.Round(time.Millisecond), longestGap.Round(time.Millisecond),
		longestCommit.Round(time.Millisecond), ready.Round(time.Millisecond), current.Round(time.Millisecond))
}

// The stream leader is shut down (in process, as on SIGTERM: it steps down first)
// under load and restarted: nothing acknowledged is lost or duplicated, the
// subscriber sees every commit once, writes resume, the node catches up.
func TestLeaderShutdownUnderLoad(t *testing.T) {
	c, err := jstest.Start(jstest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	runRestartScenario(t, faultRig{
		how:     "graceful stop",
		nodes:   len(c.Servers),
		connect: func(i int) (*nats.Conn, error) { return c.Connect(i) },
		fault: func(i int) error {
			c.Servers[i].Shutdown()
			c.Servers[i].WaitForShutdown()
			return nil
		},
		restart: func(i int) error { return c.Restart(i, 30*time.Second) },
	}, "RL_failover_graceful")
}

// procCluster starts a cluster of child-process nodes, shut down at the end.
func procCluster(t *testing.T, o jstest.ProcOptions) *jstest.ProcCluster {
	t.Helper()
	start := time.Now()
	if d := os.Getenv("ROCKLINE_JSTEST_KEEP"); d != "" && o.Dir == "" {
		// Keep the nodes' storage and logs for a post-mortem.
		dir, err := os.MkdirTemp(d, t.Name()+"-")
		if err != nil {
			t.Fatal(err)
		}
		o.Dir = dir
	}
	c, err := jstest.StartProcs(o)
	if errors.Is(err, jstest.ErrNetnsUnavailable) {
		t.Skipf("skipped: %v (this test needs Linux, root and the ip command for network namespaces)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%d node processes ready in %v (%s)", c.Nodes(), time.Since(start).Round(time.Millisecond), c.Dir())
	return c
}

// The stream leader's process is killed with SIGKILL under load (a crash: no step
// down, no flush) and restarted.
func TestLeaderKillUnderLoad(t *testing.T) {
	c := procCluster(t, jstest.ProcOptions{})
	runRestartScenario(t, faultRig{
		how:     "SIGKILL",
		nodes:   c.Nodes(),
		connect: func(i int) (*nats.Conn, error) { return c.Connect(i, nats.MaxReconnects(-1)) },
		fault:   c.Kill,
		restart: c.Restart,
	}, "RL_failover_kill")
}
