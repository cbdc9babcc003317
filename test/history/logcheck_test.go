package history

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

func entry(pos uint64, kv ...any) pipeline.LogEntry {
	e := pipeline.LogEntry{Position: pos}
	for i := 0; i < len(kv); i += 2 {
		e.Writes = append(e.Writes, pipeline.LogWrite{Family: "default", Generation: 1, Key: KeyName(kv[i].(int)), Value: EncodeList(kv[i+1].([]int64))})
	}
	return e
}

func filler(pos uint64) pipeline.LogEntry { return pipeline.LogEntry{Position: pos, Filler: true} }

func l(vs ...int64) []int64 { return vs }

// logHistory: T1 appends 1 to key 1 at 1, T2 appends 2 to key 1 and 3 to key 2 at 3
// (2 is a filler), T3 failed, T4 unknown.
func logHistory() History {
	return History{
		{ID: 1, Outcome: OK, Pos: 1, Ops: []Op{ap(1, 1)}},
		{ID: 2, Outcome: OK, Pos: 3, Ops: []Op{r(1, 1), ap(1, 2), ap(2, 3)}},
		{ID: 3, Outcome: Failed, Ops: []Op{ap(1, 4)}},
		{ID: 4, Outcome: Unknown, Ops: []Op{ap(2, 5)}},
		{ID: 5, Outcome: OK, Ops: []Op{r(1, 1, 2)}},
	}
}

func cleanLog() []pipeline.LogEntry {
	return []pipeline.LogEntry{entry(1, 1, l(1)), filler(2), entry(3, 1, l(1, 2), 2, l(3)), entry(4, 2, l(3, 5))}
}

func lookup(log []pipeline.LogEntry) func(uint64) (pipeline.LogEntry, error) {
	return func(pos uint64) (pipeline.LogEntry, error) {
		for _, e := range log {
			if e.Position == pos {
				return e, nil
			}
		}
		return pipeline.LogEntry{}, fmt.Errorf("position %d: %w", pos, pipeline.ErrNotFound)
	}
}

// The log checks flag each defect of the log, and of the positions Commit returned,
// by kind; a clean log passes.
func TestCheckLog(t *testing.T) {
	cases := []struct {
		name   string
		change func(h History, log []pipeline.LogEntry) []pipeline.LogEntry
		want   map[string]int
	}{
		{name: "clean", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry { return log }},
		{name: "two appends to a key, written twice", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			h[3].Ops = []Op{ap(2, 5), ap(2, 6)}
			log[3] = entry(4, 2, l(3, 5), 2, l(3, 5, 6))
			return log
		}},
		{name: "acknowledged at a filler", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			h[1].Pos = 2
			return log
		}, want: map[string]int{PositionNotCommit: 1}},
		{name: "acknowledged at another's entry", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			h[1].Pos = 1
			return log
		}, want: map[string]int{PositionNotCommit: 1}},
		{name: "acknowledged and missing", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			return log[:2]
		}, want: map[string]int{MissingFromLog: 2}},
		{name: "filler where the commit was", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			log[2] = filler(3)
			log[3] = entry(4, 2, l(5))
			return log
		}, want: map[string]int{MissingFromLog: 1, PositionNotCommit: 1}},
		{name: "failed commit in the log", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			return append(log, entry(5, 1, l(1, 2, 4)))
		}, want: map[string]int{FailedInLog: 1}},
		{name: "commit twice", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			return append(log, entry(5, 1, l(1, 2, 2), 2, l(3, 5, 3)))
		}, want: map[string]int{DuplicateInLog: 1}},
		{name: "not on the previous value", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			log[2] = entry(3, 1, l(2), 2, l(3))
			return log
		}, want: map[string]int{LogMismatch: 1}},
		{name: "part of a commit", change: func(h History, log []pipeline.LogEntry) []pipeline.LogEntry {
			log[2] = entry(3, 1, l(1, 2))
			log[3] = entry(4, 2, l(5))
			return log
		}, want: map[string]int{LogMismatch: 1, MissingFromLog: 1, PositionNotCommit: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := logHistory()
			log := c.change(h, cleanLog())
			res := Result{}
			res.Add(CheckLog(h, log)...)
			ps, err := CheckPositions(h, lookup(log))
			if err != nil {
				t.Fatal(err)
			}
			res.Add(ps...)
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

// A subscriber's deliveries must be the log, each once, in order, as stored.
func TestCheckSubscription(t *testing.T) {
	log := cleanLog()
	all := func() []Seen {
		var out []Seen
		for _, e := range log {
			out = append(out, SeenOf(0, e))
		}
		return out
	}
	cases := []struct {
		name     string
		seen     func() []Seen
		complete bool
		want     map[string]int
	}{
		{name: "every entry once", seen: all, complete: true},
		{name: "ended early, killed", seen: func() []Seen { return all()[:2] }},
		{name: "ended early", seen: func() []Seen { return all()[:2] }, complete: true, want: map[string]int{SubscriptionSkip: 1}},
		{name: "skipped one", seen: func() []Seen { s := all(); return append(s[:1], s[2:]...) }, complete: true, want: map[string]int{SubscriptionSkip: 1}},
		{name: "repeated one", seen: func() []Seen { s := all(); return append(s[:2], s[1:]...) }, complete: true, want: map[string]int{SubscriptionRepeat: 1}},
		{name: "other contents", seen: func() []Seen { s := all(); s[2].Digest = "x"; return s }, complete: true, want: map[string]int{SubscriptionMismatch: 1}},
		{name: "a position not in the log", seen: func() []Seen { s := all(); s[3].Pos = 9; return s }, want: map[string]int{SubscriptionMismatch: 1, SubscriptionSkip: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Result{}
			res.Add(CheckSubscription("sub", log, c.seen(), c.complete)...)
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
