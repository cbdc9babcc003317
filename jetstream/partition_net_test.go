package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jstest"
)

// The stream leader is cut off from the other two nodes (each node in its own
// network namespace, the leader's link to the bridge down) while writers commit on
// both sides: commits through the old leader, the minority, fail with a typed error
// and none is acknowledged; the majority elects a leader and commits resume there;
// after healing nothing acknowledged is lost or duplicated, the old leader takes
// writes again and, with the load paused, catches up.
func TestLeaderNetworkPartition(t *testing.T) {
	c := procCluster(t, jstest.ProcOptions{Netns: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	conn := func(i int) *nats.Conn {
		t.Helper()
		nc, err := c.Connect(i, nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	const stream = "RL_failover_partition"
	cfg := jetstream.Config{Stream: stream, Subject: "rl.failover.partition", PublishTimeout: time.Second}
	nc0 := conn(0)
	openRetry(t, nc0, cfg, 30*time.Second)
	var leader string
	pollInfo(t, nc0, stream, "a stream leader", 20*time.Second, leaderIs(func(n string) bool { leader = n; return true }))
	old := nodeIndex(leader)
	var majority []int
	for i := range c.Nodes() {
		if i != old {
			majority = append(majority, i)
		}
	}
	watch := conn(majority[0])
	l := newFaultLoad(t, ctx)
	var writers []string
	for _, s := range majority {
		name := fmt.Sprintf("n%d-w", s+1)
		l.add(name, openOn(t, conn(s), cfg))
		// A writer that reads before every commit, as transactions do: its reads
		// (Direct Gets, served by any replica) must not wait on the cut-off one.
		reader := fmt.Sprintf("n%d-rw", s+1)
		l.addReading(reader, openOn(t, conn(s), cfg))
		writers = append(writers, name, reader)
	}
	// The minority writer gives up on a commit quickly: its outcome cannot be
	// resolved while the old leader is cut off.
	mcfg := cfg
	mcfg.PublishTimeout, mcfg.ResolveTimeout = 500*time.Millisecond, time.Second
	minority := fmt.Sprintf("n%d-minority", old+1)
	l.add(minority, openOn(t, conn(old), mcfg))
	checker := openOn(t, conn(majority[1]), cfg)
	f := follow(t, openOn(t, watch, cfg))
	l.waitAcks("before the partition", phaseAcks(), 30*time.Second, append(writers, minority)...)

	cutStart := time.Now()
	if err := c.Isolate(old); err != nil {
		t.Fatal(err)
	}
	// Commits acknowledged while the ip command ran were proposed before the cut;
	// from here on the old leader reaches no one.
	cutAt := time.Now()
	toLeader := pollInfo(t, watch, stream, "a leader on the majority side", 60*time.Second, leaderIs(func(n string) bool { return n != leader })) + cutAt.Sub(cutStart)
	leaderAt := cutStart.Add(toLeader)
	l.waitAcks("on the majority side", phaseAcks(), 60*time.Second, writers...)
	resumed := l.firstAckAfter(cutAt, writers...)
	// The majority's rate from 2 s after the election, over a window of 2 s, against
	// its rate in the 2 s before the cut: a writer stalled on reads sent to the cut-off
	// replica shows as a rate near zero.
	window := 2 * time.Second
	if wait := time.Until(leaderAt.Add(2*time.Second + window)); wait > 0 {
		tm := time.NewTimer(wait) // a measurement window, not a synchronisation
		<-tm.C
	}
	before := l.acksBetween(cutStart.Add(-window), cutStart, writers...)
	after := l.acksBetween(leaderAt.Add(2*time.Second), leaderAt.Add(2*time.Second+window), writers...)
	t.Logf("figures: majority acks in the 2 s before the cut %d, in the 2 s from 2 s after the new leader %d (%.2fx)", before, after, float64(after)/float64(max(before, 1)))
	if after == 0 {
		t.Errorf("the majority side acknowledged nothing in the 2 s from 2 s after its new leader was elected (before the cut: %d in 2 s)", before)
	}
	// Let the minority writer see a commit that started after the cut fail. Only one
	// is certain: once the old leader steps down, the writer's reads (its position
	// and version) fail before it can start another commit, and how many it starts
	// before that depends on when the step-down comes (a run here saw one in 30 s
	// while the 2-commit wait it had before passed on other runs).
	minorityFailed := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, o := range l.outcomes {
			if o.writer == minority && o.start.After(cutAt) && o.err != nil {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); minorityFailed() < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the minority writer saw %d failed commits in 30 s", minorityFailed())
		}
		tm := time.NewTimer(10 * time.Millisecond)
		<-tm.C
	}
	healAt := time.Now()
	if err := c.Heal(old); err != nil {
		t.Fatal(err)
	}
	partitioned := healAt.Sub(cutStart)
	t.Logf("cut at %s, healed at %s", cutAt.Format("15:04:05.000"), healAt.Format("15:04:05.000"))
	// The old leader catches up with the writers paused: a replica that fsyncs every
	// message behind a leader under a load that saturates both cores may never close
	// its gap, which is the server's pace, not the engine's promise (seen in CI: a lag
	// of 12,877 messages after 90 s under the load). The load is paused only after a
	// first commit through the healed node was acknowledged.
	l.waitAcks("the minority writer after healing", 1, 60*time.Second, minority)
	l.pause(30 * time.Second)
	rejoin := awaitCaughtUp(t, watch, stream, "the old leader current again", replicaCurrent(leader))
	l.resume()
	l.waitAcks("the minority writer after healing", 5, 60*time.Second, minority)
	minorityBack := l.firstAckAfter(healAt, minority)
	l.waitAcks("after healing", phaseAcks(), 30*time.Second, writers...)
	l.halt()

	// No commit through the old leader that started after the cut and ended before
	// the heal was acknowledged, and each failed with a typed error.
	l.mu.Lock()
	var minorityErrs []string
	for _, o := range l.outcomes {
		if o.writer != minority || !o.start.After(cutAt) || !o.end.Before(healAt) {
			continue
		}
		if o.err == nil {
			t.Errorf("commit %s through the cut-off old leader was acknowledged at %d", o.id, o.pos)
		} else if !typedFailure(o.err) {
			t.Errorf("commit %s through the cut-off old leader failed with an untyped error: %v", o.id, o.err)
		}
		minorityErrs = append(minorityErrs, errClass(o.err))
	}
	l.mu.Unlock()
	longestCommit, longestGap := l.pauses()
	fig := l.verify(t, checker, f)
	t.Logf("partition of the stream leader %s from %v for %v: %d acknowledged, %d abort markers, %d of unknown outcome (%d landed); minority outcomes during the cut %v; errors: %s",
		leader, majority, partitioned.Round(time.Millisecond), fig.acked, fig.aborted, fig.unknown, fig.unknownLanded, minorityErrs, l.errorSummary())
	t.Logf("figures: leader on the majority side after %v; first majority ack of a commit started after the cut %v; longest pause without any ack %v; longest commit %v; old leader current %v after healing, its writer's first ack of a commit started after healing %v",
		toLeader.Round(time.Millisecond), resumed.Round(time.Millisecond), longestGap.Round(time.Millisecond), longestCommit.Round(time.Millisecond),
		rejoin.Round(time.Millisecond), minorityBack.Round(time.Millisecond))
}
