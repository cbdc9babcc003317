package eventstore_test

import (
	"fmt"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// BenchmarkAppend appends one event per commit to one of 16 streams, expecting the
// revision it last wrote: the event store's write path, index records included.
func BenchmarkAppend(b *testing.B) {
	_, es, _ := openStore(b, pipeline.Config{})
	next := make([]eventstore.ExpectedRevision, 16)
	for i := range next {
		next[i] = eventstore.NoStream
	}
	ev := eventstore.Event{ID: "", Type: "happened", Data: make([]byte, 100)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := i % len(next)
		res, err := es.Append(ctx, fmt.Sprintf("stream-%d", s), next[s], ev)
		if err != nil {
			b.Fatal(err)
		}
		next[s] = eventstore.Revision(res.NextExpectedRevision)
	}
}

// BenchmarkReadStream reads a 100-event stream, written ten events per commit, from
// revision 0.
func BenchmarkReadStream(b *testing.B) {
	_, es, _ := openStore(b, pipeline.Config{})
	exp := eventstore.NoStream
	for range 10 {
		evs := make([]eventstore.Event, 10)
		for j := range evs {
			evs[j] = eventstore.Event{Type: "happened", Data: make([]byte, 100)}
		}
		res, err := es.Append(ctx, "s", exp, evs...)
		if err != nil {
			b.Fatal(err)
		}
		exp = eventstore.Revision(res.NextExpectedRevision)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		evs, err := es.ReadStream(ctx, "s", 0, 100)
		if err != nil || len(evs) != 100 {
			b.Fatalf("read %d events, %v", len(evs), err)
		}
	}
}
