package jetstreamfx_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/eventstore/eventstorefx"
	"github.com/rockline/rockline/examples/orders/ordersapp"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jetstreamfx"
	"github.com/rockline/rockline/jetstream/jstest"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/tracing"
)

var cluster *jstest.Cluster

// TestMain starts one embedded 3-node cluster on 127.0.0.1 for the package.
func TestMain(m *testing.M) { os.Exit(jstest.Main(m, jstest.Options{}, &cluster)) }

var seq atomic.Int64

func partition() jetstream.Config {
	n := seq.Add(1)
	return jetstream.Config{Stream: fmt.Sprintf("RL_fx_%d", n), Subject: fmt.Sprintf("rl.fx.%d", n)}
}

// TestStartCommitStop: the module connects to the cluster, opens the partition and
// provides a DB that commits through JetStream with the commit span, on which
// eventstorefx provides the event store; stopping the app closes the DB and its own connection.
func TestStartCommitStop(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var db *pipeline.DB
	var es *eventstore.Store
	app := fxtest.New(t,
		fx.Supply(jetstreamfx.Settings{URL: strings.Join(cluster.URLs(), ","), Partition: partition()}),
		fx.Supply(fx.Annotate(tp, fx.As(new(trace.TracerProvider)))),
		jetstreamfx.Module,
		eventstorefx.Module,
		fx.Populate(&db, &es),
	)
	app.RequireStart()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(db.Default(), []byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	res, err := es.Append(ctx, "order-1", eventstore.NoStream, eventstore.Event{ID: "e1", Type: "placed"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := es.ReadStream(ctx, "order-1", 0, 10)
	if err != nil || len(evs) != 1 || evs[0].ID != "e1" || evs[0].Position != res.Position {
		t.Fatalf("ReadStream = %+v, %v; want e1 at position %d", evs, err, res.Position)
	}
	if db.Policy() != jetstream.EngineName {
		t.Errorf("Policy = %q, want %q", db.Policy(), jetstream.EngineName)
	}
	app.RequireStop()
	if err := db.Update(ctx, func(*pipeline.Txn) error { return nil }); !errors.Is(err, pipeline.ErrClosed) {
		t.Fatalf("Update after stop = %v; want ErrClosed", err)
	}
	var commits int
	for _, s := range rec.Ended() {
		if s.Name() != tracing.SpanCommit {
			continue
		}
		commits++
		for _, a := range s.Attributes() {
			if a.Key == tracing.AttrPolicy && a.Value.AsString() != jetstream.EngineName {
				t.Errorf("commit span policy %q, want %q", a.Value.AsString(), jetstream.EngineName)
			}
		}
	}
	if commits != 2 {
		t.Errorf("%d rockline.commit spans, want 2 (the Update and the Append)", commits)
	}
}

// TestUsesTheGraphsConnection: a *nats.Conn in the graph is used and left open.
func TestUsesTheGraphsConnection(t *testing.T) {
	nc, err := cluster.Connect(1)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var db *pipeline.DB
	app := fxtest.New(t,
		fx.Supply(jetstreamfx.Settings{Partition: partition()}),
		fx.Supply(nc),
		jetstreamfx.Module,
		fx.Populate(&db),
	)
	app.RequireStart()
	if _, err := db.CreateColumnFamily("orders"); err != nil {
		t.Fatal(err)
	}
	app.RequireStop()
	if nc.IsClosed() {
		t.Error("the graph's connection was closed by the module")
	}
}

// TestBadSettingsFailStart: bad settings fail the start with a typed error naming the
// field, and nothing is left open.
func TestBadSettingsFailStart(t *testing.T) {
	bad := partition()
	bad.Replicas = 7
	for _, tc := range []struct {
		name  string
		s     jetstreamfx.Settings
		field string
	}{
		{"no URL", jetstreamfx.Settings{Partition: partition()}, "URL"},
		{"negative timeout", jetstreamfx.Settings{URL: cluster.URLs()[0], OpenTimeout: -time.Second}, "OpenTimeout"},
		{"bad partition", jetstreamfx.Settings{URL: cluster.URLs()[0], Partition: bad}, "Replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := fx.New(fx.Supply(tc.s), jetstreamfx.Module, fx.Invoke(func(*pipeline.DB) {}), fx.NopLogger)
			var ce *pipeline.ConfigError
			if err := app.Err(); !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("start = %v; want a *ConfigError for %s", err, tc.field)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		app := fx.New(fx.Supply(jetstreamfx.Settings{URL: "nats://127.0.0.1:1", Partition: partition(), OpenTimeout: time.Second}),
			jetstreamfx.Module, fx.Invoke(func(*pipeline.DB) {}), fx.NopLogger)
		if err := app.Err(); !errors.Is(err, nats.ErrNoServers) {
			t.Fatalf("start = %v; want nats.ErrNoServers", err)
		}
	})
}

// TestOrdersExample runs the orders example's service (examples/orders/ordersapp,
// which make demo-cluster runs) on a DB from the module: its own checks (the rules,
// a stale append refused, the projection matching the streams) hold on JetStream.
func TestOrdersExample(t *testing.T) {
	var db *pipeline.DB
	app := fxtest.New(t,
		fx.Supply(jetstreamfx.Settings{URL: strings.Join(cluster.URLs(), ","), Partition: partition()}),
		jetstreamfx.Module,
		fx.Populate(&db),
	)
	app.RequireStart()
	defer app.RequireStop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := ordersapp.Run(ctx, db, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "projection matches the streams: true") {
		t.Fatalf("output:\n%s", out.String())
	}
}
