package history

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each hand-made history holding one anomaly is flagged with exactly that anomaly's
// kind; the clean ones pass.
func TestCheck(t *testing.T) {
	cases := []struct {
		name     string
		build    func(b *builder)
		realtime bool
		want     map[string]int
	}{
		{name: "clean serial", build: func(b *builder) {
			b.add(1, OK, ap(1, 1))
			b.add(2, OK, r(1, 1), ap(1, 2), ap(2, 3))
			b.add(3, Failed, ap(1, 4))
			b.add(4, Unknown, ap(2, 5))
			b.concurrent(final(5, r(1, 1, 2), r(2, 3)))
		}, realtime: true},
		{name: "clean concurrent", build: func(b *builder) {
			b.concurrent(tx(1, OK, ap(1, 1), r(2)), tx(2, OK, ap(2, 2), r(1, 1)))
			b.concurrent(final(3, r(1, 1), r(2, 2)))
		}, realtime: true},
		{name: "unknown landed whole", build: func(b *builder) {
			b.add(1, Unknown, ap(1, 1), ap(2, 2))
			b.add(2, OK, r(1, 1))
			b.concurrent(final(3, r(1, 1), r(2, 2)))
		}},
		{name: "G0 write cycle", build: func(b *builder) {
			b.concurrent(tx(1, OK, ap(1, 1), ap(2, 2)), tx(2, OK, ap(1, 3), ap(2, 4)))
			b.concurrent(final(3, r(1, 1, 3), r(2, 4, 2)))
		}, want: map[string]int{G0: 1}},
		{name: "G1a aborted read", build: func(b *builder) {
			b.add(1, Failed, ap(1, 1))
			b.add(2, OK, r(1, 1))
		}, want: map[string]int{G1a: 1}},
		{name: "G1b intermediate read", build: func(b *builder) {
			b.concurrent(tx(1, OK, ap(1, 1), ap(1, 2)), tx(2, OK, r(1, 1)))
			b.concurrent(final(3, r(1, 1, 2)))
		}, want: map[string]int{G1b: 1}},
		{name: "G1c circular information flow", build: func(b *builder) {
			b.concurrent(tx(1, OK, ap(1, 1), r(2, 2)), tx(2, OK, ap(2, 2), r(1, 1)))
			b.concurrent(final(3, r(1, 1), r(2, 2)))
		}, want: map[string]int{G1c: 1}},
		{name: "G-single read skew", build: func(b *builder) {
			b.concurrent(tx(1, OK, ap(1, 1), ap(2, 2)), tx(2, OK, r(1), r(2, 2)))
			b.concurrent(final(3, r(1, 1), r(2, 2)))
		}, want: map[string]int{GSingle: 1}},
		{name: "G2 write skew", build: func(b *builder) {
			b.concurrent(tx(1, OK, r(1), ap(2, 1)), tx(2, OK, r(2), ap(1, 2)))
			b.concurrent(final(3, r(1, 2), r(2, 1)))
		}, want: map[string]int{G2: 1}},
		{name: "stale read needs real time", build: func(b *builder) {
			b.add(1, OK, ap(1, 1))
			b.add(2, OK, r(1))
			b.add(3, OK, r(1, 1))
		}, realtime: true, want: map[string]int{GSingle + Realtime: 1}},
		{name: "stale read is serializable", build: func(b *builder) {
			b.add(1, OK, ap(1, 1))
			b.add(2, OK, r(1))
			b.add(3, OK, r(1, 1))
		}},
		{name: "lost acknowledged append", build: func(b *builder) {
			b.add(1, OK, ap(1, 1))
			b.add(2, OK, ap(1, 2))
			b.concurrent(final(3, r(1, 2)))
		}, want: map[string]int{LostAppend: 1}},
		{name: "unknown commit seen then partly lost", build: func(b *builder) {
			b.add(1, Unknown, ap(1, 1), ap(2, 2))
			b.add(2, OK, r(1, 1))
			b.concurrent(final(3, r(1, 1), r(2)))
		}, want: map[string]int{LostAppend: 1}},
		{name: "incompatible orders", build: func(b *builder) {
			b.concurrent(tx(1, OK, ap(1, 1)), tx(2, OK, ap(1, 2)))
			b.add(3, OK, r(1, 1, 2))
			b.add(4, OK, r(1, 2, 1))
		}, want: map[string]int{IncompatibleOrder: 1}},
		{name: "duplicate elements", build: func(b *builder) {
			b.add(1, OK, ap(1, 1))
			b.add(2, OK, r(1, 1, 1))
		}, want: map[string]int{DuplicateElements: 1}},
		{name: "garbage element", build: func(b *builder) {
			b.add(1, OK, ap(1, 1))
			b.add(2, OK, r(1, 1, 99))
		}, want: map[string]int{GarbageRead: 1}},
		{name: "element of another key", build: func(b *builder) {
			b.add(1, OK, ap(2, 1))
			b.add(2, OK, r(1, 1))
		}, want: map[string]int{GarbageRead: 1}},
		{name: "own append not read back", build: func(b *builder) {
			b.add(1, OK, ap(1, 1), r(1))
		}, want: map[string]int{Internal: 1}},
		{name: "untyped commit error", build: func(b *builder) {
			t := b.add(1, Unknown, ap(1, 1))
			t.Err, t.ErrClass = "nats: timeout", UntypedError
		}, want: map[string]int{UntypedError: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{}
			c.build(b)
			res := Check(b.h, Options{Realtime: c.realtime})
			want := c.want
			if want == nil {
				want = map[string]int{}
			}
			if diff := cmp.Diff(want, res.Kinds()); diff != "" {
				t.Errorf("anomaly kinds (-want +got):\n%s\nfound: %v", diff, res.Anomalies)
			}
		})
	}
}

// The cycle reported names its transactions and edge kinds, so a failure explains
// itself.
func TestCheckExplainsCycle(t *testing.T) {
	b := &builder{}
	b.concurrent(tx(1, OK, r(1), ap(2, 1)), tx(2, OK, r(2), ap(1, 2)))
	b.concurrent(final(3, r(1, 2), r(2, 1)))
	res := Check(b.h, Options{})
	if len(res.Anomalies) != 1 {
		t.Fatalf("anomalies %v, want one G2", res.Anomalies)
	}
	got := res.Anomalies[0]
	if want := "T1 -rw(k1)-> T2 -rw(k2)-> T1"; got.Detail != want {
		t.Errorf("detail %q, want %q", got.Detail, want)
	}
	if diff := cmp.Diff([]int{1, 2}, res.Involved()); diff != "" {
		t.Errorf("involved (-want +got):\n%s", diff)
	}
}
