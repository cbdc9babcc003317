package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jstest"
	"github.com/rockline/rockline/pipeline"
)

// The cluster scenario: the same transactions, through the same code (pipeline.DB
// and eventstore.Store), on the local engine and on the JetStream engine with 1 and
// 3 replicas (jetstream.OpenDB on an embedded 3-node cluster on 127.0.0.1, started
// once for the scenario; every run gets a fresh stream), and, for comparison, through
// the JetStream engine's own transactions (jetstream.Partition.Begin, whose appends
// are checked by the event subject's sequence instead of the event store's head
// record). Each commit reads
// one key of the worker's own and writes it back incremented, and appends one event
// of 100 bytes to the worker's stream expecting its revision ("kv+append"); the
// "append" cells only append. Every node, the client and rockline share the machine's
// cores: the JetStream figures are lower bounds for separate machines, where the
// replicas' work and the network round trips run in parallel with the client.

// clusterTxn is the transaction both engines offer the scenario.
type clusterTxn interface {
	get(ctx context.Context, key []byte) ([]byte, error)
	put(key, value []byte) error
	appendEvent(ctx context.Context, stream string, expected eventstore.ExpectedRevision, data []byte) error
	commit(ctx context.Context) error
}

type clusterEngine interface {
	begin(ctx context.Context, worker int) (clusterTxn, error)
	close() error
}

type clusterCell struct {
	workers    int
	appendOnly bool
}

func (c clusterCell) label() string {
	if c.appendOnly {
		return fmt.Sprintf("append, W=%d", c.workers)
	}
	return fmt.Sprintf("kv+append, W=%d", c.workers)
}

var clusterCells = []clusterCell{{1, false}, {8, false}, {1, true}, {8, true}}

var clusterEngines = []string{"rockline", "jetstream-r1", "jetstream-r3", "jetstream-r3-lazysync", "jetstream-r3-partition"}

// clusters are the scenario's two embedded clusters: sync_interval: always (what
// rockline requires, and every engine but one runs on) and nats-server's default
// lazy sync (an fsync every 2 minutes), for jetstream-r3-lazysync, side by side.
type clusters struct{ always, lazy *jstest.Cluster }

// startClusters starts both clusters, their files under dir.
func startClusters(dir string) (clusters, error) {
	always, err := jstest.Start(jstest.Options{Dir: filepath.Join(dir, "always")})
	if err != nil {
		return clusters{}, fmt.Errorf("cluster: %w", err)
	}
	lazy, err := jstest.Start(jstest.Options{Dir: filepath.Join(dir, "lazy"), LazySync: true})
	if err != nil {
		return clusters{}, errors.Join(fmt.Errorf("cluster with lazy sync: %w", err), always.Shutdown())
	}
	return clusters{always, lazy}, nil
}

func (c clusters) shutdown() error { return errors.Join(c.always.Shutdown(), c.lazy.Shutdown()) }

type clusterResult struct {
	Scenario    string  `json:"scenario"`
	Cell        string  `json:"cell"`
	Engine      string  `json:"engine"`
	Round       int     `json:"round"`
	Commits     int64   `json:"commits"`
	CommitsPerS float64 `json:"commits_per_s"`
	Conflicts   int64   `json:"conflicts"`
	Latency     latency `json:"commit_latency"`
	Ratio       float64 `json:"ratio_to_rockline,omitempty"`
	Error       string  `json:"error,omitempty"`
}

func runCluster(cfg *config, progress func(string), emit func(any)) (map[string][]clusterResult, error) {
	dir, err := os.MkdirTemp(cfg.dir, "rockline-bench-cluster-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := startClusters(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.shutdown() }()
	out := map[string][]clusterResult{}
	stream := 0
	for _, cell := range clusterCells {
		for r := 1; r <= cfg.rounds; r++ {
			var round []clusterResult
			for i := range clusterEngines {
				name := clusterEngines[(i+r-1)%len(clusterEngines)]
				stream++
				res := runClusterOnce(cfg, c, name, stream, cell, r)
				round = append(round, res)
				msg := fmt.Sprintf("cluster | %s | %s | round %d/%d | %s commits/s, p50 %s, p99 %s", cell.label(), name, r, cfg.rounds,
					fmtRate(res.CommitsPerS), fmtUS(res.Latency.P50), fmtUS(res.Latency.P99))
				if res.Error != "" {
					msg += ", ERROR: " + res.Error
				}
				progress(msg)
			}
			var base float64
			for _, res := range round {
				if res.Engine == "rockline" && res.Error == "" {
					base = res.CommitsPerS
				}
			}
			for _, res := range round {
				if base > 0 {
					res.Ratio = res.CommitsPerS / base
				}
				emit(res)
				out[cell.label()+"|"+res.Engine] = append(out[cell.label()+"|"+res.Engine], res)
			}
		}
	}
	return out, nil
}

func openClusterEngine(cfg *config, cs clusters, name string, stream, workers int) (clusterEngine, error) {
	c := cs.always
	switch name {
	case "rockline":
		dir, err := os.MkdirTemp(cfg.dir, "rockline-cluster-local-")
		if err != nil {
			return nil, err
		}
		db, err := pipeline.Open(dir, pipeline.Config{})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		l := &localCluster{dir: dir}
		if err := l.add(db); err != nil {
			l.close()
			return nil, err
		}
		return l, nil
	case "jetstream-r1", "jetstream-r3", "jetstream-r3-lazysync":
		replicas := 3
		switch name {
		case "jetstream-r1":
			replicas = 1
		case "jetstream-r3-lazysync":
			c = cs.lazy
		}
		return openJetStreamDBs(c, jetstream.Config{Stream: fmt.Sprintf("BENCH_%d", stream), Subject: fmt.Sprintf("bench.%d", stream), Replicas: replicas}, workers)
	case "jetstream-r3-partition":
		e := &jsCluster{}
		jcfg := jetstream.Config{Stream: fmt.Sprintf("BENCH_%d", stream), Subject: fmt.Sprintf("bench.%d", stream), Replicas: 3}
		for w := range workers {
			nc, err := c.Connect(w % len(c.Servers))
			if err != nil {
				e.close()
				return nil, err
			}
			e.conns = append(e.conns, nc)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			p, err := jetstream.Open(ctx, nc, jcfg)
			cancel()
			if err != nil {
				e.close()
				return nil, err
			}
			e.parts = append(e.parts, p)
		}
		return e, nil
	}
	return nil, fmt.Errorf("unknown cluster engine %q", name)
}

func runClusterOnce(cfg *config, c clusters, name string, stream int, cell clusterCell, round int) (res clusterResult) {
	res = clusterResult{Scenario: "cluster", Cell: cell.label(), Engine: name, Round: round}
	eng, err := openClusterEngine(cfg, c, name, stream, cell.workers)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() {
		if err := eng.close(); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+cfg.runTimeout)
	defer cancel()
	deadline := time.Now().Add(cfg.duration)
	hists := make([]hist, cell.workers)
	var commits, conflicts atomic.Int64
	errs := make([]error, cell.workers)
	data := make([]byte, 100)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cell.workers {
		wg.Go(func() { // ends at the deadline or on the first error
			key := fmt.Appendf(nil, "w%d", w)
			stream := fmt.Sprintf("worker-%d", w)
			expected := eventstore.NoStream
			for n := uint64(0); time.Now().Before(deadline); {
				t0 := time.Now()
				tx, err := eng.begin(ctx, w)
				if err == nil && !cell.appendOnly {
					var v []byte
					if v, err = tx.get(ctx, key); err == nil {
						err = tx.put(key, fmt.Appendf(nil, "%d", len(v)+1))
					}
				}
				if err == nil {
					err = tx.appendEvent(ctx, stream, expected, data)
				}
				if err == nil {
					err = tx.commit(ctx)
				}
				if errors.Is(err, pipeline.ErrConflict) {
					conflicts.Add(1)
					continue
				}
				if err != nil {
					errs[w] = err
					return
				}
				hists[w].add(time.Since(t0))
				commits.Add(1)
				expected = eventstore.Revision(n)
				n++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
		return res
	}
	var h hist
	for i := range hists {
		h.merge(&hists[i])
	}
	res.Commits, res.Conflicts = commits.Load(), conflicts.Load()
	res.CommitsPerS = float64(res.Commits) / elapsed.Seconds()
	res.Latency = h.summary()
	return res
}

// localCluster is a pipeline DB with its event store, one per worker on JetStream
// (each on its own connection to a node, round robin) and one for all on the local
// engine.
type localCluster struct {
	dir   string // the local engine's folder ("" on JetStream)
	dbs   []*pipeline.DB
	cfs   []*pipeline.ColumnFamily
	ess   []*eventstore.Store
	conns []*nats.Conn
}

func (l *localCluster) add(db *pipeline.DB) error {
	l.dbs = append(l.dbs, db)
	cf, err := db.EnsureColumnFamily("kv")
	if err != nil {
		return err
	}
	es, err := eventstore.New(db)
	if err != nil {
		return err
	}
	l.cfs, l.ess = append(l.cfs, cf), append(l.ess, es)
	return nil
}

// openJetStreamDBs opens one DB per worker on the partition jcfg describes.
func openJetStreamDBs(c *jstest.Cluster, jcfg jetstream.Config, workers int) (*localCluster, error) {
	l := &localCluster{}
	for w := range workers {
		nc, err := c.Connect(w % len(c.Servers))
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, nc)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		db, err := jetstream.OpenDB(ctx, nc, jcfg, pipeline.Config{})
		cancel()
		if err == nil {
			err = l.add(db)
		}
		if err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

func (l *localCluster) begin(_ context.Context, worker int) (clusterTxn, error) {
	i := worker % len(l.dbs)
	return &localClusterTxn{cf: l.cfs[i], es: l.ess[i], tx: l.dbs[i].Begin()}, nil
}

func (l *localCluster) close() error {
	var errs []error
	for _, db := range l.dbs {
		errs = append(errs, db.Close())
	}
	for _, nc := range l.conns {
		nc.Close()
	}
	if l.dir != "" {
		errs = append(errs, os.RemoveAll(l.dir))
	}
	return errors.Join(errs...)
}

type localClusterTxn struct {
	cf *pipeline.ColumnFamily
	es *eventstore.Store
	tx *pipeline.Txn
}

func (t *localClusterTxn) get(_ context.Context, key []byte) ([]byte, error) {
	v, err := t.tx.Get(t.cf, key)
	if errors.Is(err, pipeline.ErrNotFound) {
		return nil, nil
	}
	return v, err
}
func (t *localClusterTxn) put(key, value []byte) error { return t.tx.Put(t.cf, key, value) }
func (t *localClusterTxn) appendEvent(_ context.Context, stream string, expected eventstore.ExpectedRevision, data []byte) error {
	return t.es.AppendTxn(t.tx, stream, expected, eventstore.Event{Type: "Happened", Data: data})
}
func (t *localClusterTxn) commit(ctx context.Context) error { return t.tx.Commit(ctx) }

// jsCluster is the JetStream engine: one Partition handle per worker, each on its own
// connection to a node of the cluster (round robin), all on one stream.
type jsCluster struct {
	conns []*nats.Conn
	parts []*jetstream.Partition
}

func (j *jsCluster) begin(ctx context.Context, worker int) (clusterTxn, error) {
	tx, err := j.parts[worker].Begin(ctx)
	if err != nil {
		return nil, err
	}
	return jsClusterTxn{tx}, nil
}

func (j *jsCluster) close() error {
	var errs []error
	for _, p := range j.parts {
		errs = append(errs, p.Close())
	}
	for _, nc := range j.conns {
		nc.Close()
	}
	return errors.Join(errs...)
}

type jsClusterTxn struct{ tx *jetstream.Txn }

func (t jsClusterTxn) get(ctx context.Context, key []byte) ([]byte, error) {
	v, _, err := t.tx.Get(ctx, "kv", key)
	return v, err
}
func (t jsClusterTxn) put(key, value []byte) error { return t.tx.Put("kv", key, value) }
func (t jsClusterTxn) appendEvent(ctx context.Context, stream string, expected eventstore.ExpectedRevision, data []byte) error {
	return t.tx.Append(ctx, stream, expected, pipeline.Event{Type: "Happened", Data: data})
}
func (t jsClusterTxn) commit(ctx context.Context) error {
	_, err := t.tx.Commit(ctx)
	return err
}

// writeClusterTable prints each cell's engines: median commits/s with its range, the
// ratio to rockline in the same round, p50 and p99.
func writeClusterTable(w io.Writer, runs map[string][]clusterResult) {
	fmt.Fprintf(w, "| cell | engine | commits/s median [min–max] | ÷ rockline | p50 | p99 | conflicts |\n|---|---|---|---|---|---|---|\n")
	for _, cell := range clusterCells {
		for _, name := range clusterEngines {
			rs := runs[cell.label()+"|"+name]
			var rates, ratios, p50, p99 []float64
			var conflicts int64
			errs := ""
			for _, r := range rs {
				if r.Error != "" {
					errs = r.Error
					continue
				}
				rates, p50, p99 = append(rates, r.CommitsPerS), append(p50, r.Latency.P50), append(p99, r.Latency.P99)
				if r.Ratio > 0 {
					ratios = append(ratios, r.Ratio)
				}
				conflicts += r.Conflicts
			}
			if len(rates) == 0 {
				fmt.Fprintf(w, "| %s | %s | ERROR: %s | | | | |\n", cell.label(), name, errs)
				continue
			}
			lo, hi := minMax(rates)
			ratio := "—"
			if name != "rockline" && len(ratios) > 0 {
				ratio = fmt.Sprintf("%.3f", median(ratios))
			}
			fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s | %s | %d |\n", cell.label(), name, fmtRate(median(rates)), fmtRate(lo), fmtRate(hi), ratio, fmtUS(median(p50)), fmtUS(median(p99)), conflicts)
		}
	}
	fmt.Fprintf(w, "\nEach commit reads one key of the worker's own and writes it back, and appends one 100-byte event to the worker's stream expecting its revision (kv+append), or only appends (append). rockline: the local engine at its default durability (WAL written, not fsynced per commit); jetstream-r1 and -r3: the same code (pipeline.DB transactions, eventstore.AppendTxn) on jetstream.OpenDB, one DB per worker; jetstream-r3-partition: the JetStream engine's own Partition transactions (the append checked by the event subject's sequence, no head record). JetStream runs on an embedded 3-node cluster on 127.0.0.1 with file storage synced on every write (sync_interval: always, which rockline requires for an acknowledged commit to survive an OS crash or power loss); jetstream-r3-lazysync is jetstream-r3 on a second such cluster at nats-server's default sync (an fsync every 2 minutes); a fresh stream per run with 1 or 3 replicas, each worker on its own connection to a node (round robin). Every node, the client and rockline share this machine's 2 cores, and JetStream's R1 file streams stage each atomic batch in a synced store of their own: read the JetStream figures as lower bounds for separate machines, where replication and network round trips overlap with the client's work.\n")
}
