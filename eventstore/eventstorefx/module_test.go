package eventstorefx_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/eventstore/eventstorefx"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/pipeline/pipelinefx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func settings(t *testing.T) fx.Option {
	return fx.Supply(pipelinefx.Settings{Dir: filepath.Join(t.TempDir(), "db")})
}

// TestProvidesEventStore: the module provides the event store of the database the
// graph holds, usable while the app runs; its streams are in that database, and its
// calls fail with ErrClosed once the database's module closed it on stop.
func TestProvidesEventStore(t *testing.T) {
	var db *pipeline.DB
	var es *eventstore.Store
	app := fxtest.New(t, settings(t), pipelinefx.Module, eventstorefx.Module, fx.Populate(&db, &es))
	app.RequireStart()
	res, err := es.Append(context.Background(), "s", eventstore.NoStream, eventstore.Event{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if es.DB() != db || db.LastPosition() != res.Position {
		t.Errorf("the store appended at %d to another database (last position %d)", res.Position, db.LastPosition())
	}
	app.RequireStop()
	if _, err := es.Append(context.Background(), "s", eventstore.Any, eventstore.Event{Type: "t"}); !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("Append after stop = %v; want ErrClosed", err)
	}
}

// TestSuppliedConfig: a Config supplied to the graph gives the store its indexes.
func TestSuppliedConfig(t *testing.T) {
	var es *eventstore.Store
	cfg := eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex()}}
	app := fxtest.New(t, settings(t), fx.Supply(cfg), pipelinefx.Module, eventstorefx.Module, fx.Populate(&es))
	app.RequireStart()
	defer app.RequireStop()
	if _, err := es.Append(context.Background(), "s", eventstore.NoStream, eventstore.Event{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	got, err := es.ReadIndex(context.Background(), "type", "t", eventstore.Start, eventstore.ToEnd)
	if err != nil || len(got) != 1 {
		t.Errorf("ReadIndex through the provided store = %d events, %v; want 1", len(got), err)
	}
}

// TestNeedsDB: without a module providing the database the graph does not validate.
func TestNeedsDB(t *testing.T) {
	err := fx.ValidateApp(eventstorefx.Module, fx.Invoke(func(*eventstore.Store) {}))
	if err == nil {
		t.Fatal("ValidateApp without a *pipeline.DB succeeded")
	}
}

func TestValidateApp(t *testing.T) {
	err := fx.ValidateApp(settings(t), pipelinefx.Module, eventstorefx.Module, fx.Invoke(func(*eventstore.Store) {}))
	if err != nil {
		t.Fatal(err)
	}
}

// TestClosedDBFailsStart: a database closed before the store is made fails the
// application's start with ErrClosed, named by the module.
func TestClosedDBFailsStart(t *testing.T) {
	db, err := pipeline.Open(filepath.Join(t.TempDir(), "db"), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	app := fx.New(fx.NopLogger, fx.Supply(db), eventstorefx.Module, fx.Invoke(func(*eventstore.Store) {}))
	if err := app.Start(context.Background()); !errors.Is(err, pipeline.ErrClosed) {
		t.Fatalf("Start = %v; want ErrClosed", err)
	}
}
