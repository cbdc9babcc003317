package pipelinefx_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/pipeline/pipelinefx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func settings(t *testing.T, cfg pipeline.Config) fx.Option {
	return fx.Supply(pipelinefx.Settings{Dir: filepath.Join(t.TempDir(), "db"), Config: cfg})
}

func commitOne(t *testing.T, db *pipeline.DB) {
	t.Helper()
	err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
		return tx.Put(db.Default(), []byte("k"), []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStartCommitStop(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var db *pipeline.DB
	app := fxtest.New(t,
		settings(t, pipeline.Config{}),
		fx.Supply(fx.Annotate(tp, fx.As(new(trace.TracerProvider)))),
		pipelinefx.Module,
		fx.Populate(&db),
	)
	app.RequireStart()
	commitOne(t, db)
	if db.LastPosition() != 1 {
		t.Fatalf("LastPosition = %d; want 1", db.LastPosition())
	}
	app.RequireStop()
	if err := db.Update(context.Background(), func(tx *pipeline.Txn) error { return nil }); !errors.Is(err, pipeline.ErrClosed) {
		t.Fatalf("Update after stop = %v; want ErrClosed", err)
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if len(names) == 0 || names[len(names)-1] != "rockline.commit" {
		t.Fatalf("spans from the provided TracerProvider = %v; want rockline.commit last", names)
	}
}

// Without a provider in the graph the database falls back to otel's global one.
func TestMissingProviderFallsBackToGlobal(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)
	var db *pipeline.DB
	app := fxtest.New(t, settings(t, pipeline.Config{}), pipelinefx.Module, fx.Populate(&db))
	app.RequireStart()
	commitOne(t, db)
	app.RequireStop()
	if len(rec.Ended()) == 0 {
		t.Fatal("no span reached the global provider")
	}
}

func TestBadConfigFailsStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	app := fx.New(
		fx.NopLogger,
		fx.Supply(pipelinefx.Settings{Dir: dir, Config: pipeline.Config{Lanes: 65}}),
		pipelinefx.Module,
		fx.Invoke(func(*pipeline.DB) {}),
	)
	err := app.Start(context.Background())
	var ce *pipeline.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Lanes" || !errors.Is(err, pipeline.ErrInvalidConfig) {
		t.Fatalf("Start = %v; want a *pipeline.ConfigError naming Lanes", err)
	}
}

func TestValidateApp(t *testing.T) {
	err := fx.ValidateApp(settings(t, pipeline.Config{}), pipelinefx.Module, fx.Invoke(func(*pipeline.DB) {}))
	if err != nil {
		t.Fatal(err)
	}
}
