package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jstest"
	"github.com/rockline/rockline/partitioned"
	"github.com/rockline/rockline/pipeline"
)

// The jsbare scenario's sides: each opens, for every worker, an appender of one
// 100-byte event at a time to the worker's own event stream ("worker-<w>"), on the
// worker's own connection to a node of the cluster (round robin), over a run's fresh
// partitions (JetStream streams), and removes those streams when closed.

// Sides of the jsbare scenario.
const (
	sideAPI       = "api"        // eventstore appends on jetstream.OpenDB (partitioned.Store over several)
	sideBare      = "bare"       // the same batches with nats.go, no reads
	sideBareReads = "bare+reads" // the same batches with the engine's two reads before each
	sideBareRead1 = "bare+1read" // the same batches with the head's Direct Get alone before each
)

// jsbareSides are every side; the partitions cells run api and bare only. (The
// stand-ins api-q64 and bare-nocat of the 2026-12-02 run measured two fixes before
// they were made: the engine's small answer channels and no catalog check on the
// event store's family. Both are in the engine now, so api and bare are those sides.)
var jsbareSides = []string{sideAPI, sideBare, sideBareReads, sideBareRead1}

// jsbareEventBytes is the size of each event's data.
const jsbareEventBytes = 100

// openTimeout bounds opening a partition (creating its stream, waiting for it to serve).
const openTimeout = 30 * time.Second

// jsAppend appends the worker's next event, expecting the revision before it.
type jsAppend func(ctx context.Context) error

// jsSide is one side's appenders, one per worker, and what closes them.
type jsSide struct {
	appenders []jsAppend
	conns     []*nats.Conn
	closers   []func() error
	streams   []string // the JetStream streams to delete on close
	// inFlight counts the batches sent again after "subject in flight" (the
	// engine's partitions' Stats.InFlight on the api side).
	inFlight func() uint64
	bare     atomic.Uint64 // the bare side's count
	// fenceWaits counts snapshot reads asked again because the replica answering
	// had not applied the position (Stats.FenceWaits on the api side).
	fenceWaits func() uint64
	bareFence  atomic.Uint64
	parts      []*jetstream.Partition
}

// workerStream is worker w's event stream.
func workerStream(w int) string { return "worker-" + strconv.Itoa(w) }

// workerPartition is partitioned.Config.Partition for worker streams: worker w's
// stream goes to partition w mod partitions, so workers spread evenly.
func workerPartition(stream string, partitions int) int {
	n, err := strconv.Atoi(strings.TrimPrefix(stream, "worker-"))
	if err != nil {
		return 0
	}
	return n % partitions
}

// partitionConfigs are the run's partitions of a side: stream and subject prefix.
func partitionConfigs(side string, run, partitions int) []jetstream.Config {
	name := map[bool]string{true: "API", false: "BARE"}[side == sideAPI]
	var out []jetstream.Config
	for p := range partitions {
		out = append(out, jetstream.Config{
			Stream:  fmt.Sprintf("JS%s_%d_%d", name, run, p),
			Subject: fmt.Sprintf("js%s.%d.%d", strings.ToLower(name), run, p),
		})
	}
	return out
}

// openJSSide opens side's appenders for workers over partitions fresh streams on c;
// run numbers the streams. The api side appends through eventstore.Store on one
// partition and through partitioned.Store (each worker's own, over its own
// connection) on several, when scaling.
func openJSSide(c *jstest.Cluster, side string, run, workers, partitions int, scaling bool) (*jsSide, error) {
	s := &jsSide{}
	s.inFlight = func() uint64 {
		n := s.bare.Load()
		for _, p := range s.parts {
			n += p.Stats().InFlight
		}
		return n
	}
	s.fenceWaits = func() uint64 {
		n := s.bareFence.Load()
		for _, p := range s.parts {
			n += p.Stats().FenceWaits
		}
		return n
	}
	parts := partitionConfigs(side, run, partitions)
	for _, p := range parts {
		s.streams = append(s.streams, p.Stream)
	}
	for w := range workers {
		nc, err := c.Connect(w % len(c.Servers))
		if err != nil {
			return nil, errors.Join(err, s.close())
		}
		s.conns = append(s.conns, nc)
		var app jsAppend
		if side == sideAPI {
			app, err = s.openAPI(nc, parts, w, scaling)
		} else {
			trips := map[string]int{sideBareReads: 2, sideBareRead1: 1}[side]
			app, err = s.openBare(nc, parts, w, trips, w == 0)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s, worker %d: %w", side, w, err), s.close())
		}
		s.appenders = append(s.appenders, app)
	}
	return s, nil
}

// openAPI opens worker w's databases, one per partition, and its appender. Each is
// what jetstream.OpenDB opens (the partition with the event store's codec, under
// pipeline.OpenEngine), opened in its two steps to keep the Partition for its Stats.
func (s *jsSide) openAPI(nc *nats.Conn, parts []jetstream.Config, w int, scaling bool) (jsAppend, error) {
	var dbs []*pipeline.DB
	for _, pc := range parts {
		pc.PositionedValues = eventstore.PositionedValues()
		ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
		p, err := jetstream.Open(ctx, nc, pc)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", pc.Stream, err)
		}
		db, err := pipeline.OpenEngine(jetstream.NewEngine(p), pipeline.Config{})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("opening %s: %w", pc.Stream, err), p.Close())
		}
		s.closers = append(s.closers, db.Close)
		s.parts = append(s.parts, p)
		dbs = append(dbs, db)
	}
	stream, expected := workerStream(w), eventstore.NoStream
	ev := eventstore.Event{Type: "Happened", Data: make([]byte, jsbareEventBytes)}
	next := func(err error, rev uint64) error {
		if err == nil {
			expected = eventstore.Revision(rev)
		}
		return err
	}
	if !scaling {
		es, err := eventstore.New(dbs[0])
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			res, err := es.Append(ctx, stream, expected, ev)
			return next(err, res.NextExpectedRevision)
		}, nil
	}
	ps, err := partitioned.New(dbs, partitioned.Config{Partitions: len(dbs), Partition: workerPartition})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		res, err := ps.Append(ctx, stream, expected, ev)
		return next(err, res.NextExpectedRevision)
	}, nil
}

// openBare opens worker w's bare appender on its partition's stream. The first
// worker creates the streams, with the engine's own Open (the engine's stream
// configuration, and it returns once the stream serves), and closes the partitions
// again: the bare side publishes without the engine.
func (s *jsSide) openBare(nc *nats.Conn, parts []jetstream.Config, w, readTrips int, create bool) (jsAppend, error) {
	if create {
		for _, p := range parts {
			ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
			jp, err := jetstream.Open(ctx, nc, p)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("creating %s: %w", p.Stream, err)
			}
			if err := jp.Close(); err != nil {
				return nil, err
			}
		}
	}
	p := parts[workerPartition(workerStream(w), len(parts))]
	a, err := newBareAppender(nc, p.Stream, p.Subject, workerStream(w), jsbareEventBytes, readTrips, &s.bare, &s.bareFence)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, a.close)
	return func(ctx context.Context) error { return a.append(ctx, jetstream.DefaultPublishTimeout) }, nil
}

// close closes the appenders and their databases, deletes the run's streams and
// closes the connections.
func (s *jsSide) close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	if len(s.conns) > 0 {
		js, err := natsjs.New(s.conns[0])
		errs = append(errs, err)
		for _, name := range s.streams {
			if err != nil {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
			if derr := js.DeleteStream(ctx, name); derr != nil && !errors.Is(derr, natsjs.ErrStreamNotFound) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", name, derr))
			}
			cancel()
		}
	}
	for _, nc := range s.conns {
		nc.Close()
	}
	return errors.Join(errs...)
}
