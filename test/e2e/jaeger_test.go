package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/examples/bank/bankapp"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/tracing/otelsetup"
)

// No goroutine is ignored: the OTLP gRPC exporter closes its connection on Shutdown,
// the test's HTTP clients close their idle connections, and Jaeger's process is waited
// for in Cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const service = "bank-e2e"

// The bank example exports to a real Jaeger v2 over OTLP/gRPC; Jaeger's query API then
// shows each HTTP server span as the parent of rockline.commit, the commit's stage
// spans under it, and a conflicted-then-retried commit with error.type=conflict.
func TestBankTracesInJaeger(t *testing.T) {
	bin := jaegerBinary(t)
	ports := startJaeger(t, bin)
	query := fmt.Sprintf("http://127.0.0.1:%d", ports.QueryHTTP)

	// The workload, in-process.
	prov, err := otelsetup.Setup(context.Background(), otelsetup.Config{
		ServiceName:    service,
		TracesExporter: otelsetup.ExporterOTLP,
		Protocol:       otelsetup.ProtocolGRPC,
		Endpoint:       fmt.Sprintf("http://127.0.0.1:%d", ports.OTLPGRPC),
	})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	db, err := pipeline.Open(t.TempDir(), testhooks.With(pipeline.Config{
		TracerProvider: prov.TracerProvider,
		MeterProvider:  prov.MeterProvider,
	}, &testhooks.Hooks{AfterAdmit: g.hook}))
	if err != nil {
		t.Fatal(err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	bank, err := bankapp.NewBank(db, es)
	if err != nil {
		t.Fatal(err)
	}
	// No Activity projection: its commits would pass the gate's hook too, and this test
	// parks one chosen commit.
	srv := httptest.NewServer(bankapp.NewHandler(bank, nil, prov.TracerProvider, prov.MeterProvider))
	c := srv.Client()
	for _, id := range []string{"a", "b", "c"} {
		mustStatus(t, c, srv.URL+"/accounts", `{"id":"`+id+`","balance":100}`, http.StatusCreated)
	}
	mustStatus(t, c, srv.URL+"/transfers", `{"from":"a","to":"b","amount":10}`, http.StatusOK)

	// The conflict, deterministically: hold a→b at its commit (after it read a and b)
	// until a→c has committed; a→b then conflicts on a, and Update retries it.
	g.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		first <- postStatus(c, srv.URL+"/transfers", `{"from":"a","to":"b","amount":5}`, http.StatusOK)
	}()
	select {
	case <-g.admitted:
	case err := <-first:
		t.Fatalf("transfer a→b finished before its commit was held: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("transfer a→b never reached its commit")
	}
	mustStatus(t, c, srv.URL+"/transfers", `{"from":"a","to":"c","amount":1}`, http.StatusOK)
	close(g.release)
	if err := <-first; err != nil {
		t.Fatalf("conflicting transfer: %v", err)
	}
	if s := bank.Stats(); s.Attempts-s.Transfers != 1 {
		t.Fatalf("bank stats %+v; want exactly one retried attempt", s)
	}

	srv.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := prov.Shutdown(ctx); err != nil { // flushes every span to Jaeger
		t.Fatalf("flush to Jaeger: %v", err)
	}

	// Poll Jaeger until the traces are there and have the expected shape.
	jc := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer jc.CloseIdleConnections()
	poll(t, 30*time.Second, 100*time.Millisecond, func() error { return checkTraces(jc, query) })
}

// checkTraces fetches the service's traces and returns what is missing or wrong.
func checkTraces(c *http.Client, query string) error {
	found, err := getTraces(c, query+"/api/traces?"+url.Values{"service": {service}, "limit": {"100"}, "lookback": {"1h"}}.Encode())
	if err != nil {
		return err
	}
	var transfers []trace
	for _, s := range found {
		tr, err := getTraces(c, query+"/api/traces/"+s.TraceID)
		if err != nil {
			return err
		}
		if len(tr) != 1 {
			return fmt.Errorf("trace %s: %d traces returned", s.TraceID, len(tr))
		}
		if tr[0].root().OperationName == "POST /transfers" {
			transfers = append(transfers, tr[0])
		}
	}
	if len(found) != 6 || len(transfers) != 3 {
		return fmt.Errorf("%d traces, %d of POST /transfers; want 6 (3 opens, 3 transfers)", len(found), len(transfers))
	}
	conflicted := 0
	for _, tr := range transfers {
		if err := checkTransfer(tr); err != nil {
			return fmt.Errorf("trace %s: %w", tr.TraceID, err)
		}
		for _, s := range tr.named("rockline.commit") {
			if s.tag("error.type") == "conflict" {
				conflicted++
			}
		}
	}
	if conflicted != 1 {
		return fmt.Errorf("%d rockline.commit spans with error.type=conflict; want 1", conflicted)
	}
	return nil
}

// checkTransfer checks one transfer's tree: the HTTP server span is the root and the
// parent of every rockline.commit; the commit that succeeded has its four stage spans
// and the policy and position attributes; a conflicted commit is followed by a retry.
func checkTransfer(tr trace) error {
	root := tr.root()
	if root.tag("span.kind") != "server" || root.tag("http.route") != "/transfers" || root.tag("http.response.status_code") != "200" {
		return fmt.Errorf("root span %q has tags %v; want an HTTP server span of /transfers with status 200", root.OperationName, root.Tags)
	}
	commits := tr.named("rockline.commit")
	if len(commits) == 0 {
		return errors.New("no rockline.commit span")
	}
	committed := 0
	for _, s := range commits {
		if s.parent() != root.SpanID {
			return fmt.Errorf("rockline.commit %s has parent %q; want the HTTP server span %s", s.SpanID, s.parent(), root.SpanID)
		}
		if s.tag("rockline.policy") == "" {
			return fmt.Errorf("rockline.commit %s lacks rockline.policy: %v", s.SpanID, s.Tags)
		}
		kids := map[string]bool{}
		for _, k := range tr.children(s.SpanID) {
			kids[k.OperationName] = true
		}
		switch s.tag("error.type") {
		case "":
			committed++
			if s.tag("rockline.position") == "" || s.tag("rockline.outcome") != "committed" {
				return fmt.Errorf("committed rockline.commit %s lacks position or outcome: %v", s.SpanID, s.Tags)
			}
			for _, want := range []string{"rockline.lane.wait", "rockline.validate", "rockline.write", "rockline.publish"} {
				if !kids[want] {
					return fmt.Errorf("rockline.commit %s has children %v; lacks %s", s.SpanID, kids, want)
				}
			}
		case "conflict":
			if !kids["rockline.lane.wait"] || !kids["rockline.validate"] || kids["rockline.write"] {
				return fmt.Errorf("conflicted rockline.commit %s has children %v; want lane.wait and validate, no write", s.SpanID, kids)
			}
		default:
			return fmt.Errorf("rockline.commit %s failed with error.type=%s", s.SpanID, s.tag("error.type"))
		}
	}
	if committed != 1 {
		return fmt.Errorf("%d committed rockline.commit spans; want 1", committed)
	}
	return nil
}

// Jaeger's query API shapes (the part the test reads).
type trace struct {
	TraceID string `json:"traceID"`
	Spans   []span `json:"spans"`
}

type span struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"`
	Tags      []struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"tags"`
}

func (s span) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// tag returns a tag's value as text (strings unquoted), or "".
func (s span) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			var str string
			if json.Unmarshal(t.Value, &str) == nil {
				return str
			}
			return string(t.Value)
		}
	}
	return ""
}

func (t trace) root() span {
	for _, s := range t.Spans {
		if s.parent() == "" {
			return s
		}
	}
	return span{}
}

func (t trace) named(name string) []span {
	var out []span
	for _, s := range t.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

func (t trace) children(id string) []span {
	var out []span
	for _, s := range t.Spans {
		if s.parent() == id {
			out = append(out, s)
		}
	}
	return out
}

func getTraces(c *http.Client, u string) ([]trace, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %.300s", u, resp.StatusCode, body)
	}
	var r struct {
		Data []trace `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return r.Data, nil
}

// jaegerBinary returns ROCKLINE_JAEGER_BIN, skipping the test when it is not there
// unless ROCKLINE_REQUIRE_JAEGER=1.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("ROCKLINE_JAEGER_BIN")
	missing := "ROCKLINE_JAEGER_BIN is not set"
	if bin != "" {
		if st, err := os.Stat(bin); err != nil || st.IsDir() {
			missing = fmt.Sprintf("ROCKLINE_JAEGER_BIN=%s is not a file", bin)
		} else {
			return bin
		}
	}
	if os.Getenv("ROCKLINE_REQUIRE_JAEGER") == "1" {
		t.Fatalf("%s, and ROCKLINE_REQUIRE_JAEGER=1: run `make jaeger` to build the Jaeger v2 binary", missing)
	}
	t.Skipf("%s: run `make jaeger` to build the Jaeger v2 binary, then set ROCKLINE_JAEGER_BIN to it", missing)
	return ""
}

// startJaeger runs the binary on a loopback-only config, waits until its health check
// answers, and stops it (interrupt, then kill after a deadline) in Cleanup. Jaeger's log
// is printed when the test failed.
func startJaeger(t *testing.T, bin string) jaegerPorts {
	t.Helper()
	cfg, ports := writeJaegerConfig(t)
	logPath := filepath.Join(t.TempDir(), "jaeger.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("Jaeger (pid %d) did not stop within 10s of an interrupt; killing it", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("Jaeger log:\n%s", b)
		}
	})

	health := fmt.Sprintf("http://127.0.0.1:%d/status", ports.Health)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: time.Second}
	defer hc.CloseIdleConnections()
	poll(t, 30*time.Second, 100*time.Millisecond, func() error {
		select {
		case <-exited:
			return errStop{fmt.Errorf("Jaeger exited during start-up (%s)", cmd.ProcessState)}
		default:
		}
		resp, err := hc.Get(health)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: status %d", resp.StatusCode)
		}
		return nil
	})
	return ports
}

// errStop ends a poll at once.
type errStop struct{ error }

// poll calls f every interval until it returns nil, and fails the test with f's last
// error once timeout has passed (or at once for an errStop).
func poll(t *testing.T, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		var stop errStop
		if errors.As(err, &stop) {
			t.Fatal(stop.error)
		}
		select {
		case <-deadline.C:
			t.Fatalf("still failing after %s: %v", timeout, err)
		case <-tick.C:
		}
	}
}

// gate holds the first commit admitted while it is armed until release is closed
// (testhooks.Hooks.AfterAdmit runs on the committing goroutine).
type gate struct {
	armed             atomic.Bool
	admitted, release chan struct{}
}

func newGate() *gate { return &gate{admitted: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) hook() {
	if g.armed.CompareAndSwap(true, false) {
		close(g.admitted)
		<-g.release
	}
}

func postStatus(c *http.Client, u, body string, want int) error {
	resp, err := c.Post(u, "application/json", bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s %s: status %d, want %d: %s", u, body, resp.StatusCode, want, b)
	}
	return nil
}

func mustStatus(t *testing.T, c *http.Client, u, body string, want int) {
	t.Helper()
	if err := postStatus(c, u, body, want); err != nil {
		t.Fatal(err)
	}
}
