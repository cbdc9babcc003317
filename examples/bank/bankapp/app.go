package bankapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/rockline/rockline/eventstore/eventstorefx"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/pipeline/pipelinefx"
	"github.com/rockline/rockline/tracing/otelsetup"
)

// Config is what Options needs: where to listen (loopback only), the database folder
// and options, and the telemetry configuration (main reads it with
// otelsetup.ConfigFromEnv).
type Config struct {
	Addr    string
	Dir     string
	DB      pipeline.Config
	Tracing otelsetup.Config
}

// Options is the bank's fx graph: telemetry (providers plus a Prometheus registry), the
// rockline database (pipelinefx.Module, fed the providers) and its event store
// (eventstorefx.Module), the Bank, its Activity read model, the handler and the HTTP
// server. Stop runs in reverse: the server drains, the database closes, then the
// providers flush. A non-loopback Addr fails the app before anything is opened.
func Options(cfg Config) fx.Option {
	if err := CheckLoopback(cfg.Addr); err != nil {
		return fx.Error(err)
	}
	return fx.Options(
		fx.Supply(cfg.Tracing, ServerSettings{Addr: cfg.Addr}, pipelinefx.Settings{Dir: cfg.Dir, Config: cfg.DB}),
		fx.Provide(
			NewTelemetry,
			func(t *Telemetry) trace.TracerProvider { return t.Providers.TracerProvider },
			func(t *Telemetry) metric.MeterProvider { return t.Providers.MeterProvider },
			NewBank,
			NewActivity,
			NewHandler,
			NewServer,
		),
		pipelinefx.Module,
		eventstorefx.Module,
		fx.Invoke(func(*Server) {}),
	)
}

// Telemetry holds the SDK providers and the Prometheus registry their metrics go to.
type Telemetry struct {
	Providers *otelsetup.Providers
	Registry  *prometheus.Registry
}

// NewTelemetry builds the providers with a Prometheus reader on a registry of its own
// (which also serves the Go runtime and process collectors) and shuts them down
// (flushing spans) on stop.
func NewTelemetry(lc fx.Lifecycle, cfg otelsetup.Config) (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's own metrics, beside rockline's.
	if err := errors.Join(reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))); err != nil {
		return nil, err
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	p, err := otelsetup.Setup(context.Background(), cfg, exp)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{OnStop: p.Shutdown})
	return &Telemetry{Providers: p, Registry: reg}, nil
}

// ServerSettings configure the HTTP server.
type ServerSettings struct {
	Addr string // host:port on a loopback address; port 0 picks a free one
}

// Server serves the bank handler and /metrics.
type Server struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// CheckLoopback returns an error unless addr is host:port with a loopback host.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: the bank listens on loopback only (127.0.0.0/8, ::1, localhost)", addr)
	}
	return nil
}

// NewServer builds the server; it listens on start and shuts down gracefully on stop.
func NewServer(lc fx.Lifecycle, s ServerSettings, h http.Handler, t *Telemetry) (*Server, error) {
	if err := CheckLoopback(s.Addr); err != nil {
		return nil, err
	}
	metrics := promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{})
	// Not a second ServeMux: one in front of h would set the request's pattern to "/",
	// and otelhttp would report that as http.route.
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := &Server{srv: &http.Server{Handler: root, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", s.Addr)
			if err != nil {
				return err
			}
			srv.addr = ln.Addr().String()
			go func() {
				defer close(srv.done)
				if err := srv.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					fmt.Println("bank: serve:", err)
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			err := srv.srv.Shutdown(ctx)
			<-srv.done
			return err
		},
	})
	return srv, nil
}

// Addr returns the address the server listens on (after start).
func (s *Server) Addr() string { return s.addr }

// URL returns the server's base URL (after start).
func (s *Server) URL() string { return "http://" + s.addr }
