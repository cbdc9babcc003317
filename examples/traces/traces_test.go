package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testdata/trace.json is a real /api/traces/{id} response of Jaeger v1.76.0 for one
// POST /transfers of the bank example whose first commit conflicted and was retried.
func loadSample(t *testing.T) Trace {
	t.Helper()
	f, err := os.Open("testdata/trace.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := DecodeResponse(f)
	if err != nil || len(r.Data) != 1 {
		t.Fatalf("sample: %d traces, %v", len(r.Data), err)
	}
	return r.Data[0]
}

const sampleTree = `trace 16e4e0b951d418fc442d4fd5bac75f74  service bank  9 spans  3.593 ms
POST /transfers  3.593 ms  +0.000 ms  [server] http.request.method=POST http.response.status_code=200 http.route=/transfers
├─ rockline.commit  2.112 ms  +0.046 ms  error.type=conflict rockline.bytes=52 rockline.inline=false rockline.keys=2 rockline.lane=0 rockline.outcome=failed rockline.policy=parallel rockline.reads=2
│  ├─ rockline.lane.wait  1.920 ms  +0.049 ms
│  └─ rockline.validate  0.001 ms  +1.971 ms  error.type=conflict
└─ rockline.commit  0.054 ms  +3.475 ms  rockline.bytes=52 rockline.inline=false rockline.keys=2 rockline.lane=0 rockline.outcome=committed rockline.policy=parallel rockline.position=4513 rockline.reads=2
   ├─ rockline.lane.wait  0.002 ms  +3.478 ms
   ├─ rockline.validate  0.002 ms  +3.487 ms
   ├─ rockline.write  0.034 ms  +3.490 ms  rockline.bytes=52
   └─ rockline.publish  0.000 ms  +3.527 ms  rockline.position=4513
`

func TestRenderSample(t *testing.T) {
	var out bytes.Buffer
	if err := Render(&out, loadSample(t)); err != nil {
		t.Fatal(err)
	}
	if out.String() != sampleTree {
		t.Errorf("render:\n%s\nwant:\n%s", out.String(), sampleTree)
	}
}

// Spans whose parent is not in the trace are shown as roots, not lost.
func TestRenderOrphansAreRoots(t *testing.T) {
	tr := loadSample(t)
	var kept []Span
	for _, s := range tr.Spans {
		if s.Parent() != "" { // drop the HTTP server span: both commits lose their parent
			kept = append(kept, s)
		}
	}
	tr.Spans = kept
	var out bytes.Buffer
	if err := Render(&out, tr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	roots := 0
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "rockline.commit  ") {
			roots++
		}
	}
	if len(lines) != len(kept)+1 || roots != 2 {
		t.Errorf("%d lines for %d spans, %d commit roots; want 2:\n%s", len(lines)-1, len(kept), roots, out.String())
	}
}

// Slowest searches, picks the longest trace and fetches it by id.
func TestSlowestFetchesLongestTrace(t *testing.T) {
	slow := loadSample(t)
	fast := Trace{TraceID: "00000000000000000000000000000001", Spans: []Span{{SpanID: "a", OperationName: "GET /accounts/{id}", StartTime: slow.Spans[0].StartTime, Duration: 10}}}
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.String())
		mu.Unlock()
		switch r.URL.Path {
		case "/api/traces":
			if r.URL.Query().Get("service") != "bank" || r.URL.Query().Get("limit") != "50" {
				http.Error(w, `{"data":null,"errors":[{"code":400,"msg":"bad query"}]}`, http.StatusBadRequest)
				return
			}
			_ = json.NewEncoder(w).Encode(Response{Data: []Trace{fast, slow}})
		case "/api/traces/" + slow.TraceID:
			http.ServeFile(w, r, "testdata/trace.json")
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"data":null,"errors":[{"code":404,"msg":"trace not found"}]}`))
		}
	}))
	defer srv.Close()
	c := Client{BaseURL: srv.URL, HTTP: srv.Client()}
	got, err := c.Slowest(context.Background(), "bank", 50, "1h")
	if err != nil {
		t.Fatal(err)
	}
	if got.TraceID != slow.TraceID || len(got.Spans) != 9 {
		t.Fatalf("got trace %s with %d spans; want %s (9 spans)", got.TraceID, len(got.Spans), slow.TraceID)
	}
	mu.Lock()
	if len(paths) != 2 || !strings.HasPrefix(paths[1], "/api/traces/"+slow.TraceID) {
		t.Errorf("requests %q", paths)
	}
	mu.Unlock()
	if _, err := c.Trace(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), "trace not found") {
		t.Errorf("unknown trace: %v", err)
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"-query", srv.URL, "-service", "bank", "-limit", "50"}, &out)
	if err != nil || out.String() != sampleTree {
		t.Errorf("run: %v\n%s", err, out.String())
	}
}

func TestSlowestNoTraces(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":[],"total":0,"limit":0,"offset":0,"errors":null}`))
	}))
	defer srv.Close()
	_, err := Client{BaseURL: srv.URL, HTTP: srv.Client()}.Slowest(context.Background(), "bank", 10, "")
	if err == nil || !strings.Contains(err.Error(), `no traces of service "bank"`) {
		t.Fatalf("err %v", err)
	}
}
