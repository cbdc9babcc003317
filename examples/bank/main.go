// Command bank is a small JSON bank on rockline, wired with fx: POST /accounts,
// POST /transfers, GET /accounts/{id}, and Prometheus metrics on /metrics. Traces go
// where the OTEL_* environment says (OTLP once OTEL_EXPORTER_OTLP_ENDPOINT is set, over
// http/protobuf unless OTEL_EXPORTER_OTLP_PROTOCOL=grpc).
//
//	go run ./examples/bank                 # serve on 127.0.0.1:8080 until interrupted
//	go run ./examples/bank -load 5s        # run a load of transfers, print a summary, exit
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.uber.org/fx"

	"github.com/rockline/rockline/examples/bank/bankapp"
	"github.com/rockline/rockline/tracing/otelsetup"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bank:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (loopback only; port 0 picks a free one)")
	dir := flag.String("dir", "", "database folder (default: a temporary folder removed at exit)")
	load := flag.Duration("load", 0, "if > 0: run a load of concurrent transfers for this long, print a summary and exit")
	accounts := flag.Int("accounts", 50, "accounts the load opens and transfers between")
	flag.Parse()
	if err := bankapp.CheckLoopback(*addr); err != nil {
		return err
	}
	if *load > 0 && *accounts < 2 {
		return fmt.Errorf("-accounts must be at least 2, not %d", *accounts)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "rockline-bank-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	tcfg, err := otelsetup.ConfigFromEnv(otelsetup.Config{ServiceName: "bank"})
	if err != nil {
		return err
	}

	var srv *bankapp.Server
	var bank *bankapp.Bank
	var tel *bankapp.Telemetry
	app := fx.New(
		bankapp.Options(bankapp.Config{Addr: *addr, Dir: *dir, Tracing: tcfg}),
		fx.Populate(&srv, &bank, &tel),
		fx.NopLogger,
	)
	if err := app.Err(); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return err
	}
	fmt.Printf("bank: listening on %s (database %s, traces %q)\n", srv.URL(), *dir, tel.Providers.TracesExporter)

	var loadErr error
	if *load > 0 {
		var rep bankapp.LoadReport
		rep, loadErr = bankapp.RunLoad(context.Background(), srv.URL(), bank, bankapp.LoadOptions{Duration: *load, Accounts: *accounts})
		fmt.Print(rep)
		if loadErr == nil && !rep.Conserved() {
			loadErr = fmt.Errorf("money not conserved: %d before, %d after", rep.TotalBefore, rep.TotalAfter)
		}
	} else {
		sig := <-app.Done()
		fmt.Printf("bank: %s, stopping\n", sig)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := app.Stop(stopCtx); err != nil && loadErr == nil {
		return err
	}
	return loadErr
}
