package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/test/history"
)

// The JetStream engine's history test: list-append clients (one DB from OpenDB per
// client, spread over the nodes) run through every fault schedule of
// history_faults_test.go, each followed by recovery and a final read, and the
// history, the log read back and a subscriber from 0 that ran throughout are judged
// by the core's Elle-style checker (test/history). Short form: one run of each
// schedule; ROCKLINE_HISTORY_RUNS=N runs each N times (make crash).

// classifyJS is the engine's Classifier, from Commit's documented errors.
func classifyJS(err error) (history.Outcome, string) {
	switch {
	case err == nil:
		return history.OK, ""
	case errors.Is(err, jetstream.ErrConflict):
		return history.Failed, "conflict"
	case errors.Is(err, jetstream.ErrTimeout):
		return history.Failed, "timeout"
	case errors.Is(err, jetstream.ErrNotSent):
		return history.Failed, "not-sent"
	case errors.Is(err, jetstream.ErrRefused):
		return history.Failed, "refused"
	case errors.Is(err, jetstream.ErrOutcomeUnknown):
		return history.Unknown, "outcome-unknown"
	case errors.Is(err, jetstream.ErrClosed):
		return history.Failed, "closed"
	case errors.Is(err, jetstream.ErrDuplicateEvent):
		return history.Failed, "duplicate-event"
	case errors.Is(err, jetstream.ErrInvalidArgument):
		return history.Failed, "argument"
	}
	return history.Unknown, history.UntypedError
}

// Timeouts of the history's partitions and commits: short, so that faults end
// commits in every way they can (a resolution that runs out, a ctx that ends).
// Half the clients resolve a timed-out commit for histResolve, the others for
// histResolveLong; each commit's ctx ends after 1..histCommitTimeout.
const (
	histClients       = 4
	histCycles        = 2 // faults (each followed by recovery) per run
	histPublish       = time.Second
	histResolve       = 2 * time.Second
	histResolveLong   = 10 * time.Second
	histRead          = 2 * time.Second
	histCommitTimeout = 12 * time.Second
	histHold          = 3 * time.Second // the longest hold of a fault
)

var histSeq atomic.Int64

// histRun is one run of one schedule.
type histRun struct {
	t      *testing.T
	env    *histEnv
	cfg    jetstream.Config
	leader int // the stream leader's node before the current fault
	rec    *history.Recorder
}

func TestJetStreamHistory(t *testing.T) {
	runs := history.Runs(t, 1)
	envs := &histEnvs{}
	t.Cleanup(envs.shutdown)
	type row struct {
		name                string
		counts              map[history.Outcome]int
		classes, kinds, err string
	}
	var table []row
	for _, nm := range nemeses() {
		t.Run(nm.name, func(t *testing.T) {
			env := envs.get(t, nm.needs)
			for run := range runs {
				seed := history.Seed(t) + uint64(run)
				h, res := runHistory(t, env, nm, seed)
				t.Logf("%s run %d, seed %d: %s; outcomes by class %s", nm.name, run+1, seed, res.Summary(), classes(h))
				table = append(table, row{name: nm.name, counts: h.Counts(), classes: classes(h), kinds: fmt.Sprint(res.Kinds())})
				history.Report(t, "jetstream-"+nm.name, seed, h, res)
			}
		})
	}
	for _, r := range table {
		t.Logf("%-20s ok %4d  failed %4d  unknown %4d  anomalies %s  classes %s", r.name, r.counts[history.OK], r.counts[history.Failed], r.counts[history.Unknown], r.kinds, r.classes)
	}
}

// classes counts the history's transactions by error class ("ok" for none).
func classes(h history.History) string {
	n := map[string]int{}
	for _, t := range h {
		c := t.ErrClass
		if c == "" {
			c = string(t.Outcome)
		}
		n[c]++
	}
	var out []string
	for _, c := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s=%d", c, n[c]))
	}
	return strings.Join(out, " ")
}

// runHistory runs the workload on a new stream of env through nm's fault, recovers,
// makes the final read and judges the history.
func runHistory(t *testing.T, env *histEnv, nm nemesis, seed uint64) (history.History, history.Result) {
	n := histSeq.Add(1)
	r := &histRun{t: t, env: env, rec: history.NewRecorder(nil), cfg: jetstream.Config{
		Stream: fmt.Sprintf("RL_hist_%d", n), Subject: fmt.Sprintf("rl.hist.%d", n), Replicas: 3,
		PublishTimeout: histPublish, ResolveTimeout: histResolve, ReadTimeout: histRead,
	}}
	defer history.DumpIfFailed(t, "jetstream-"+nm.name, seed, r.rec)
	admin := r.conn(0)
	openRetry(t, admin, r.cfg, 30*time.Second)
	r.findLeader(admin)

	var dbs []*pipeline.DB
	for c := range histClients {
		nc := r.conn(c%env.nodes, nm.clientOpts(r, c)...)
		cfg := r.cfg
		if c%2 == 1 {
			cfg.ResolveTimeout = histResolveLong
		}
		dbs = append(dbs, r.openDB(nc, cfg))
	}
	f := history.Follow(r.openDB(r.conn((r.leader+1)%env.nodes), r.cfg), 0, nil)
	defer f.Close()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		w := history.Workload{Clients: histClients, Seed: seed, MinCommitTimeout: time.Second, CommitTimeout: histCommitTimeout, Classify: classifyJS}
		history.Run(stop, w, r.rec, func(c int) *pipeline.DB { return dbs[c] })
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	rng := rand.New(rand.NewPCG(seed, 3))
	for cycle := range histCycles {
		r.waitOK(fmt.Sprintf("before fault %d", cycle+1), 20, 60*time.Second)
		r.findLeader(admin)
		heal := nm.fault(r, seed+uint64(cycle))
		hold := time.NewTimer(histHold/3 + time.Duration(rng.Int64N(int64(histHold*2/3))))
		<-hold.C
		if err := heal(); err != nil {
			t.Fatalf("%s: recovering from fault %d: %v", nm.name, cycle+1, err)
		}
		awaitCaughtUp(t, admin, r.cfg.Stream, "every replica current after recovery", allCurrent(env.nodes))
	}
	r.waitOK("after recovery", 20, 60*time.Second)
	close(stop)
	<-done

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := r.openDB(r.conn((r.leader+2)%env.nodes), r.cfg)
	id, _, _ := r.rec.History().Next()
	if err := history.FinalRead(ctx, db, r.rec, r.rec.History().Keys(), id); err != nil {
		t.Fatal(err)
	}
	last := db.LastPosition()
	log, err := history.ReadAll(ctx, db, last)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if rs := f.Restarts(); len(rs) > 0 {
		t.Logf("the subscriber running throughout subscribed again %d times: %v", len(rs), rs)
	}
	h := r.rec.History()
	res, err := history.Judge(h, history.Options{Realtime: true}, log, func(pos uint64) (pipeline.LogEntry, error) {
		return entryRetry(ctx, db, pos)
	}, history.Delivered{Name: "the subscriber running throughout", Seen: f.Seen(), Complete: true})
	if err != nil {
		t.Fatal(err)
	}
	return h, res
}

// entryRetry is db.Entry, asked again while the answering replica has not applied pos
// (ErrPositionUnavailable) until ctx ends: a position acknowledged is behind the
// stream's latest, so only a position that is not there stays unavailable.
func entryRetry(ctx context.Context, db *pipeline.DB, pos uint64) (pipeline.LogEntry, error) {
	for {
		e, err := db.Entry(pos)
		if !errors.Is(err, jetstream.ErrPositionUnavailable) || ctx.Err() != nil {
			return e, err
		}
		retry := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			retry.Stop()
		case <-retry.C:
		}
	}
}

// conn connects to node i, reconnecting quickly and for ever, closed at the end of
// the test.
func (r *histRun) conn(i int, opts ...nats.Option) *nats.Conn {
	r.t.Helper()
	nc, err := r.env.connect(i, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	return nc
}

// findLeader sets r.leader to the stream leader's node, asking through nc.
func (r *histRun) findLeader(nc *nats.Conn) {
	r.t.Helper()
	var leader string
	pollInfo(r.t, nc, r.cfg.Stream, "a stream leader", 30*time.Second, leaderIs(func(s string) bool { leader = s; return true }))
	r.leader = nodeIndex(leader)
}

// openDB opens a DB on the run's stream with cfg through nc (retrying while the
// cluster recovers), closed at the end of the test.
func (r *histRun) openDB(nc *nats.Conn, cfg jetstream.Config) *pipeline.DB {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		db, err := jetstream.OpenDB(ctx, nc, cfg, pipeline.Config{})
		cancel()
		if err == nil {
			r.t.Cleanup(func() { _ = db.Close() })
			return db
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("opening a DB on %s: %v", r.cfg.Stream, err)
		}
		retry := time.NewTimer(100 * time.Millisecond)
		<-retry.C
	}
}

// waitOK waits until n more transactions than now have completed OK, polling every
// 10 ms; it fails the test at the deadline.
func (r *histRun) waitOK(what string, n int, deadline time.Duration) {
	r.t.Helper()
	want := r.rec.Completed(history.OK) + n
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for r.rec.Completed(history.OK) < want {
		if time.Since(start) > deadline {
			r.t.Fatalf("%s: %d transactions OK in %v, want %d more (outcomes by class: %s)", what, r.rec.Completed(history.OK), deadline, n, classes(r.rec.History()))
		}
		<-tick.C
	}
}

// allCurrent is a check that the stream has a leader and every other replica of n
// is current.
func allCurrent(n int) func(*natsjs.StreamInfo) bool {
	return func(info *natsjs.StreamInfo) bool {
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != n-1 {
			return false
		}
		for _, rp := range info.Cluster.Replicas {
			if !rp.Current || rp.Offline {
				return false
			}
		}
		return true
	}
}
