// Command traces prints the slowest recent trace of a service from Jaeger's query API
// as an indented tree, with durations in milliseconds and the key attributes (rockline's,
// error.type, and the HTTP method, route and status).
//
//	go run ./examples/traces -query http://127.0.0.1:16686 -service bank
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "traces:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("traces", flag.ContinueOnError)
	query := fs.String("query", "http://127.0.0.1:16686", "Jaeger query service base URL")
	service := fs.String("service", "bank", "service whose slowest trace is printed")
	limit := fs.Int("limit", 1000, "how many recent traces to search")
	lookback := fs.String("lookback", "1h", "how far back to search (Jaeger lookback, e.g. 1h)")
	timeout := fs.Duration("timeout", 30*time.Second, "timeout of the whole query")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := Client{BaseURL: *query, HTTP: &http.Client{Transport: tr}}
	t, err := c.Slowest(ctx, *service, *limit, *lookback)
	if err != nil {
		return err
	}
	return Render(out, t)
}
