package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/examples/bank/bankapp"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGraphIsValid(t *testing.T) {
	if err := fx.ValidateApp(bankapp.Options(bankapp.Config{Addr: "127.0.0.1:0", Dir: t.TempDir()}), fx.NopLogger); err != nil {
		t.Fatal(err)
	}
}

func TestServerRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "10.0.0.1:80", "example.com:80"} {
		app := fx.New(bankapp.Options(bankapp.Config{Addr: addr, Dir: t.TempDir()}), fx.NopLogger)
		if err := app.Err(); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("addr %q: err %v; want a loopback-only refusal", addr, err)
		}
	}
}

// The whole graph starts, serves the API and Prometheus metrics, and stops.
func TestAppServesAPIAndMetrics(t *testing.T) {
	var srv *bankapp.Server
	app := fx.New(bankapp.Options(bankapp.Config{Addr: "127.0.0.1:0", Dir: t.TempDir()}), fx.Populate(&srv), fx.NopLogger)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := app.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	if st, _ := do(t, client, "POST", srv.URL()+"/accounts", `{"id":"a","balance":10}`); st != http.StatusCreated {
		t.Fatalf("open: status %d", st)
	}
	st, body := do(t, client, "GET", srv.URL()+"/metrics", "")
	for _, want := range []string{"rockline_commits_total", "http_server_request_duration_seconds",
		"go_goroutines", "process_resident_memory_bytes", "rockline_storage_stall_time_seconds_total",
		"rockline_storage_write_stopped ", "rockline_storage_sst_size_bytes"} {
		if st != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics: status %d, lacks %s", st, want)
		}
	}
	for _, unwanted := range []string{"rockline_conflicts", "write_stopped_ratio"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("/metrics has %s", unwanted)
		}
	}
}

func TestHandlerStatuses(t *testing.T) {
	_, url, client := newBank(t, pipeline.Config{}, true)
	for _, id := range []string{"a", "b"} {
		if st, body := do(t, client, "POST", url+"/accounts", `{"id":"`+id+`","balance":100}`); st != http.StatusCreated {
			t.Fatalf("open %s: %d %s", id, st, body)
		}
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		field, account           string // expected in the JSON error
	}{
		{"open existing", "POST", "/accounts", `{"id":"a","balance":1}`, 409, "", "a"},
		{"open without id", "POST", "/accounts", `{"balance":1}`, 400, "id", ""},
		{"open bad id", "POST", "/accounts", `{"id":"a b","balance":1}`, 400, "id", ""},
		{"open negative balance", "POST", "/accounts", `{"id":"c","balance":-1}`, 400, "balance", ""},
		{"open balance as string", "POST", "/accounts", `{"id":"c","balance":"10"}`, 400, "balance", ""},
		{"open unknown field", "POST", "/accounts", `{"id":"c","balance":1,"owner":"x"}`, 400, "owner", ""},
		{"open malformed JSON", "POST", "/accounts", `{"id":`, 400, "body", ""},
		{"open two objects", "POST", "/accounts", `{"id":"c","balance":1} {}`, 400, "body", ""},
		{"transfer without from", "POST", "/transfers", `{"to":"b","amount":1}`, 400, "from", ""},
		{"transfer to itself", "POST", "/transfers", `{"from":"a","to":"a","amount":1}`, 400, "to", ""},
		{"transfer zero", "POST", "/transfers", `{"from":"a","to":"b","amount":0}`, 400, "amount", ""},
		{"transfer fractional", "POST", "/transfers", `{"from":"a","to":"b","amount":1.5}`, 400, "amount", ""},
		{"transfer from unknown", "POST", "/transfers", `{"from":"x","to":"b","amount":1}`, 404, "", "x"},
		{"transfer to unknown", "POST", "/transfers", `{"from":"a","to":"y","amount":1}`, 404, "", "y"},
		{"transfer too much", "POST", "/transfers", `{"from":"a","to":"b","amount":101}`, 422, "", "a"},
		{"open the largest balance", "POST", "/accounts", `{"id":"rich","balance":9223372036854775807}`, 201, "", ""},
		{"transfer past the largest balance", "POST", "/transfers", `{"from":"a","to":"rich","amount":1}`, 422, "", "rich"},
		{"largest balance unchanged", "GET", "/accounts/rich", "", 200, "", ""},
		{"transfer", "POST", "/transfers", `{"from":"a","to":"b","amount":30}`, 200, "", ""},
		{"balance", "GET", "/accounts/b", "", 200, "", ""},
		{"balance unknown", "GET", "/accounts/nobody", "", 404, "", "nobody"},
		{"activity", "GET", "/accounts/b/activity", "", 200, "", ""},
		{"activity at a bad position", "GET", "/accounts/b/activity?at=first", "", 400, "at", ""},
		{"activity bad id", "GET", "/accounts/a%20b/activity", "", 400, "id", ""},
		{"wrong method", "DELETE", "/accounts/a", "", 405, "", ""},
	}
	for _, tc := range tests {
		st, body := do(t, client, tc.method, url+tc.path, tc.body)
		if st != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, st, tc.status, body)
			continue
		}
		if st < 400 || st == 405 {
			continue
		}
		var e bankapp.ErrorBody
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Field != tc.field || e.Account != tc.account {
			t.Errorf("%s: body %s; want a JSON error with field %q, account %q", tc.name, body, tc.field, tc.account)
		}
	}
	for id, want := range map[string]int64{"a": 70, "b": 130} {
		if st, body := do(t, client, "GET", url+"/accounts/"+id, ""); st != 200 || body != `{"id":"`+id+`","balance":`+itoa(want)+"}\n" {
			t.Errorf("GET %s: %d %s; want balance %d", id, st, body, want)
		}
	}
}

// gate holds the first commit that is admitted while it is armed, until released: the
// deterministic way to make another transaction commit in between.
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

// conflictingTransfer runs a→b 10 and holds its commit while a→c 1 commits, so the
// first conflicts on a. It returns the first transfer's status.
func conflictingTransfer(t *testing.T, g *gate, url string, client *http.Client) int {
	t.Helper()
	g.armed.Store(true)
	first := make(chan int, 1)
	go func() {
		st, _ := do(t, client, "POST", url+"/transfers", `{"from":"a","to":"b","amount":10}`)
		first <- st
	}()
	select {
	case <-g.admitted:
	case <-time.After(10 * time.Second):
		t.Fatal("first transfer never reached its commit")
	}
	if st, body := do(t, client, "POST", url+"/transfers", `{"from":"a","to":"c","amount":1}`); st != 200 {
		t.Errorf("second transfer: %d %s", st, body)
	}
	close(g.release)
	return <-first
}

func TestConflictRetried(t *testing.T) {
	g := newGate()
	bank, url, client := newBank(t, testhooks.With(pipeline.Config{}, &testhooks.Hooks{AfterAdmit: g.hook}), false)
	openAll(t, url, client, "a", "b", "c")
	if st := conflictingTransfer(t, g, url, client); st != 200 {
		t.Fatalf("conflicting transfer: status %d; want 200 after a retry", st)
	}
	if s := bank.Stats(); s.Attempts-s.Transfers != 1 {
		t.Errorf("stats %+v; want exactly one retried attempt", s)
	}
	checkBalances(t, bank, map[string]int64{"a": 89, "b": 110, "c": 101})
}

func TestConflictExhaustingRetriesIs409(t *testing.T) {
	g := newGate()
	bank, url, client := newBank(t, testhooks.With(pipeline.Config{MaxAttempts: 1}, &testhooks.Hooks{AfterAdmit: g.hook}), false)
	openAll(t, url, client, "a", "b", "c")
	if st := conflictingTransfer(t, g, url, client); st != http.StatusConflict {
		t.Fatalf("conflicting transfer: status %d; want 409", st)
	}
	checkBalances(t, bank, map[string]int64{"a": 99, "b": 100, "c": 101})
}

// Concurrent transfers over real HTTP (the -load code, bounded by count) keep the
// total.
func TestConcurrentTransfersConserveMoney(t *testing.T) {
	bank, url, client := newBank(t, pipeline.Config{}, true)
	rep, err := bankapp.RunLoad(context.Background(), url, bank, bankapp.LoadOptions{
		Duration: time.Minute, MaxRequests: 600, Accounts: 6, OpeningBalance: 300, Workers: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Transfers != 600 || rep.Failed != 0 || rep.OK == 0 || !rep.Conserved() || rep.TotalAfter != 6*300 {
		t.Fatalf("report %+v", rep)
	}
	if n, sum, err := bank.Total(); err != nil || n != 6 || sum != 1800 {
		t.Fatalf("total %d accounts, %d money, %v", n, sum, err)
	}
	t.Logf("%s", rep)

	// The activity read model, read once it reflects every transfer: every transfer
	// counted once out and once in, as much money received as sent.
	var out, in, sent, received int64
	at := bank.DB().LastPosition()
	for i := range 6 {
		id := fmt.Sprintf("acct-%03d", i) // RunLoad's account names
		st, body := do(t, client, "GET", url+"/accounts/"+id+"/activity?at="+itoa(int64(at)), "")
		if st != http.StatusOK {
			t.Fatalf("activity of %s: %d %s", id, st, body)
		}
		var acc bankapp.AccountActivity
		if err := json.Unmarshal([]byte(body), &acc); err != nil {
			t.Fatal(err)
		}
		out, in, sent, received = out+acc.Out, in+acc.In, sent+acc.Sent, received+acc.Received
	}
	if out != int64(rep.OK) || in != out || sent != received || sent == 0 {
		t.Errorf("read model: %d transfers out, %d in, %d sent, %d received; want %d each way and sent = received", out, in, sent, received, rep.OK)
	}
}

// newBank serves a bank on a fresh database; withActivity also runs its read model
// (tests that park a chosen commit leave it out: its commits would be parked too).
func newBank(t *testing.T, cfg pipeline.Config, withActivity bool) (*bankapp.Bank, string, *http.Client) {
	t.Helper()
	db, err := pipeline.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	bank, err := bankapp.NewBank(db, es)
	if err != nil {
		t.Fatal(err)
	}
	var activity *bankapp.Activity
	if withActivity {
		if activity, err = bankapp.StartActivity(db, es); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := activity.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	srv := httptest.NewServer(bankapp.NewHandler(bank, activity, tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()))
	t.Cleanup(srv.Close) // runs before the projection and db close: handlers are done first
	return bank, srv.URL, srv.Client()
}

func openAll(t *testing.T, url string, client *http.Client, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if st, body := do(t, client, "POST", url+"/accounts", `{"id":"`+id+`","balance":100}`); st != http.StatusCreated {
			t.Fatalf("open %s: %d %s", id, st, body)
		}
	}
}

func checkBalances(t *testing.T, bank *bankapp.Bank, want map[string]int64) {
	t.Helper()
	for id, w := range want {
		if got, err := bank.Balance(id); err != nil || got != w {
			t.Errorf("balance of %s = %d, %v; want %d", id, got, err, w)
		}
	}
}

func do(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

// TestCorruptBalanceIsAnError: a stored balance that is not 8 bytes is an error naming
// the account, from Balance, Total and Transfer alike, never a zero balance.
func TestCorruptBalanceIsAnError(t *testing.T) {
	bank, url, client := newBank(t, pipeline.Config{}, false)
	openAll(t, url, client, "a", "b")
	db := bank.DB()
	cf, err := db.ColumnFamily(bankapp.Family)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(context.Background(), func(tx *pipeline.Txn) error { return tx.Put(cf, []byte("b"), []byte{1, 2, 3}) }); err != nil {
		t.Fatal(err)
	}
	if _, err := bank.Balance("b"); !errors.Is(err, bankapp.ErrCorruptBalance) || !strings.Contains(err.Error(), "b") {
		t.Errorf("Balance of a corrupt account = %v, want ErrCorruptBalance naming b", err)
	}
	if _, _, err := bank.Total(); !errors.Is(err, bankapp.ErrCorruptBalance) {
		t.Errorf("Total over a corrupt account = %v, want ErrCorruptBalance", err)
	}
	if err := bank.Transfer(context.Background(), "a", "b", 1); !errors.Is(err, bankapp.ErrCorruptBalance) {
		t.Errorf("Transfer to a corrupt account = %v, want ErrCorruptBalance", err)
	}
	if bal, err := bank.Balance("a"); err != nil || bal != 100 {
		t.Errorf("the other account after the refused transfer = %d, %v; want 100", bal, err)
	}
}
