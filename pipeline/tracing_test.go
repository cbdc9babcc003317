package pipeline_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rockline/rockline/pipeline"
)

// spanTree maps each span's name to its parent's name ("" for a root), for the spans
// of one trace. It fails the test if a name occurs twice.
func spanTree(t *testing.T, spans []sdktrace.ReadOnlySpan) map[string]string {
	t.Helper()
	names := make(map[[8]byte]string)
	for _, s := range spans {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	tree := make(map[string]string)
	for _, s := range spans {
		if _, dup := tree[s.Name()]; dup {
			t.Fatalf("span %s recorded twice", s.Name())
		}
		tree[s.Name()] = names[s.Parent().SpanID()] // "" when the parent is not recorded
	}
	return tree
}

// spanNamed returns the one span called name.
func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no %s span", name)
	return nil
}

// attrs returns a span's attributes as plain values.
func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	m := make(map[string]any)
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// TestSpans checks the span tree of a commit: rockline.commit is a child of the
// caller's span with one child per stage, and carries the policy, key count, lane,
// position and outcome. CommitInline has no ctx parameter, so its commit span is a root,
// and it has no lane stage. A conflict is recorded as error.type=conflict.
func TestSpans(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer tp.Shutdown(context.Background())
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 1, TracerProvider: tp})
			cf := db.Default()
			tracer := tp.Tracer("test")

			// Commit under a parent span.
			ctx, parent := tracer.Start(context.Background(), "parent")
			tx := db.Begin()
			for i := range 3 {
				if err := tx.Put(cf, key("k%d", i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			pos, err := tx.CommitPosition(ctx)
			if err != nil {
				t.Fatal(err)
			}
			parent.End()
			spans := rec.Ended()
			want := map[string]string{
				"parent":             "",
				"rockline.commit":    "parent",
				"rockline.lane.wait": "rockline.commit",
				"rockline.validate":  "rockline.commit",
				"rockline.write":     "rockline.commit",
				"rockline.publish":   "rockline.commit",
			}
			if diff := cmp.Diff(want, spanTree(t, spans)); diff != "" {
				t.Errorf("Commit span tree (-want +got):\n%s", diff)
			}
			commit := spanNamed(t, spans, "rockline.commit")
			if commit.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Error("rockline.commit is not in the caller's trace")
			}
			got := attrs(commit)
			if b, _ := got["rockline.bytes"].(int64); b <= 0 {
				t.Errorf("rockline.bytes = %v, want > 0", got["rockline.bytes"])
			}
			delete(got, "rockline.bytes")
			wantAttrs := map[string]any{
				"rockline.policy":   pol,
				"rockline.inline":   false,
				"rockline.keys":     int64(3),
				"rockline.events":   int64(0),
				"rockline.reads":    int64(0),
				"rockline.lane":     int64(0),
				"rockline.position": int64(pos),
				"rockline.outcome":  "committed",
			}
			if diff := cmp.Diff(wantAttrs, got); diff != "" {
				t.Errorf("rockline.commit attributes (-want +got):\n%s", diff)
			}
			if commit.Status().Code == codes.Error {
				t.Errorf("committed span has status %v", commit.Status())
			}
			if p := attrs(spanNamed(t, spans, "rockline.publish"))["rockline.position"]; p != int64(pos) {
				t.Errorf("rockline.publish position = %v, want %d", p, pos)
			}

			// CommitInline: same stages without the lane.
			rec.Reset()
			tx = db.Begin()
			if err := tx.Put(cf, []byte("sync"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := tx.CommitInline(); err != nil {
				t.Fatal(err)
			}
			spans = rec.Ended()
			want = map[string]string{
				"rockline.commit":   "",
				"rockline.validate": "rockline.commit",
				"rockline.write":    "rockline.commit",
				"rockline.publish":  "rockline.commit",
			}
			if diff := cmp.Diff(want, spanTree(t, spans)); diff != "" {
				t.Errorf("CommitInline span tree (-want +got):\n%s", diff)
			}
			got = attrs(spanNamed(t, spans, "rockline.commit"))
			if _, ok := got["rockline.lane"]; ok {
				t.Errorf("CommitInline span has rockline.lane = %v", got["rockline.lane"])
			}
			if got["rockline.inline"] != true || got["rockline.outcome"] != "committed" || got["rockline.position"] != int64(pos+1) || got["rockline.keys"] != int64(1) {
				t.Errorf("CommitInline attributes = %v", got)
			}

			// A conflict.
			for _, mode := range commitModes {
				t.Run(string(mode)+"/conflict", func(t *testing.T) {
					loser := db.Begin()
					if _, err := loser.Get(cf, []byte("k0")); err != nil {
						t.Fatal(err)
					}
					if err := loser.Put(cf, []byte("k0"), []byte("loser")); err != nil {
						t.Fatal(err)
					}
					put(t, db, cf, "k0", "winner")
					rec.Reset()
					ctx, parent := tracer.Start(context.Background(), "parent")
					var err error
					if mode == viaCommit {
						err = loser.Commit(ctx)
					} else {
						err = loser.CommitInline()
					}
					parent.End()
					if !errors.Is(err, pipeline.ErrConflict) {
						t.Fatalf("commit: %v, want ErrConflict", err)
					}
					spans := rec.Ended()
					want := map[string]string{"parent": "", "rockline.commit": "parent", "rockline.lane.wait": "rockline.commit", "rockline.validate": "rockline.commit"}
					if mode == viaCommitInline {
						want = map[string]string{"parent": "", "rockline.commit": "", "rockline.validate": "rockline.commit"}
					}
					if diff := cmp.Diff(want, spanTree(t, spans)); diff != "" {
						t.Errorf("conflict span tree (-want +got):\n%s", diff)
					}
					commit := spanNamed(t, spans, "rockline.commit")
					got := attrs(commit)
					if got["error.type"] != "conflict" || got["rockline.outcome"] != "failed" {
						t.Errorf("conflict attributes: error.type=%v outcome=%v, want conflict, failed", got["error.type"], got["rockline.outcome"])
					}
					if commit.Status().Code != codes.Error {
						t.Errorf("conflict span status = %v, want Error", commit.Status())
					}
					if v := attrs(spanNamed(t, spans, "rockline.validate"))["error.type"]; v != "conflict" {
						t.Errorf("rockline.validate error.type = %v, want conflict", v)
					}
				})
			}
		})
	}
}

// offered is a sampler that drops every span and remembers the names it was asked about.
type offered struct {
	mu    sync.Mutex
	names []string
}

func (o *offered) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	o.mu.Lock()
	o.names = append(o.names, p.Name)
	o.mu.Unlock()
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (o *offered) Description() string { return "offered" }

// TestUnsampledCommitStartsNoStageSpans: when the commit span is not recorded, its
// stage spans are not even started (a parent-based sampler would drop them anyway),
// so an untraced commit pays for one span, not five.
func TestUnsampledCommitStartsNoStageSpans(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			s := &offered{}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s))
			defer tp.Shutdown(context.Background())
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 1, TracerProvider: tp})
			for _, sync := range []bool{false, true} {
				tx := db.Begin()
				if err := tx.Put(db.Default(), []byte("k"), []byte("v")); err != nil {
					t.Fatal(err)
				}
				var err error
				if sync {
					err = tx.CommitInline()
				} else {
					err = tx.Commit(context.Background())
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if diff := cmp.Diff([]string{"rockline.commit", "rockline.commit"}, s.names); diff != "" {
				t.Errorf("spans offered to the sampler (-want +got):\n%s", diff)
			}
		})
	}
}
